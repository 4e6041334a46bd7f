"""POOL end to end on lost-sales inventory: data, private plan, policy, report.

``run(config, run_dir)`` writes into ``run_dir``:

- the **release** (may be published): ``policy.npz`` (the private Q tables at the
  cells, the public geometry and candidate actions) with ``policy.json`` (how to
  read it), ``ledger.json`` (the zCDP release: one ``GaussianDpEvent`` per run,
  rho = 1 / (2 sigma^2)), ``report.json`` / ``report.md`` (rho, epsilon, the
  relative optimality gap against the SAA benchmark), ``config.yaml`` and
  ``plots/`` -- the evaluation runs the released policy in the simulator and
  never reads the sensitive episodes;
- ``checkpoints/secret.npz``: the secret noise key (never publish).

The sensitive episodes are simulated from the public ``seed`` (a data holder
would load its own records). The noise comes from ``DPSecret.fresh()``; with
``privacy.noise_seed`` set the run is NOT PRIVATE and every output says so. The
budget guard runs before any noise is drawn: the run's rho plus what the ledger
already holds must fit ``privacy.rho_budget`` (and its epsilon the ledger's
target). A rerun of a finished run spends nothing; a run killed after its
ledger entry recomputes the same release from the stored secret.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import yaml

from privrl_jax import planning, privacy
from privrl_jax.data import load_rossmann, synthetic_demand
from privrl_jax.envs import (
    InventoryParams,
    base_stock_policy,
    collect_inventory_data,
    make_inventory_params,
)
from privrl_jax.pipelines._audit_run import audit_into_report, markdown_rows
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._dp_loop import DPSecret
from privrl_jax.pipelines._pool_config import (
    EvalConfig,
    InventoryEnvConfig,
    PoolAlgoConfig,
    PoolPrivacyConfig,
    PoolRunConfig,
    load,
)
from privrl_jax.pipelines._rundir import (
    RunLock,
    atomic_write_bytes,
    atomic_write_text,
    clean_stale_temp_files,
    not_private_mark,
    private_dir,
    refuse_other_run,
    write_png,
)

__all__ = [
    "EvalConfig",
    "InventoryEnvConfig",
    "PoolAlgoConfig",
    "PoolPrivacyConfig",
    "PoolRunConfig",
    "build",
    "load",
    "render_markdown",
    "run",
]

POLICY_FILE = "policy.npz"
POLICY_META = "policy.json"
SECRET_FILE = "secret.npz"
NOT_PRIVATE_SEED = (
    "NOT PRIVATE: privacy.noise_seed is set, so anyone who reads config.yaml can "
    "recompute the DP noise. Use this run for tests and reproduction only."
)
WHAT = {
    "pool": "POOL statistics (counts, next-value sums, squares)",
    "grid": "grid statistics (counts, next-value sums, squares)",
    "input_perturbation": "input perturbation (noisy episodes)",
    "output_perturbation": "output perturbation (noisy Q tables)",
}


def demand_series(
    env: InventoryEnvConfig, horizon_days: int = 364
) -> np.ndarray | None:
    """The demand series of the config (None for a parametric law)."""
    if env.demand == "synthetic":
        return synthetic_demand(
            horizon_days,
            env.num_products,
            target_mean=env.demand_mean,
            seed=env.demand_seed,
        )
    if env.demand == "rossmann":
        stores = tuple(env.stores)
        if len(stores) != env.num_products:
            raise ValueError(
                f"env.stores must name env.num_products={env.num_products} "
                f"stores; got {list(stores)}."
            )
        return load_rossmann(env.demand_file, stores, target_mean=env.demand_mean)
    return None


def build_params(env: InventoryEnvConfig) -> InventoryParams:
    """The inventory MDP of the config."""
    series = demand_series(env)
    return make_inventory_params(
        env.num_products,
        env.horizon,
        boundary=env.boundary,
        demand="uniform" if series is not None else env.demand,
        demand_mean=env.demand_mean,
        demand_scale=env.demand_scale,
        holding_cost=env.holding_cost,
        lost_sales_cost=env.lost_sales_cost,
        order_cost=env.order_cost,
        init_high=env.init_high,
        demand_series=series,
    )


@functools.lru_cache(maxsize=16)
def build(cfg: PoolRunConfig):
    """(params, behaviour policy, geometry, candidate actions) of a config (public).

    Cached: the geometry is a host-side search, and the same behaviour closure lets
    the jitted collection and rollouts reuse their compilations on a rerun.
    """
    e, a = cfg.env, cfg.pool
    params = build_params(e)
    behaviour = base_stock_policy(
        jnp.full((e.num_products,), e.behaviour_level), e.behaviour_noise
    )
    if a.method == "grid":
        geom = planning.make_grid_geometry(params.boundary, a.grid_bins)
    elif a.zones == "additive":
        geom = planning.make_additive_geometry(
            params.boundary,
            a.num_zones,
            state_dim=e.num_products,
            radius=a.radius,
            affine=a.affine,
            limiter=a.limiter,
            seed=a.geometry_seed,
            action_levels=a.action_levels,
        )
    else:
        box = np.minimum(np.asarray(params.boundary[0]), 1.0)
        radius = a.radius if a.radius is not None else float(np.linalg.norm(box))
        geom = planning.make_zone_geometry(
            params.boundary,
            a.num_zones,
            radius=radius,
            affine=a.affine,
            limiter=a.limiter,
            seed=a.geometry_seed,
        )
    actions = planning.action_candidates(e.num_products, a.action_levels, a.max_actions)
    return params, behaviour, geom, actions


def make_mechanism(cfg: PoolRunConfig, geom) -> privacy.GaussianMechanism | None:
    """The run's one Gaussian mechanism (None for ``non_private``)."""
    a, e, rho = cfg.pool, cfg.env, cfg.privacy.rho
    if a.method in ("pool", "grid"):
        return planning.pool_mechanism(rho, e.horizon)
    if a.method == "input_perturbation":
        return planning.input_mechanism(rho, e.horizon, e.num_products, e.num_products)
    if a.method == "output_perturbation":
        return planning.output_mechanism(rho, e.horizon, geom.num_cells)
    return None


