"""GPOPE end to end on the medical chain MDP, Mountain Car or HIV: data, plan,
Algorithm 1, report, audit.

``run(config, run_dir)`` writes into ``run_dir``:

- the **release** (may be published): ``weights.json`` (theta, w; V(s) = theta .
  phi(s)), ``ledger.json``, ``report.json`` (the plan, the calibrated sigma next to the
  paper's Theorem-1 sigma, epsilon spent) and ``config.yaml``;
- the **audit** (reads the sensitive trajectories without DP; never publish):
  ``audit/audit.json``: the MSE of the release against the true V^pi (chain: exact, by a
  linear solve; Mountain Car and HIV: Monte Carlo rollouts of the target policy at
  public evaluation states, ``privrl_jax.ope._montecarlo``) and against the off-policy
  LSTD solution of the data;
- with ``plots`` on: ``values.png`` in the release (the estimate V(s) = theta . phi(s)
  per chain state, or sorted over the public evaluation states; from the DP weights and
  public features only) and ``audit/values_vs_truth.png`` in the audit (the estimate
  against the true V^pi and the LSTD solution, MSEs in the legend);
- ``checkpoints/`` (the secret noise key and sampling seed: never publish) and
  ``report.md`` (both parts, labelled).

GPOPE's iterations run in the library's one DP loop (``_dp_loop.run_dp_loop``): the
unit is one trajectory (data ``[m, T, ...]``, item mask ``[m, T]``), its clipped
direction is ``plan.clipped_sum`` of the per-transition direction (as in
``privrl_jax.ope.gpope``), and the loop draws the secret batches and noise, records the
ledger before each checkpoint, checks the budget and resumes. Rerunning the same
command resumes and spends nothing twice.
"""

from __future__ import annotations

import functools
import io
import json
import math
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import yaml

from privrl_jax import envs, ope, privacy
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._audit_run import audit_into_report, markdown_rows
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._dp_loop import DPProgram, DPSecret, run_dp_loop
from privrl_jax.pipelines._gpope_config import (
    ChainConfig,
    GPOPEConfig,
    GPOPERunConfig,
    PrivacyConfig,
    TruthConfig,
    load,
)
from privrl_jax.pipelines._rundir import (
    atomic_write_bytes,
    atomic_write_text,
    not_private_mark,
    refuse_other_run,
    run_in_dir,
)

__all__ = [
    "ChainConfig",
    "GPOPEConfig",
    "GPOPERunConfig",
    "PrivacyConfig",
    "TruthConfig",
    "load",
    "make_plan",
    "release_values",
    "render_markdown",
    "run",
]

DP_STEP = "GPOPE iteration"
WEIGHTS_FILE = "weights.json"
VALUES_PLOT = "values.png"  # release: from the DP weights and public features only
AUDIT_PLOT = "audit/values_vs_truth.png"  # audit: reads the truth and the data's LSTD
NOT_PRIVATE_SEED = (
    "NOT PRIVATE: privacy.noise_seed is set, so anyone who reads config.yaml can "
    "recompute the DP noise and the sampled trajectories. Use this run for tests and "
    "reproduction only."
)
AUDIT_NOTICE = (
    "NOT DIFFERENTIALLY PRIVATE. Everything in this folder was computed from the "
    "sensitive trajectories without a DP mechanism (the off-policy LSTD solution of "
    "the data and the errors against it; the exact values come from the MDP's model, "
    "which a real data holder would not have). It audits the release for the data "
    "owner; "
    "never publish it.\n"
)


def make_plan(cfg: GPOPERunConfig) -> privacy.DPPlan:
    """GPOPE's plan: the configured trajectory sampler, clip norm h, N steps, sigma."""
    g, p = cfg.gpope, cfg.privacy
    batch = g.batch_size if g.sampler == "poisson" else 1.0
    return _calibrated_plan(
        g.sampler,
        cfg.env.num_trajectories,
        batch,
        g.microbatch_size,
        g.l2_clip_norm,
        g.steps,
        p.epsilon,
        p.delta,
        p.accountant,
    )


