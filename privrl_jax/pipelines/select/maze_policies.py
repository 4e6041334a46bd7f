"""``privrl select`` over maze agents: train K on a release, score them privately.

Issue 51's "train K agents on a DP synthetic release, score them on the sensitive data
privately, deploy the best" as one accounted procedure.

- **Candidates**: maze-agent configs (:mod:`privrl_jax.pipelines.maze_agent`: an
  algorithm, a budget, a training seed), all trained on one *public* data set, the
  candidates' ``data`` section: a maze-agent collected expert data set from its own key
  (``data.seed``), which stands for a DP synthetic release (training on a release is
  post-processing: no privacy cost). A grid may vary the agents' ``seed`` (their
  training key), never ``data.*``.
- **Sensitive data**: the ``maze`` section's m trajectories of D4RL's expert protocol
  (one privacy unit each, T steps), collected from their own key.
- **One run** of a candidate: GPOPE on state-action features
  (:func:`privrl_jax.ope.gpope_policy_value`: RBF centres by k-means of the release's
  observations, crossed with action bins) estimates the agent's value at the maze's
  reset distribution (public draws); the value is post-processing of GPOPE's DP theta,
  so one run costs one GPOPE plan (Poisson sampling, calibrated to ``maze.epsilon``).
- **Caching is sound**: each agent is trained once (kept under
  ``checkpoints/select/agents/`` and in this process) and reused by every run that draws
  it. Training reads the public release only and is deterministic given the candidate's
  config, so a cached agent is the agent a fresh training would give; the mechanism
  that ``privacy.select`` repeats is the scoring, whose GPOPE noise each run draws from
  its own key.

The release is ``selected.json`` (the chosen candidate) and ``policy.msgpack`` (its
agent's parameters; trained on public data). The audit (NOT DP) holds each agent's
true discounted return (Monte Carlo in the JAX maze from the same start distribution,
same discount), the noiseless LSTDQ value on the sensitive data, one DP value of every
candidate, the scorer's RMSE and rank correlation against the truth, and the chosen /
oracle / random / last true values and the regret.

Measured before trusting (maze2d-umaze, gamma 0.9, m = 400 trajectories of 50 steps).
The features were chosen on a public stand-in (a second expert data set, key 99) by the
noiseless LSTDQ value's RMSE against the truth, for 8 agents of 256x256 networks (true
values 0.37 to 4.78): 1.74 (8 centres, 3 action bins), 1.19 (16 centres, 3 bins: the
shipped choice), 1.53 (32, 3 bins), 11.7 to 14.9 with the linear cross. With the shipped
agents (64x64, select/maze_policies; true values 0.38 to 4.45) LSTDQ's RMSE / Spearman
rank correlation is 0.92 / 0.74 on the stand-in and 0.89 / 0.81 on the sensitive data
sets (experiment policy_selection_maze): the fixed point ranks the agents. GPOPE's DP
value does not (RMSE 2.82, Spearman -0.02 at epsilon 2 a run): 1,000 steps do not reach
the fixed point and the noise dominates at m = 400 (the experiment's notes).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from privrl_jax import agents, envs, ope, privacy
from privrl_jax.pipelines import maze_agent
from privrl_jax.pipelines._agent_train import make_run_agent
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._rundir import (
    atomic_write_bytes,
    private_dir,
    refuse_other_run,
)
from privrl_jax.pipelines._select_config import (
    MazeScoreConfig,
    MazeSelectRunConfig,
)

POLICY_FILE = "policy.msgpack"
# At most this many release observations go into the k-means of the RBF centres.
MAX_CENTRE_DATA = 5_000
# Trained agents of this process, by their config (training is deterministic).
_TRAINED: dict[str, tuple[agents.Agent, Any]] = {}

Trajectories = dict[str, jax.Array]
Policy = Callable[[jax.Array], jax.Array]


def sensitive_trajectories(m: MazeScoreConfig) -> Trajectories:
    """The sensitive trajectories: ``[m, T]`` arrays and an all-true mask.

    Args:
      m: the ``maze`` section.

    Returns:
      ``observations``, ``actions``, ``rewards``, ``next_observations``, ``mask``.
    """
    # One stream per trajectory: collect_dataset groups its rows per stream.
    data = envs.collect_dataset(
        jax.random.key(m.seed),
        m.env,
        m.trajectories * m.horizon,
        action_noise=m.action_noise,
        num_envs=m.trajectories,
        chunk_steps=m.horizon,
    )
    shape = (m.trajectories, m.horizon)
    out = {
        f: jnp.asarray(getattr(data, f)).reshape(*shape, -1)
        for f in ("observations", "actions", "next_observations")
    }
    out["rewards"] = jnp.asarray(data.rewards).reshape(shape)
    out["mask"] = jnp.ones(shape, bool)
    return out


def start_observations(m: MazeScoreConfig) -> jax.Array:
    """[starts, obs_dim] public draws from the maze's reset distribution."""
    env, params = envs.make(m.env)
    keys = jax.random.split(jax.random.key(m.start_seed), m.starts)
    return jax.vmap(lambda k: env.reset(k, params)[0])(keys)


