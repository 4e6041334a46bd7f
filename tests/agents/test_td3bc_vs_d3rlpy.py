"""Our TD3+BC update against d3rlpy 2.x's, step for step, from the same weights.

Needs the `peers` extra (d3rlpy, torch); skipped without it. The companion of
test_iql_vs_d3rlpy.py: both sides start from d3rlpy's weights (copied into our
parameter trees), take the same minibatches, and every parameter (actor, twin
critics, both targets) is compared after each update. Target-policy smoothing noise
is off on both sides (it is drawn from two different generators); everything else
is each library's default: the twin-critic TD3 loss, lambda = alpha / mean|Q1| with
the gradient stopped, the BC term, the delayed actor and target updates (every 2nd
update: d3rlpy when its 1-based step is even, ours after its counter moves), Polyak
targets and Adam. d3rlpy sums the twin-Q MSEs and so do we.
"""

import jax
import jax.numpy as jnp
import pytest
from agents_testlib import (
    dense_from_torch,
    max_abs_gap,
    random_batches,
    torch_minibatch,
)

from privrl_jax import agents

d3rlpy = pytest.importorskip("d3rlpy", reason="needs the peers extra (d3rlpy, torch)")
torch = pytest.importorskip("torch", reason="needs the peers extra (d3rlpy, torch)")

OBS, ACT, HIDDEN, BATCH = 3, 2, (32, 32), 64


def _params(m) -> dict:
    def sd(mod):
        return {k: v.detach() for k, v in mod.state_dict().items()}

    def critics(mod):
        qs = [
            {"params": {"MLP_0": dense_from_torch(sd(mod), f"{i}.", "_fc")}}
            for i in range(2)
        ]
        return jax.tree.map(lambda *x: jnp.stack(x), *qs)

    return {
        "actor": {"params": {"MLP_0": dense_from_torch(sd(m.policy), "", "_fc")}},
        "actor_target": {
            "params": {"MLP_0": dense_from_torch(sd(m.targ_policy), "", "_fc")}
        },
        "critic": critics(m.q_funcs),
        "critic_target": critics(m.targ_q_funcs),
    }


def _run_both(steps: int, ours_alpha: float = 2.5) -> tuple[dict[str, float], float]:
    """Max |ours - d3rlpy's| per parameter group after `steps` updates, and how far
    d3rlpy's actor moved (the scale the gaps are read against)."""
    torch.manual_seed(0)
    enc = d3rlpy.models.VectorEncoderFactory(hidden_units=list(HIDDEN))
    algo = d3rlpy.algos.TD3PlusBCConfig(
        batch_size=BATCH,
        actor_encoder_factory=enc,
        critic_encoder_factory=enc,
        target_smoothing_sigma=0.0,
        alpha=2.5,
    ).create(device="cpu:0")
    algo.create_impl((OBS,), ACT)
    m = algo.impl._modules
    p = _params(m)
    agent = agents.make_agent(
        "td3bc",
        hidden_dims=HIDDEN,
        normalize_states=False,
        policy_noise=0.0,
        alpha=ours_alpha,
    )
    batches = random_batches(5, steps, BATCH, OBS, ACT)
    state = agent.init(jax.random.key(0), batches[0])
    state = state.replace(
        actor_params=p["actor"],
        actor_target_params=p["actor_target"],
        critic_params=p["critic"],
        critic_target_params=p["critic_target"],
    )
    update = jax.jit(agent.update)
    for t, b in enumerate(batches, start=1):
        algo.impl.update(torch_minibatch(b), t)
        state, _ = update(state, b, jax.random.key(t))
    theirs = _params(m)
    ours = {
        "actor": state.actor_params,
        "actor_target": state.actor_target_params,
        "critic": state.critic_params,
        "critic_target": state.critic_target_params,
    }

    return (
        {k: max_abs_gap(ours[k], theirs[k]) for k in ours},
        max_abs_gap(theirs["actor"], p["actor"]),
    )


def test_td3bc_update_equals_d3rlpy():
    # 6 updates (3 actor and target steps) at lr 3e-4.
    gaps, moved = _run_both(6)
    assert moved > 5e-4, moved
    assert all(g < 2e-5 for g in gaps.values()), gaps


def test_td3bc_comparison_detects_a_different_alpha():
    # alpha 0.5 on our side against d3rlpy's 2.5: the critics still agree (the actor
    # has not yet changed their targets by much) but the actors must not.
    gaps, _ = _run_both(4, ours_alpha=0.5)
    assert gaps["actor"] > 1e-4, gaps