@functools.lru_cache(maxsize=32)
def _calibrated_plan(
    sampler_name: str,
    m: int,
    batch: float,
    microbatch: int,
    clip: float,
    steps: int,
    epsilon: float,
    delta: float,
    accountant: str,
) -> privacy.DPPlan:
    # Cached: calibration is a deterministic search of seconds, and a rerun (resume)
    # asks for the same plan again.
    if sampler_name == "uniform_one":
        sampler = privacy.UniformOneSampler(dataset_size=m)
    else:
        sampler = privacy.PoissonSampler(
            dataset_size=m, sampling_rate=batch / m, microbatch_size=microbatch
        )
    plan = privacy.DPPlan(sampler=sampler, l2_clip_norm=clip, steps=steps)
    return plan.calibrate(epsilon, delta, accountant)


@functools.lru_cache(maxsize=8)
def _mdp_and_policies(cfg: GPOPERunConfig):
    # Cached: the chain is built by eager scatters (about a second cold), and run and
    # audit both need it.
    e = cfg.env
    mdp = ope.medical_chain(
        e.num_states, gamma=e.gamma, treatment_cost=e.treatment_cost
    )
    behaviour = ope.treatment_policy(cfg.treat_probs("behaviour_treat"))
    target = ope.treatment_policy(cfg.treat_probs("target_treat"))
    return mdp, behaviour, target, ope.one_hot_features(e.num_states)


@functools.lru_cache(maxsize=8)
def _continuous_task(cfg: GPOPERunConfig):
    """(env, params, behaviour, target, features) of Mountain Car or HIV."""
    e = cfg.env
    if e.name == "mountain_car":
        env, params = envs.mountain_car(max_steps_in_episode=e.max_length)
        greedy, num_actions = envs.energy_pumping_action, envs.MOUNTAIN_CAR_NUM_ACTIONS
        features = ope.mountain_car_features(e.tiles_per_dim, e.num_tilings)
    else:
        env = envs.HIVTreatment()
        params = env.default_params.replace(
            init_log10_spread=e.hiv_init_log10_spread, max_steps_in_episode=e.max_length
        )
        greedy, num_actions = envs.ViralLoadRule(e.hiv_threshold_log10), env.num_actions
        features = ope.hiv_features(e.tiles_per_dim, e.num_tilings)
    behaviour = ope.EpsilonSoft(greedy, e.behaviour_epsilon, num_actions)
    target = ope.EpsilonSoft(greedy, e.target_epsilon, num_actions)
    return env, params, behaviour, target, features


def _features_name(cfg: GPOPERunConfig) -> str:
    e = cfg.env
    if e.name == "chain":
        return f"one_hot({e.num_states})"
    layout = "2-D (position, velocity)" if e.name == "mountain_car" else "1-D per log10 state"
    return (
        f"tile coding {layout}: {e.num_tilings} tilings x {e.tiles_per_dim} tiles, plus a "
        "constant, unit norm (privrl_jax.ope._features)"
    )


def collect_data(cfg: GPOPERunConfig) -> ope.TrajectoryData:
    """The simulated sensitive data: m trajectories of the behaviour policy from a
    public seed (a real data holder loads its records instead)."""
    e = cfg.env
    key = jax.random.fold_in(jax.random.key(cfg.seed), 0)
    if e.name == "chain":
        mdp, behaviour, target, features = _mdp_and_policies(cfg)
        return ope.collect(
            key,
            mdp,
            behaviour,
            target,
            features,
            num_trajectories=e.num_trajectories,
            max_length=e.max_length,
        ).data
    env, params, behaviour, target, features = _continuous_task(cfg)
    return ope.collect_offpolicy(
        key,
        env,
        params,
        behaviour,
        target,
        features,
        gamma=e.gamma,
        reward_scale=e.reward_scale,
        num_trajectories=e.num_trajectories,
        max_length=e.max_length,
    ).data


def _dataset_id(cfg: GPOPERunConfig) -> str:
    """Names the sensitive data by their source, never by a hash of their contents."""
    e = cfg.env
    if e.name == "chain":
        behaviour = list(cfg.treat_probs("behaviour_treat"))
        return (
            f"collected:medical_chain:S={e.num_states}:seed={cfg.seed}:"
            f"m={e.num_trajectories}:T={e.max_length}:behaviour={behaviour}"
        )
    return (
        f"collected:{e.name}:seed={cfg.seed}:m={e.num_trajectories}:T={e.max_length}:"
        f"behaviour_epsilon={e.behaviour_epsilon}"
    )