def discounted_return(
    env_name: str,
    act: Callable[[Any, jax.Array], jax.Array],
    state: Any,
    *,
    discount: float,
    episodes: int,
    steps: int,
    key: jax.Array,
) -> float:
    """NOT DP (model access): a deterministic policy's mean discounted return.

    Args:
      env_name: the maze (rollouts start from its resets).
      act: ``act(state, obs) -> action`` (an agent's ``act``; compiled once per act).
      state: the policy's parameters.
      discount: gamma.
      episodes: Monte Carlo rollouts.
      steps: each rollout's length (at most the env's time limit).
      key: the rollouts' key.

    Returns:
      The mean over rollouts of ``sum_t gamma^t r_t``.

    Raises:
      ValueError: ``steps`` past the env's time limit (it would reset mid-rollout).
    """
    env, params = envs.make(env_name)
    if steps > params.max_steps_in_episode:
        raise ValueError(
            f"truth rollouts of {steps} steps exceed {env_name}'s time limit "
            f"{params.max_steps_in_episode}."
        )
    returns = _rollout_returns(
        key, state, params, discount, act=act, env=env, episodes=episodes, steps=steps
    )
    return float(jnp.mean(returns))


@functools.partial(jax.jit, static_argnames=("act", "env", "episodes", "steps"))
def _rollout_returns(key, state, params, discount, *, act, env, episodes, steps):
    def one(k: jax.Array) -> jax.Array:
        k_reset, k_steps = jax.random.split(k)
        obs, env_state = env.reset(k_reset, params)

        def body(carry, kt):
            obs, env_state = carry
            nobs, env_state, r, _, _ = env.step(kt, env_state, act(state, obs), params)
            return (nobs, env_state), r

        _, r = jax.lax.scan(body, (obs, env_state), jax.random.split(k_steps, steps))
        return jnp.dot(r, discount ** jnp.arange(steps, dtype=jnp.float32))

    return jax.vmap(one)(jax.random.split(key, episodes))


def scorer_error(estimates: Any, truths: Any) -> dict[str, float]:
    """A value scorer's error against the true values, over candidates.

    Args:
      estimates: [K] estimated values.
      truths: [K] true values (K >= 2).

    Returns:
      ``rmse`` (root mean squared error) and ``spearman`` (rank correlation; nan
      when either side is constant).

    Raises:
      ValueError: different lengths or fewer than 2 candidates.
    """
    est, tru = np.asarray(estimates, float), np.asarray(truths, float)
    if est.shape != tru.shape or est.ndim != 1 or len(est) < 2:
        raise ValueError(f"need two [K >= 2] vectors; got {est.shape} and {tru.shape}.")
    rmse = float(np.sqrt(np.mean((est - tru) ** 2)))
    if np.ptp(est) == 0 or np.ptp(tru) == 0:
        return {"rmse": rmse, "spearman": float("nan")}
    return {"rmse": rmse, "spearman": float(scipy.stats.spearmanr(est, tru)[0])}


