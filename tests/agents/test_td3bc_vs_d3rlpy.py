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
import numpy as np
import pytest

from privrl_jax import agents
from privrl_jax.data import Transitions

d3rlpy = pytest.importorskip("d3rlpy", reason="needs the peers extra (d3rlpy, torch)")
torch = pytest.importorskip("torch", reason="needs the peers extra (d3rlpy, torch)")

OBS, ACT, HIDDEN, BATCH = 3, 2, (32, 32), 64


def _mlp(sd: dict, prefix: str) -> dict:
    """torch Linear layers (weight [out, in]) -> our MLP's Dense params (kernel [in, out])."""
    names = [f"{prefix}_encoder._layers.0", f"{prefix}_encoder._layers.2", f"{prefix}_fc"]
    return {f"Dense_{i}": {"kernel": jnp.asarray(sd[n + ".weight"].numpy().T),
                           "bias": jnp.asarray(sd[n + ".bias"].numpy())}
            for i, n in enumerate(names)}


def _params(m) -> dict:
    def sd(mod):
        return {k: v.detach() for k, v in mod.state_dict().items()}

    def critics(mod):
        qs = [{"params": {"MLP_0": _mlp(sd(mod), f"{i}.")}} for i in range(2)]
        return jax.tree.map(lambda *x: jnp.stack(x), *qs)

    return {
        "actor": {"params": {"MLP_0": _mlp(sd(m.policy), "")}},
        "actor_target": {"params": {"MLP_0": _mlp(sd(m.targ_policy), "")}},
        "critic": critics(m.q_funcs),
        "critic_target": critics(m.targ_q_funcs),
    }


def _batches(n: int) -> list[Transitions]:
    out = []
    for k in jax.random.split(jax.random.key(5), n):
        ko, ka, kr, kn = jax.random.split(k, 4)
        out.append(Transitions(
            observations=jax.random.normal(ko, (BATCH, OBS)),
            actions=jax.random.uniform(ka, (BATCH, ACT), minval=-1, maxval=1),
            rewards=jax.random.normal(kr, (BATCH,)),
            next_observations=jax.random.normal(kn, (BATCH, OBS)),
            terminals=(jnp.arange(BATCH) % 7 == 0).astype(jnp.float32),
            timeouts=jnp.zeros((BATCH,)),
        ))
    return out


def _torch_batch(b: Transitions):
    t = lambda x: torch.as_tensor(np.array(x, np.float32))  # noqa: E731
    col = lambda x: t(x).reshape(-1, 1)  # noqa: E731
    return d3rlpy.torch_utility.TorchMiniBatch(
        observations=t(b.observations), actions=t(b.actions), rewards=col(b.rewards),
        next_observations=t(b.next_observations), next_actions=t(b.actions),
        returns_to_go=col(b.rewards), terminals=col(b.terminals),
        intervals=col(jnp.ones(BATCH)), device="cpu:0", numpy_batch=None,
    )


def _run_both(steps: int, ours_alpha: float = 2.5) -> tuple[dict[str, float], float]:
    """Max |ours - d3rlpy's| per parameter group after `steps` updates, and how far
    d3rlpy's actor moved (the scale the gaps are read against)."""
    torch.manual_seed(0)
    enc = d3rlpy.models.VectorEncoderFactory(hidden_units=list(HIDDEN))
    algo = d3rlpy.algos.TD3PlusBCConfig(
        batch_size=BATCH, actor_encoder_factory=enc, critic_encoder_factory=enc,
        target_smoothing_sigma=0.0, alpha=2.5,
    ).create(device="cpu:0")
    algo.create_impl((OBS,), ACT)
    m = algo.impl._modules
    p = _params(m)
    agent = agents.make_agent("td3bc", hidden_dims=HIDDEN, normalize_states=False,
                              policy_noise=0.0, alpha=ours_alpha)
    batches = _batches(steps)
    state = agent.init(jax.random.key(0), batches[0])
    state = state.replace(actor_params=p["actor"], actor_target_params=p["actor_target"],
                          critic_params=p["critic"], critic_target_params=p["critic_target"])
    update = jax.jit(agent.update)
    for t, b in enumerate(batches, start=1):
        algo.impl.update(_torch_batch(b), t)
        state, _ = update(state, b, jax.random.key(t))
    theirs = _params(m)
    ours = {"actor": state.actor_params, "actor_target": state.actor_target_params,
            "critic": state.critic_params, "critic_target": state.critic_target_params}

    def gap(a, b):
        return max(float(jnp.max(jnp.abs(x - y))) for x, y in
                   zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))

    return {k: gap(ours[k], theirs[k]) for k in ours}, gap(theirs["actor"], p["actor"])


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