def _step_size(g: GPOPEConfig) -> ope.StepSize:
    return ope.StepSize(g.step_size, g.decay_steps, g.decay_power)


def _gpope_steps(
    cfg: GPOPERunConfig,
    plan: privacy.DPPlan,
    data: ope.TrajectoryData,
    run_dir: Path,
    ledger: privacy.Ledger | None,
    topo: privacy.Topology,
) -> tuple[dict[str, jax.Array], DPSecret]:
    """Algorithm 1 through the DP loop; returns the final state and the run's secret."""
    g, p = cfg.gpope, cfg.privacy
    n = data.transitions.phi_tm1.shape[-1]
    step_size = _step_size(g)
    clip_fn = plan.clipped_sum(ope.weighted_transition_direction)
    # The per-transition weights (1/T or 1/tau_i) are public or functions of the unit's
    # own mask: precomputed once, they travel with the unit as item data.
    units = ope.with_weights(data.transitions, data.mask, g.normalization)

    def update(state, noisy_mean):
        # The step index lives in the state: the loop passes only (state, noisy mean).
        g_theta, g_w = noisy_mean
        beta = step_size(state["step"])
        return {
            "theta": state["theta"] - beta * g_theta,
            "w": state["w"] - beta * g_w,
            "step": state["step"] + 1,
        }

    init = {"theta": jnp.zeros(n), "w": jnp.zeros(n), "step": jnp.zeros((), jnp.int32)}
    secret = (
        DPSecret.fresh() if p.noise_seed is None else DPSecret.from_seed(p.noise_seed)
    )
    return run_dp_loop(
        plan,
        clip_fn,
        DPProgram(params=lambda s: (s["theta"], s["w"]), update=update),
        init,
        topo.local_block(units),
        ckpt=Checkpoints(run_dir / "checkpoints" / "dp"),
        ledger=ledger,
        what=DP_STEP,
        secret=secret,
        loss_key=jax.random.key(cfg.seed),
        item_mask=topo.local_block(data.mask),
        checkpoint_every=g.checkpoint_every,
        accountant=p.accountant,
        desc=f"GPOPE (eps={p.epsilon:g})",
        divergence_hint="lower gpope.step_size (or use gpope.decay_steps)",
        topology=topo,
    )


def _theorem1(cfg: GPOPERunConfig, plan: privacy.DPPlan) -> dict[str, Any]:
    p = cfg.privacy
    out: dict[str, Any] = {
        "assumes": "one trajectory drawn uniformly per step; replace-one neighbours "
        "(sensitivity 2h); moments accountant with the paper's Lemma-1 bound",
    }
    if math.isinf(p.epsilon):
        return out | {"paper_sigma": None, "noise_multiplier": None}
    t1 = ope.theorem1_sigma(
        p.epsilon, p.delta, steps=plan.steps, dataset_size=plan.dataset_size
    )
    return out | {
        "paper_sigma": t1.paper_sigma,  # noise std / h, the paper's unit
        "noise_multiplier": t1.noise_multiplier,  # noise std / 2h: comparable with ours
        "noise_std": t1.paper_sigma * plan.l2_clip_norms[0],
        "asymptotic_paper_sigma": t1.asymptotic_paper_sigma,
        # The proof's Lemma-1 bound holds only for sigma^2 >= 1 / ln 2 (see
        # ope.theorem1_sigma); below it the theorem's sigma is not a guarantee.
        "lemma1_condition_holds": t1.paper_sigma**2 >= 1 / math.log(2),
    }


@functools.partial(jax.jit, static_argnames="normalization")
def _references(
    mdp: ope.ChainMDP, target: jax.Array, data: ope.TrajectoryData, normalization: str
) -> tuple[jax.Array, jax.Array]:
    """Exact V^pi (from the model) and the data's off-policy LSTD theta, in one jit."""
    lstd, _ = ope.lstd_solution(ope.dataset_stats(data, normalization))
    return ope.exact_values(mdp, target), lstd