def plan(cfg: PoolRunConfig, data, params, geom, actions, mechanism, key) -> jax.Array:
    """[H, K] Q tables of the configured method (the release, or computed from it)."""
    pc = planning.PoolConfig(
        bonus_scale=cfg.pool.bonus_scale, failure_prob=cfg.pool.failure_prob
    )
    m = cfg.pool.method
    if m in ("pool", "grid"):
        return planning.pool_plan(key, data, geom, actions, mechanism, pc).q_tables
    if m == "input_perturbation":
        noisy = planning.input_perturbation(key, data, params.boundary, mechanism)
        return planning.pool_plan(key, noisy, geom, actions, None, pc).q_tables
    exact = planning.pool_plan(key, data, geom, actions, None, pc).q_tables
    if m == "output_perturbation":
        return planning.output_perturbation(key, exact, mechanism)
    return exact


def evaluate(
    cfg: PoolRunConfig, params, behaviour, geom, actions, q_tables
) -> dict[str, Any]:
    """Costs from zero inventory, the SAA benchmark c* and relative gaps (simulator
    only)."""
    v = cfg.eval
    key = jax.random.fold_in(jax.random.key(cfg.seed), 2)
    saa = planning.saa_base_stock(
        jax.random.fold_in(key, 0), params, v.saa_samples, v.saa_levels
    )
    ek = jax.random.fold_in(key, 1)  # common random numbers for every policy
    c_star = float(planning.base_stock_cost(ek, params, saa.levels, v.eval_episodes))
    cost = float(
        planning.greedy_policy_cost(
            ek, params, geom, q_tables, actions, v.eval_episodes
        )
    )
    c_beh = planning.policy_cost(ek, params, behaviour, v.eval_episodes)
    return {
        "policy_class_of_benchmark": "stationary base-stock, levels searched on a grid of "
        f"{v.saa_levels} per product, SAA over {v.saa_samples} demand paths, zero "
        "initial "
        "inventory",
        "saa_levels": np.asarray(saa.levels).tolist(),
        "saa_in_sample_cost": float(saa.saa_cost),
        "benchmark_cost": c_star,
        "policy_cost": cost,
        "behaviour_cost": c_beh,
        "gap": planning.relative_gap(cost, c_star),
        "behaviour_gap": planning.relative_gap(c_beh, c_star),
        "eval_episodes": v.eval_episodes,
    }