def make_features(release: Any, m: MazeScoreConfig) -> ope.StateActionFeatures:
    """State-action features from the public release (never the sensitive data).

    Args:
      release: the candidates' training data (``Transitions``).
      m: the ``maze`` section (centres and bins).

    Returns:
      RBF features of the release's observations (k-means centres) crossed with
      the action.
    """
    obs = np.asarray(release.observations)
    # An even thinning keeps the k-means cheap and still spans the data.
    obs = obs[:: max(1, len(obs) // MAX_CENTRE_DATA)]
    rbf = ope.RBFFeatures.from_public(obs, m.centers, seed=0)
    return ope.StateActionFeatures(rbf, int(release.actions.shape[1]), m.action_bins)


def make_plan(cfg: MazeSelectRunConfig) -> privacy.DPPlan:
    """One scoring run's GPOPE plan, calibrated to ``maze.epsilon``.

    Args:
      cfg: the selection's config.

    Returns:
      The plan over the m sensitive trajectories (add/remove-one).
    """
    m = cfg.maze
    sampler = privacy.PoissonSampler(
        dataset_size=m.trajectories,
        sampling_rate=m.batch_size / m.trajectories,
        microbatch_size=16,
    )
    plan = privacy.DPPlan(sampler=sampler, l2_clip_norm=m.l2_clip_norm, steps=m.steps)
    return plan.calibrate(m.epsilon, cfg.privacy.delta, "rdp")


def candidate_configs(cfg: MazeSelectRunConfig) -> list[maze_agent.MazeAgentConfig]:
    """Every candidate's maze-agent config.

    Args:
      cfg: the selection's config (its ``candidates`` section).

    Returns:
      One config per candidate, in the grid's product order.

    Raises:
      ValueError: a bad grid key or value (naming the candidate).
    """
    return cfg.candidates.load_each(maze_agent.load)


@functools.lru_cache(maxsize=64)
def _agent(algo: str, updates: int, overrides: str) -> agents.Agent:
    # One agent object per algorithm and hyper-parameters: agents that differ only in
    # their seed share its act, so their truth rollouts compile once. Only IQL's
    # actor schedule reads the budget.
    fields = {
        k: tuple(v) if isinstance(v, list) else v
        for k, v in json.loads(overrides).items()
    }
    return make_run_agent(algo, updates if algo == "iql" else 1, **fields)


def train_agent(
    ccfg: maze_agent.MazeAgentConfig, release: Any, cache: Path | None
) -> tuple[agents.Agent, Any]:
    """A candidate's trained agent (public data only), trained once.

    Args:
      ccfg: the candidate's config (its ``train`` section and ``seed``).
      release: the public training data.
      cache: a folder that keeps the trained parameters (read back on a resume), or
        None (then only this process's memory keeps them).

    Returns:
      The agent and its trained state.
    """
    import flax.serialization  # noqa: PLC0415

    t = ccfg.train
    text = json.dumps(to_dict(ccfg), sort_keys=True)
    agent = _agent(t.algo, t.updates, json.dumps(dict(t.agent), sort_keys=True))
    if text in _TRAINED:
        return _TRAINED[text]
    path = None
    if cache is not None:
        path = cache / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.msgpack"
    if path is not None and path.exists():
        template = agent.init(jax.random.key(0), release)
        state = flax.serialization.from_bytes(template, path.read_bytes())
    else:
        state = agents.train(
            agent,
            release,
            key=jax.random.key(ccfg.seed),
            num_updates=t.updates,
            chunk_size=t.chunk_size,
            progress=False,
        ).state
        if path is not None:
            atomic_write_bytes(path, flax.serialization.to_bytes(state), secret=False)
    _TRAINED[text] = (agent, state)
    return agent, state


def policy_of(agent: agents.Agent, state: Any) -> Policy:
    """The agent's deterministic policy, one observation -> one action."""
    return lambda obs: agent.act(state, obs)


def make_candidate(
    policy: Callable[[], Policy],
    sensitive: Trajectories,
    features: ope.StateActionFeatures,
    starts: jax.Array,
    plan: privacy.DPPlan,
    m: MazeScoreConfig,
) -> Callable[[jax.Array], tuple[dict[str, Any], float]]:
    """``run(key) -> (release, DP score)``: GPOPE's value of one candidate agent.

    Deterministic given ``key`` (its GPOPE schedule and noise derive from it).

    Args:
      policy: the candidate's policy, trained on first call (cached).
      sensitive: the sensitive trajectories.
      features: the public state-action features.
      starts: public start observations.
      plan: the GPOPE plan (its event is the run's).
      m: the ``maze`` section (discount, step size).

    Returns:
      The candidate's run: ``{"value": the DP value}`` and the same value as score.
    """
    memo: dict[str, Any] = {}

    def run(key: jax.Array) -> tuple[dict[str, Any], float]:
        if not memo:
            pi = policy()
            memo["data"] = ope.policy_evaluation_data(
                sensitive["observations"],
                sensitive["actions"],
                sensitive["rewards"],
                sensitive["next_observations"],
                sensitive["mask"],
                pi,
                features,
                m.discount,
            )
            memo["start"] = ope.start_features(starts, pi, features)
        k_sched, k_noise = jax.random.split(key)
        seed = int(jax.random.randint(k_sched, (), 0, 2**31 - 1))
        value = float(
            ope.gpope_policy_value(
                plan,
                memo["data"],
                memo["start"],
                seed=seed,
                key=k_noise,
                step_size=ope.StepSize(m.step_size),
            )
        )
        return {"value": value}, value

    run.memo = memo  # type: ignore[attr-defined] -- the audit reads the data back
    return run


def run(cfg: MazeSelectRunConfig, run_dir: Path, topo: Any) -> dict[str, Any]:
    """Runs (or resumes) a private selection among maze agents into ``run_dir``.

    Args:
      cfg: the selection's config (``candidates.pipeline: maze_agent``).
      run_dir: the run directory (locked by the caller).
      topo: the process topology (one process only).

    Returns:
      The report (+ ``audit``).

    Raises:
      ValueError: a bad grid, or candidates trained on different data.
      BudgetExceededError: the selection does not fit the budget; nothing ran.
    """
    from privrl_jax.pipelines.select import runner  # noqa: PLC0415 -- its helpers

    if not topo.is_primary:
        raise ValueError("privrl select runs in one process; drop the launcher.")
    t0 = time.time()
    resolved = to_dict(cfg)
    refuse_other_run(run_dir, resolved, "select")
    configs = candidate_configs(cfg)
    data_sections = {json.dumps(to_dict(c.data), sort_keys=True) for c in configs}
    if len(data_sections) > 1:
        raise ValueError(
            "the candidates train on different data; they must share one release "
            "(set data.* in candidates.overrides)."
        )
    m = cfg.maze
    if configs[0].data.env != m.env:
        raise ValueError(
            f"the candidates train on {configs[0].data.env} but maze.env is {m.env}."
        )
    plan = make_plan(cfg)
    events = [plan.event()] * len(configs)
    reps = runner.repetitions(cfg)
    selection_event = reps.event(events)
    dataset_id = (
        f"collected:{m.env}:expert:seed={m.seed}:m={m.trajectories}:T={m.horizon}:"
        f"action_noise={m.action_noise}"
    )
    ledger = runner.open_ledger(
        cfg, run_dir, resolved, dataset_id, m.trajectories, selection_event
    )
    secret = runner._secret(run_dir, cfg)
    release = maze_agent.collect(configs[0].data)
    features = make_features(release, m)
    starts = start_observations(m)
    sensitive = sensitive_trajectories(m)
    cache = private_dir(run_dir / "checkpoints" / "select" / "agents")

    def trained(i: int) -> tuple[agents.Agent, Any]:
        return train_agent(configs[i], release, cache)

    def lazy(i: int) -> Callable[[], Policy]:
        return lambda: policy_of(*trained(i))

    cands = [
        make_candidate(lazy(i), sensitive, features, starts, plan, m)
        for i in range(len(configs))
    ]
    result, history = runner.select_recorded(
        cands, events, reps, secret, ledger, lambda r: r
    )
    chosen = result.candidate
    if chosen is not None:
        import flax.serialization  # noqa: PLC0415

        _, state = train_agent(configs[chosen], release, cache)
        atomic_write_bytes(
            run_dir / POLICY_FILE, flax.serialization.to_bytes(state), secret=False
        )
    runner.write_selected(
        run_dir / runner.RELEASE_FILE,
        cfg,
        result,
        ledger,
        "private selection over maze agents (GPOPE value)",
        None if chosen is None else POLICY_FILE,
    )
    run_section = {
        "gpope": plan.describe(),
        "score": "GPOPE's value at the public start distribution (post-processing)",
    }
    report = runner.selection_report(
        cfg,
        resolved,
        reps,
        events,
        selection_event,
        result,
        ledger,
        run_section,
        [POLICY_FILE, runner.RELEASE_FILE, "ledger.json", "report.json", "config.yaml"],
    )
    audit = _audit(cfg, configs, cands, trained, result, history, secret)
    return runner.write_report(run_dir, report, audit, t0)


def _audit(
    cfg: MazeSelectRunConfig,
    configs: list[maze_agent.MazeAgentConfig],
    cands: list[Callable[[jax.Array], tuple[dict[str, Any], float]]],
    trained: Callable[[int], tuple[agents.Agent, Any]],
    result: privacy.SelectionResult,
    history: list[dict[str, Any]],
    secret: privacy.DPSecret,
) -> dict[str, Any]:
    """NOT DP: the true values, the scorer's error, chosen / oracle / random / last."""
    from privrl_jax.pipelines.select import runner  # noqa: PLC0415 -- its helpers

    m = cfg.maze
    truth_key = jax.random.key(m.truth_seed)
    true_values = [
        discounted_return(
            m.env,
            trained(i)[0].act,
            trained(i)[1],
            discount=m.discount,
            episodes=m.truth_episodes,
            steps=m.truth_steps,
            key=truth_key,
        )
        for i in range(len(configs))
    ]
    best = int(np.argmax(true_values))
    chosen = result.candidate
    out: dict[str, Any] = {
        "notice": runner.AUDIT_NOTICE.strip(),
        "runs": result.audit["runs"],
        "history": [
            {
                "candidate": h["candidate"],
                "score": h["score"],
                "true_value": true_values[h["candidate"]],
            }
            for h in history
        ],
        "true_values": true_values,
        "oracle": {"candidate": best, "true_value": true_values[best]},
        # The rules that read no data: a uniformly random candidate (its expected
        # value) and the grid's last one.
        "random_true_value": float(np.mean(true_values)),
        "last_true_value": true_values[-1],
        "chosen_true_value": None if chosen is None else true_values[chosen],
        "regret": None if chosen is None else true_values[best] - true_values[chosen],
    }
    if cfg.audit.every_candidate:
        audit_key = jax.random.fold_in(secret.noise_key, runner.AUDIT_STREAM)
        dp_values = [
            fn(jax.random.fold_in(audit_key, i))[1] for i, fn in enumerate(cands)
        ]
        lstd_values = [
            float(ope.lstd_policy_value(fn.memo["data"], fn.memo["start"]))
            for fn in cands
        ]
        out["every_candidate"] = [
            {"dp_value": d, "lstd_value": v, "true_value": t}
            for d, v, t in zip(dp_values, lstd_values, true_values, strict=True)
        ]
        out["scorer"] = {
            "dp": scorer_error(dp_values, true_values),
            "lstd": scorer_error(lstd_values, true_values),
        }
    return out