def _audit(
    cfg: GPOPERunConfig, theta: np.ndarray, data: ope.TrajectoryData
) -> dict[str, Any]:
    """Errors of the release against the true V^pi and the data's LSTD (NOT DP)."""
    if cfg.env.name != "chain":
        return _audit_continuous(cfg, theta, data)
    mdp, _, target, features = _mdp_and_policies(cfg)
    exact, lstd = _references(mdp, target, data, cfg.gpope.normalization)
    theta = jnp.asarray(theta)
    out: dict[str, Any] = {
        "notice": AUDIT_NOTICE.strip(),
        "exact_values": np.asarray(exact).tolist(),
        "estimated_values": np.asarray(features @ theta).tolist(),
        "mse_vs_exact": float(ope.value_mse(theta, features, exact)),
    }
    if bool(jnp.all(jnp.isfinite(lstd))):
        out |= {
            "lstd_values": np.asarray(features @ lstd).tolist(),
            "mse_vs_lstd": float(ope.value_mse(theta, features, features @ lstd)),
            "lstd_mse_vs_exact": float(ope.value_mse(lstd, features, exact)),
        }
    else:  # a level never visited leaves A singular
        out["lstd_values"] = None
    return out


@functools.lru_cache(maxsize=8)
def _evaluation_states(cfg: GPOPERunConfig):
    """(obs, states) of the public evaluation states: drawn from the env's start
    distribution and the target policy with a public seed, never from the data, so
    the release plot may use them. Cached: the release plot and the audit share them."""
    t = cfg.truth
    env, params, _, target, _ = _continuous_task(cfg)
    # Public seed distinct from the data's (fold_in 0).
    return ope.evaluation_states(
        jax.random.fold_in(jax.random.key(cfg.seed), 1),
        env,
        params,
        num_states=t.eval_states,
        policy=target,
        max_steps=t.eval_max_steps,
    )


def true_values(cfg: GPOPERunConfig) -> tuple[jax.Array, ope.MCValues]:
    """Features [K, n] of the public evaluation states and their Monte Carlo V^pi."""
    e, t = cfg.env, cfg.truth
    env, params, _, target, features = _continuous_task(cfg)
    key = jax.random.key(cfg.seed)
    obs, states = _evaluation_states(cfg)
    mc = ope.mc_values(
        jax.random.fold_in(key, 2),
        env,
        params,
        target,
        obs,
        states,
        gamma=e.gamma,
        reward_scale=e.reward_scale,
        horizon=t.horizon,
        num_rollouts=t.rollouts,
    )
    return jax.vmap(features)(obs), mc


def lstd_min_norm(data: ope.TrajectoryData, normalization: str) -> jax.Array:
    """Off-policy LSTD theta of the data, the minimum-norm least-squares solution of
    A theta = b (tiles the data never visit leave A singular; they get 0)."""
    stats = ope.pooled_stats(data, normalization)
    return jnp.linalg.lstsq(stats.a, stats.b)[0]


def _audit_continuous(
    cfg: GPOPERunConfig, theta: np.ndarray, data: ope.TrajectoryData
) -> dict[str, Any]:
    phi, mc = true_values(cfg)
    theta = jnp.asarray(theta)
    lstd = lstd_min_norm(data, cfg.gpope.normalization)
    return {
        "notice": AUDIT_NOTICE.strip(),
        "metric": (
            "mean over the evaluation states of (theta . phi(s) - V_MC(s))^2; V_MC from "
            "Monte Carlo rollouts of the target policy (see truth.*)"
        ),
        "mc_values": np.asarray(mc.values).tolist(),
        "mc_stderr": np.asarray(mc.stderr).tolist(),
        "mc_mean_squared_stderr": float(jnp.mean(mc.stderr**2)),
        "estimated_values": np.asarray(phi @ theta).tolist(),
        "mse_vs_exact": float(ope.value_mse(theta, phi, mc.values)),
        "lstd_values": np.asarray(phi @ lstd).tolist(),
        "mse_vs_lstd": float(ope.value_mse(theta, phi, phi @ lstd)),
        "lstd_mse_vs_exact": float(ope.value_mse(lstd, phi, mc.values)),
        "zero_predictor_mse": float(jnp.mean(mc.values**2)),
    }