def _dataset_id(cfg: PoolRunConfig) -> str:
    """Names the sensitive episodes by their source, never by a hash of their contents."""
    e = cfg.env
    return (
        f"collected:inventory:w={e.num_products}:H={e.horizon}:seed={cfg.seed}:"
        f"N={e.num_episodes}:demand={e.demand}:behaviour=({e.behaviour_level},"
        f"{e.behaviour_noise})"
        + (f":demand_seed={e.demand_seed}" if e.demand_seed else "")
    )


def _rho_spent(ledger: privacy.Ledger) -> float:
    """rho of the ledger's Gaussian releases: sum count / (2 sigma^2)."""
    total = 0.0
    for r in ledger.releases:
        ev = r.dp_event()
        if not isinstance(ev, dp_accounting.GaussianDpEvent):
            raise privacy.LedgerError(
                f"{ledger.path} holds a non-Gaussian release ({r.what}); "
                "POOL's rho budget cannot account it."
            )
        total += r.count * 0.5 / ev.noise_multiplier**2
    return total


def _target_epsilon(cfg: PoolRunConfig) -> float:
    """epsilon of the rho budget through dp-accounting (RDP of ``ZCDpEvent``)."""
    budget = cfg.rho_budget
    if math.isinf(budget):
        return math.inf
    return privacy.compute_epsilon(
        dp_accounting.ZCDpEvent(budget), cfg.privacy.delta
    ).epsilon


def check_budget(
    cfg: PoolRunConfig, ledger: privacy.Ledger, mechanism: privacy.GaussianMechanism
) -> float:
    """Raises BudgetExceededError (nothing released) unless the release fits; returns
    rho after."""
    after = _rho_spent(ledger) + mechanism.rho
    if after > cfg.rho_budget * (1 + 1e-9):
        raise privacy.BudgetExceededError(
            f"this release (rho={mechanism.rho:.4g}) would bring rho to {after:.4g} > "
            f"privacy.rho_budget={cfg.rho_budget:g} ({_rho_spent(ledger):.4g} spent in "
            f"{ledger.path.parent}). Nothing was released. Lower privacy.rho or use a "
            "new "
            "--out directory with its own budget."
        )
    ledger.check(mechanism.event())
    return after


