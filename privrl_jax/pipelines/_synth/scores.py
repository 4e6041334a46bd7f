"""Scores of a synthetic dataset.

Fidelity against the sensitive rows (audit) and agents trained on it (the release's
agent scores when trained on the release).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import agents, data, diffusion, envs
from privrl_jax import eval as evaluation
from privrl_jax.pipelines._agent_train import make_run_agent
from privrl_jax.pipelines._synth.inputs import encode


def fidelity_scorer(
    sensitive: data.Transitions,
    layout: diffusion.TransitionLayout,
    norm: Any,
    env_name: str,
    *,
    rows: int,
    seed: int,
) -> Callable[[data.Transitions], dict[str, float]]:
    """A function scoring transitions against the ``sensitive`` ones.

    Audit: it reads them.

    Scores: the marginal and correlation scores of the encoded columns; the sliced
    Wasserstein distance in the public normaliser's scale (every column on one scale);
    for a maze, the share of observed positions in the sensitive maze's free cells (real
    data: 1.0). The distance compares ``rows`` rows of each table (fixed draws without
    replacement; e.g. the holdout's size), since its finite-sample floor depends on the
    sizes: the scores of a release, of the pre-training-only samples and of the real
    holdout are then comparable.
    """
    sens = encode(sensitive, layout)
    sens_x = np.asarray(diffusion.normalise(norm, jnp.asarray(sens)))
    walls = (
        None
        if envs.is_mujoco_task_name(env_name)
        else getattr(envs.make(env_name)[1], "walls", None)
    )

    def score(other: data.Transitions) -> dict[str, float]:
        flat = encode(other, layout)
        x = np.asarray(diffusion.normalise(norm, jnp.asarray(flat)))
        n = min(rows, len(x), len(sens_x))
        rng = np.random.default_rng([seed, 11])
        a, b = (
            sens_x[rng.choice(len(sens_x), n, replace=False)],
            x[rng.choice(len(x), n, replace=False)],
        )
        out = {
            "marginal": evaluation.marginal_score(sens, flat),
            "correlation": evaluation.correlation_score(sens, flat),
            "sliced_wasserstein": evaluation.sliced_wasserstein(a, b, seed=seed),
            "rows_compared": n,
        }
        if walls is not None:
            out["free_cell_share"] = evaluation.free_cell_share(
                np.asarray(other.observations)[:, :2], walls
            )
        return out

    return score


def agent_scores(cfg: Any, dataset: data.Transitions, key: jax.Array) -> dict[str, Any]:
    """Train each of ``cfg.eval.agents`` on ``dataset`` and score it.

    As `EvalConfig` says.
    """
    # MuJoCo-only tasks (locomotion, kitchen) have no JAX env: they are scored by the
    # mujoco backend.
    mujoco_only = envs.is_mujoco_task_name(cfg.data.sensitive_env)
    env, env_params = (None, None) if mujoco_only else envs.make(cfg.data.sensitive_env)
    ec = cfg.eval
    if ec.backend == "mujoco":
        envs.require_mujoco()  # fail before any agent is trained
    first_eval = ec.agent_updates - (ec.final_evals - 1) * ec.agent_chunk
    dataset = jax.tree_util.tree_map(jnp.asarray, dataset)
    out = {}
    for i, name in enumerate(ec.agents):
        agent = make_run_agent(name, ec.agent_updates)

        def eval_fn(state, k, agent=agent):
            if ec.backend == "mujoco":  # D4RL's MuJoCo point maze (the mujoco extra)
                ev = envs.evaluate_mujoco(
                    envs.batch_policy(agent.act, state),
                    cfg.data.sensitive_env,
                    num_episodes=ec.eval_episodes,
                    seed=envs.seed_from_key(k),
                )
            else:
                ev = agents.evaluate(
                    k,
                    state,
                    act=agent.act,
                    env=env,
                    env_params=env_params,
                    num_episodes=ec.eval_episodes,
                    env_name=cfg.data.sensitive_env,
                )
            return {m: float(ev[m]) for m in ("return_mean", "score_mean") if m in ev}

        seeds = []
        for s in range(ec.agent_seeds):
            res = agents.train(
                agent,
                dataset,
                key=jax.random.fold_in(jax.random.fold_in(key, i), s),
                num_updates=ec.agent_updates,
                chunk_size=ec.agent_chunk,
                eval_fn=eval_fn,
                eval_every=ec.agent_chunk,
            )
            final = [e for e in res.evals if e["step"] >= first_eval]
            seeds.append(
                {
                    m: float(np.mean([e[m] for e in final]))
                    for m in final[0]
                    if m != "step"
                }
                | {"curve": res.evals}
            )
        out[name] = {"per_seed": seeds}
        for m in ("return_mean", "score_mean"):
            if m in seeds[0]:
                vals = np.array([r[m] for r in seeds])
                out[name][m] = float(vals.mean())
                # The sample std over agent seeds (ddof = 1: with 2-3 seeds ddof = 0
                # understates it by 18-29%); one seed measures no spread.
                out[name][m.replace("_mean", "_std")] = (
                    float(vals.std(ddof=1)) if len(vals) > 1 else None
                )
    return out


def transition_audit(
    cfg: Any,
    sensitive: data.Transitions,
    holdout: data.Transitions,
    synthetic: data.Transitions,
    layout: Any,
    norm: Any,
    key: jax.Array,
) -> dict[str, Any]:
    """The audit of a transition release (PGM / MST / PrivSyn, PATE-GAN).

    Fidelity to the sensitive rows, the real holdout scored the same way
    (``eval.anchors``), and a real-data agent (``eval.train_real_agents``). Reads
    sensitive rows: audit only.
    """
    score = fidelity_scorer(
        sensitive,
        layout,
        norm,
        cfg.data.sensitive_env,
        rows=len(holdout),
        seed=cfg.seed,
    )
    audit: dict[str, Any] = {"fidelity": score(synthetic)}
    if cfg.eval.anchors:
        audit["anchors"] = {"real_holdout": score(holdout)}
    if cfg.eval.agents and cfg.eval.train_real_agents:
        audit["agents_real"] = agent_scores(
            cfg, sensitive, jax.random.fold_in(key, 400)
        )
    return audit