def run(cfg: GPOPERunConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs (or resumes) GPOPE into ``run_dir``; returns the report (+ ``audit``).

    The directory is locked while the run is alive; every input is checked before
    anything is written; a rerun with a different config is refused. Under ``jax.distributed``
    every process runs it with the same config and directory: each clips the trajectories of its
    own block, process 0 alone locks the directory and writes the ledger, the weights and the
    reports; the others return ``{"process_id": p}`` (docs/multihost.md).
    """
    return run_in_dir(Path(run_dir), lambda d, topo: _run(cfg, d, topo))


def _run(cfg: GPOPERunConfig, run_dir: Path, topo: privacy.Topology) -> dict[str, Any]:
    resolved = to_dict(cfg)
    cfg_file = run_dir / "config.yaml"
    if topo.is_primary:  # process 0 checks and owns the directory
        refuse_other_run(run_dir, resolved, "GPOPE", mutable=("audit",))
    t0 = time.time()
    plan = make_plan(cfg)  # validates delta against m before anything is written
    if topo.is_primary:
        atomic_write_text(cfg_file, yaml.safe_dump(resolved, sort_keys=False))

    data = collect_data(cfg)

    weights_file = run_dir / WEIGHTS_FILE
    ledger = None
    if topo.is_primary:
        ledger = privacy.Ledger.open(
            run_dir,
            dataset_id=_dataset_id(cfg),
            dataset_size=plan.dataset_size,
            target_epsilon=cfg.privacy.epsilon,
            target_delta=cfg.privacy.delta,
            artifacts=[run_dir / "checkpoints" / "dp", weights_file],
            not_private=not_private_mark(NOT_PRIVATE_SEED, cfg.privacy.noise_seed),
        )
        if weights_file.exists():
            head = json.loads(weights_file.read_text()).get("ledger_head", "")
            ledger.require_head(str(head), f"the release {weights_file}")
    state, secret = _gpope_steps(cfg, plan, data, run_dir, ledger, topo)
    if not topo.is_primary:
        return {"process_id": topo.process_id}
    theta, w = np.asarray(state["theta"]), np.asarray(state["w"])
    private = plan.private and not secret.fixed
    atomic_write_text(
        weights_file,
        json.dumps(
            {
                "method": "GPOPE",
                "env": cfg.env.name,
                "features": _features_name(cfg),
                "theta": theta.tolist(),
                "w": w.tolist(),
                "private": private,
                "epsilon": cfg.privacy.epsilon,
                "delta": cfg.privacy.delta,
                "ledger_head": ledger.head,
            },
            indent=2,
        ),
    )

    acc = cfg.privacy.accountant
    spent = ledger.report()
    report: dict[str, Any] = {
        "config": resolved,
        "gpope": {
            **plan.describe(),
            "noise_multiplier": plan.noise_multipliers[0],
            "noise_std": plan.noise_stds[0],
            "private": private,
            "noise_secret": "fixed by privacy.noise_seed (not private)"
            if secret.fixed
            else "drawn from os.urandom; stored only in checkpoints/",
            "dataset_size_source": "env.num_trajectories (declared, public)",
        },
        "theorem1": _theorem1(cfg, plan),
        # From the ledger's own report: one accountant pass (about 0.4 s each for the
        # sampled-without-replacement event).
        "epsilon_spent": spent[acc].get("epsilon", math.inf)
        if plan.private
        else math.inf,
        "accountant": acc,
        "privacy": spent,
        "weights": {"theta": theta.tolist(), "w": w.tolist()},
        "release": {
            "publishable": [WEIGHTS_FILE, "ledger.json", "report.json", "config.yaml"]
            + ([VALUES_PLOT] if cfg.plots else []),
            "never_publish": ["audit/", "checkpoints/"],
        },
        "plots": {"release": [VALUES_PLOT], "audit": [AUDIT_PLOT]}
        if cfg.plots
        else {"release": [], "audit": []},
    }
    if not private:
        report["warning"] = (
            NOT_PRIVATE_SEED
            if secret.fixed
            else ("NOT PRIVATE: privacy.epsilon = inf runs without noise.")
        )
    audit_into_report(cfg.audit, run_dir, ledger, report)
    report["wall_time_s"] = time.time() - t0

    audit_dir = run_dir / "audit"
    audit_dir.mkdir(exist_ok=True)
    atomic_write_text(audit_dir / "NOT_DP_README.txt", AUDIT_NOTICE)
    audit = _audit(cfg, theta, data)
    if cfg.plots:
        # Release first, from theta and public features only; the audit plot reads
        # the audit dict (truth and the data's LSTD).
        _plot_release_values(cfg, theta, report["gpope"], run_dir / VALUES_PLOT)
        _plot_audit_values(cfg, audit, run_dir / AUDIT_PLOT)
    atomic_write_text(
        run_dir / "report.json", json.dumps(report, indent=2, default=float)
    )
    atomic_write_text(
        audit_dir / "audit.json", json.dumps(audit, indent=2, default=float)
    )
    report["audit"] = audit
    atomic_write_text(run_dir / "report.md", render_markdown(report))
    return report


def _write_png(fig, path: Path) -> None:
    """Renders a matplotlib Figure to PNG and writes it atomically."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


def _new_axes(figsize=(6.0, 3.8)):
    # matplotlib.figure.Figure directly (not pyplot): no backend, no global state;
    # imported here so that importing the pipeline stays light.
    import matplotlib.figure

    fig = matplotlib.figure.Figure(figsize=figsize)
    return fig, fig.add_subplot()


def _values_title(cfg: GPOPERunConfig, g: dict[str, Any]) -> str:
    p = cfg.privacy
    title = (
        f"GPOPE on {cfg.env.name}: eps={p.epsilon:g}, delta={p.delta:g}, "
        f"noise multiplier={g['noise_multiplier']:.3g}"
    )
    return title if g["private"] else title + " (NOT PRIVATE)"


def release_values(cfg: GPOPERunConfig, theta: np.ndarray) -> np.ndarray:
    """The values ``values.png`` shows: theta . phi(s) at every chain state, or sorted
    ascending over the public evaluation states (Mountain Car, HIV). Public inputs only:
    the DP theta, the features and states from public seeds."""
    theta = jnp.asarray(theta)
    if cfg.env.name == "chain":
        *_, features = _mdp_and_policies(cfg)
        return np.asarray(features @ theta)
    features = _continuous_task(cfg)[-1]
    obs, _ = _evaluation_states(cfg)
    return np.sort(np.asarray(jax.vmap(features)(obs) @ theta))


def _plot_release_values(
    cfg: GPOPERunConfig, theta: np.ndarray, g: dict[str, Any], path: Path
) -> None:
    """Release plot: V(s) = theta . phi(s) per chain state, or sorted over the public
    evaluation states of Mountain Car / HIV. Reads only the DP theta and public
    features (the evaluation states come from a public seed, not the data)."""
    v = release_values(cfg, theta)
    label = "GPOPE estimate (DP)" if g["private"] else "GPOPE estimate (not private)"
    fig, ax = _new_axes()
    if cfg.env.name == "chain":
        ax.bar(np.arange(v.size), v, color="tab:blue", label=label)
        ax.set_xticks(np.arange(v.size))
        ax.set_xlabel("chain state (health level)")
    else:
        ax.plot(np.arange(v.size), v, marker=".", color="tab:blue", label=label)
        ax.set_xlabel("public evaluation state (sorted by estimate)")
    ax.axhline(0.0, color="0.6", lw=0.8)
    ax.set_ylabel("estimated V(s) = theta . phi(s)")
    ax.set_title(_values_title(cfg, g), fontsize=9)
    ax.legend(fontsize=8)
    _write_png(fig, path)


def _plot_audit_values(cfg: GPOPERunConfig, audit: dict[str, Any], path: Path) -> None:
    """Audit plot (NOT DP): the estimate against the true V^pi and the data's LSTD,
    with each one's MSE against the truth in the legend. Continuous envs: states
    sorted by their Monte Carlo value, with +-2 standard errors shaded."""
    chain = cfg.env.name == "chain"
    truth = np.asarray(audit["exact_values" if chain else "mc_values"])
    est = np.asarray(audit["estimated_values"])
    lstd = None if audit.get("lstd_values") is None else np.asarray(audit["lstd_values"])
    order = np.arange(truth.size) if chain else np.argsort(truth)
    x = np.arange(truth.size)
    fig, ax = _new_axes()
    truth_name = "true V^pi (exact)" if chain else "true V^pi (Monte Carlo)"
    ax.plot(x, truth[order], "k-o", ms=3, label=truth_name)
    if not chain and audit.get("mc_stderr") is not None:
        se = 2 * np.asarray(audit["mc_stderr"])[order]
        ax.fill_between(
            x, truth[order] - se, truth[order] + se, color="0.8", lw=0, label="+-2 s.e."
        )
    ax.plot(
        x, est[order], "-s", ms=3, color="tab:blue",
        label=f"GPOPE, MSE vs truth {audit['mse_vs_exact']:.3g}",
    )
    if lstd is not None:
        ax.plot(
            x, lstd[order], "--^", ms=3, color="tab:orange",
            label=f"LSTD (no DP), MSE vs truth {audit['lstd_mse_vs_exact']:.3g}",
        )
    if chain:
        ax.set_xticks(x)
        ax.set_xlabel("chain state (health level)")
    else:
        ax.set_xlabel("evaluation state (sorted by Monte Carlo value)")
    ax.set_ylabel("V(s)")
    ax.set_title("AUDIT, NOT DIFFERENTIALLY PRIVATE: estimate vs truth", fontsize=9)
    ax.legend(fontsize=8)
    _write_png(fig, path)


def _num(x: float | None, fmt: str = ".4g") -> str:
    return "n/a" if x is None else format(x, fmt)


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a GPOPE report."""
    g, t1, p = report["gpope"], report["theorem1"], report["privacy"]
    audit = report.get("audit", {})
    sigma = g["noise_multiplier"]
    sigma_text = "0 (no noise: not private)" if sigma == 0 else _num(sigma)
    theta = [round(x, 4) for x in report["weights"]["theta"]]
    lines = ["# GPOPE report", ""]
    if "warning" in report:
        lines += [f"**{report['warning']}**", ""]
    if p.get("over_budget"):
        lines += ["**OVER BUDGET: the ledger records more than the budget.**", ""]
    rows = [
        (
            "budget (epsilon, delta)",
            f"({p['budget']['epsilon']:g}, {p['budget']['delta']:g})",
        ),
        (
            f"epsilon spent ({report['accountant']}, ledger)",
            _num(report["epsilon_spent"]),
        ),
        (
            "sampling, neighbouring, m, expected batch",
            (
                f"{g['sampling']}, {g['neighboring']}, {g['dataset_size']}, "
                f"{g['expected_batch_size']:g}"
            ),
        ),
        ("steps N, clip norm h", f"{g['steps']}, {g['l2_clip_norms'][0]:g}"),
        (
            "calibrated sigma (noise std / sensitivity), noise std",
            f"{sigma_text}, {_num(g['noise_std'])}",
        ),
        (
            "Theorem-1 sigma (noise std / h), as noise std / 2h, noise std",
            (
                f"{_num(t1.get('paper_sigma'))}, {_num(t1.get('noise_multiplier'))}, "
                f"{_num(t1.get('noise_std'))}"
            ),
        ),
        (
            "theta (V = theta . phi)",
            str(theta) if len(theta) <= 10 else f"{len(theta)} weights: weights.json",
        ),
    ]
    if "mse_vs_exact" in audit:
        rows.append(
            (
                "MSE vs true V^pi (chain exact, else Monte Carlo) / vs LSTD (audit)",
                f"{_num(audit['mse_vs_exact'])} / {_num(audit.get('mse_vs_lstd'))}",
            )
        )
    lines += ["| quantity | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows] + markdown_rows(report)
    theorem = (
        f"Theorem 1 assumes {t1['assumes']}; under poisson sampling it is shown for "
        "scale only."
    )
    if not t1.get("lemma1_condition_holds", True):
        theorem += (
            " Its sigma here is below the proof's Lemma-1 range (sigma^2 >= 1 / ln 2), "
            "so it is no guarantee."
        )
    plots = report.get("plots", {"release": [], "audit": []})
    release = (
        "**Release** (may be published): "
        + ", ".join(
            f"`{f}`" for f in report["release"]["publishable"] if f not in plots["release"]
        )
        + "."
    )
    if plots["release"]:
        release += " Release plots: " + ", ".join(f"`{f}`" for f in plots["release"]) + "."
    audit_text = (
        "**Audit** (`audit/`, NOT differentially private, never publish): the errors "
        "against the true values (exact or Monte Carlo) and the LSTD solution read the "
        "sensitive "
        "trajectories without DP. `checkpoints/` hold the secret noise key and "
        "sampling seed: never publish them."
    )
    if plots["audit"]:
        audit_text += " Audit plots: " + ", ".join(f"`{f}`" for f in plots["audit"]) + "."
    lines += ["", theorem, "", release, "", audit_text, ""]
    lines += [f"Wall time: {report['wall_time_s']:.1f} s.", ""]
    return "\n".join(lines)