def run(cfg: PoolRunConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs POOL (or a baseline) into ``run_dir``; returns the report."""
    run_dir = Path(run_dir)
    with RunLock(run_dir):
        clean_stale_temp_files(run_dir)
        return _run(cfg, run_dir)


def _secret(cfg: PoolRunConfig, path: Path) -> DPSecret:
    if path.exists():
        with np.load(path) as z:
            return DPSecret.from_tree({"words": z["words"], "fixed": z["fixed"]})
    secret = (
        DPSecret.fresh()
        if cfg.privacy.noise_seed is None
        else DPSecret.from_seed(cfg.privacy.noise_seed)
    )
    private_dir(path.parent)
    import io

    buf = io.BytesIO()
    np.savez(buf, **secret.to_tree())
    atomic_write_bytes(path, buf.getvalue(), suffix=".json.tmp", secret=True)
    return secret


def _stage(t0: float, what: str) -> None:
    # POOL's stages are single jitted calls, with no loop to put a bar on: say each as
    # it ends (stderr, so --json output stays one object).
    print(f"POOL: {what} ({time.time() - t0:.1f} s)", file=sys.stderr, flush=True)


def _run(cfg: PoolRunConfig, run_dir: Path) -> dict[str, Any]:
    resolved = to_dict(cfg)
    cfg_file = run_dir / "config.yaml"
    refuse_other_run(run_dir, resolved, "POOL", mutable=("audit",))
    t0 = time.time()
    params, behaviour, geom, actions = build(cfg)  # validates the demand file first
    mechanism = make_mechanism(cfg, geom)
    e = cfg.env
    privacy.validate_delta(cfg.privacy.delta, dataset_size=e.num_episodes)
    atomic_write_text(cfg_file, yaml.safe_dump(resolved, sort_keys=False))
    # Simulated sensitive data from a public seed (a data holder loads its records).
    data = collect_inventory_data(
        jax.random.fold_in(jax.random.key(cfg.seed), 0),
        params,
        behaviour,
        e.num_episodes,
    )
    policy_file, meta_file = run_dir / POLICY_FILE, run_dir / POLICY_META
    secret_file = run_dir / "checkpoints" / SECRET_FILE
    ledger = privacy.Ledger.open(
        run_dir,
        dataset_id=_dataset_id(cfg),
        dataset_size=e.num_episodes,
        target_epsilon=_target_epsilon(cfg),
        target_delta=cfg.privacy.delta,
        artifacts=[policy_file, secret_file],
        not_private=not_private_mark(NOT_PRIVATE_SEED, cfg.privacy.noise_seed),
    )
    if meta_file.exists():
        ledger.require_head(
            str(json.loads(meta_file.read_text()).get("ledger_head", "")),
            f"the release {meta_file}",
        )
    released = any(r.what == WHAT.get(cfg.pool.method) for r in ledger.releases)
    secret = None
    if mechanism is not None:
        if not released:
            check_budget(cfg, ledger, mechanism)  # before any noise is drawn
        secret = _secret(cfg, secret_file)
        if not released:
            ledger.record(
                mechanism.event(),
                what=WHAT[cfg.pool.method],
                params=mechanism.describe(),
            )
        key = secret.noise_key
    else:
        key = jax.random.key(0)  # unused: no noise
    if policy_file.exists():
        with np.load(policy_file) as z:
            q_tables = jnp.asarray(z["q_tables"])
    else:
        _stage(
            t0,
            f"collected {e.num_episodes} episodes; planning (the first call compiles)",
        )
        q_tables = plan(cfg, data, params, geom, actions, mechanism, key)
        _stage(t0, "planned")
        import io

        buf = io.BytesIO()
        zg = geom.parts if isinstance(geom, planning.AdditiveGeometry) else geom
        np.savez(
            buf,
            q_tables=np.asarray(q_tables),
            actions=np.asarray(actions),
            boundary=np.asarray(params.boundary),
            **(
                {
                    "points": np.asarray(zg.points),
                    "coef": np.asarray(zg.coef),
                    "origin": np.asarray(zg.origin),
                }
                if hasattr(zg, "points")
                else {}
            ),
        )
        atomic_write_bytes(policy_file, buf.getvalue(), suffix=".json.tmp")
    private = mechanism is not None and not (secret is not None and secret.fixed)
    meta = {
        "method": cfg.pool.method,
        "geometry": (
            "grid"
            if cfg.pool.method == "grid"
            else "additive l2 zones (one per product, Q_bar = their sum)"
            if isinstance(geom, planning.AdditiveGeometry)
            else "l2 zones"
        ),
        "num_cells": int(geom.num_cells),
        "read": "pi_h(s) = argmax over `actions` of Q_bar_h(s, a) from q_tables[h] "
        "(privrl_jax.planning.greedy_policy with the geometry rebuilt from "
        "config.yaml)",
        "private": private,
        "rho": cfg.privacy.rho,
        "ledger_head": ledger.head,
    }
    atomic_write_text(meta_file, json.dumps(meta, indent=2))

    spent = ledger.report()
    _stage(t0, "evaluating the policy")
    evaluation = evaluate(cfg, params, behaviour, geom, actions, q_tables)
    _stage(t0, "evaluated")
    rho_spent = _rho_spent(ledger)
    report: dict[str, Any] = {
        "config": resolved,
        "privacy": {
            "rho": rho_spent if mechanism is not None else math.inf,
            "rho_budget": cfg.rho_budget,
            "delta": cfg.privacy.delta,
            "epsilon": spent["rdp"].get("epsilon", math.inf)
            if mechanism is not None
            else math.inf,
            "epsilon_of_rho_zcdp": privacy.compute_epsilon(
                dp_accounting.ZCDpEvent(rho_spent), cfg.privacy.delta
            ).epsilon
            if mechanism is not None
            else math.inf,
            "mechanism": mechanism.describe() if mechanism is not None else None,
            "noise_std": mechanism.noise_std if mechanism is not None else 0.0,
            "private": private,
            "noise_secret": (
                "fixed by privacy.noise_seed (not private)"
                if secret is not None and secret.fixed
                else "drawn from os.urandom; stored only in checkpoints/"
            ),
            "ledger": spent,
        },
        "evaluation": evaluation,
        "release": {
            "publishable": [
                POLICY_FILE,
                POLICY_META,
                "ledger.json",
                "report.json",
                "report.md",
                "config.yaml",
                "plots/",
            ],
            "never_publish": ["checkpoints/"],
        },
    }
    if not private:
        report["warning"] = (
            NOT_PRIVATE_SEED
            if secret is not None and secret.fixed
            else "NOT PRIVATE: pool.method=non_private adds no noise."
        )
    audit_into_report(cfg.audit, run_dir, ledger, report)
    report["wall_time_s"] = time.time() - t0
    _plots(run_dir, cfg, geom, actions, q_tables, evaluation)
    atomic_write_text(
        run_dir / "report.json", json.dumps(report, indent=2, default=float)
    )
    atomic_write_text(run_dir / "report.md", render_markdown(report))
    return report


def _plots(run_dir: Path, cfg, geom, actions, q_tables, evaluation) -> None:
    """plots/gaps.png (policy, behaviour, SAA) and plots/policy.png (order-up-to level)."""
    from matplotlib.figure import Figure

    out = run_dir / "plots"
    out.mkdir(exist_ok=True)
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    ax.bar(
        ["SAA c*", "policy", "behaviour"],
        [0.0, evaluation["gap"], evaluation["behaviour_gap"]],
    )
    ax.set_ylabel("relative optimality gap")
    ax.set_title(cfg.pool.method)
    fig.tight_layout()
    write_png(fig, out / "gaps.png", dpi=100)
    levels = jnp.linspace(0.0, 0.95, 20)
    orders = np.asarray(_policy_grid(geom, q_tables, actions, levels))  # [H, 20]
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    for h in range(cfg.env.horizon):
        # What the env keeps: the capacity is 1 and what does not fit is lost
        # (envs._inventory).
        ax.plot(
            levels, np.minimum(np.asarray(levels) + orders[h], 1.0), label=f"h={h + 1}"
        )
    ax.set_xlabel("inventory of product 1")
    ax.set_ylabel("post-order level min(s + a, 1)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    write_png(fig, out / "policy.png", dpi=100)


@jax.jit
def _policy_grid(geom, q_tables, actions, levels):
    # Product 1's order at every stage and level (all products at the same level).
    policy = planning.greedy_policy(geom, q_tables, actions)
    hs = jnp.arange(q_tables.shape[0])
    return jax.vmap(
        lambda h: jax.vmap(
            lambda s: policy(None, h, jnp.full((actions.shape[-1],), s))[0]
        )(levels)
    )(hs)


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a POOL report."""
    p, ev = report["privacy"], report["evaluation"]
    cfg = report["config"]
    lines = ["# POOL report", ""]
    if "warning" in report:
        lines += [f"**{report['warning']}**", ""]
    rows = [
        ("method", cfg["pool"]["method"]),
        ("rho (zCDP, ledger) / budget", f"{p['rho']:.4g} / {p['rho_budget']:.4g}"),
        (f"epsilon at delta={p['delta']:g} (dp-accounting RDP)", f"{p['epsilon']:.4g}"),
        ("noise std", f"{p['noise_std']:.4g}"),
        (
            "benchmark c* (SAA base-stock, levels)",
            (
                f"{ev['benchmark_cost']:.4f} "
                f"({', '.join(f'{x:.2f}' for x in ev['saa_levels'])})"
            ),
        ),
        ("policy cost / gap", f"{ev['policy_cost']:.4f} / {ev['gap']:.3f}"),
        (
            "behaviour cost / gap",
            f"{ev['behaviour_cost']:.4f} / {ev['behaviour_gap']:.3f}",
        ),
    ]
    lines += (
        ["| quantity | value |", "|---|---|"]
        + [f"| {k} | {v} |" for k, v in rows]
        + markdown_rows(report)
    )
    lines += [
        "",
        (
            "**Release** (may be published): `policy.npz`, `policy.json`, "
            "`ledger.json`, `report.json`, `report.md`, `config.yaml`, `plots/`. "
            "`checkpoints/` holds the secret noise key: never publish it."
        ),
        "",
        f"Wall time: {report['wall_time_s']:.1f} s.",
        "",
    ]
    return "\n".join(lines)
