"""TD3+BC: TD3 with a behaviour-cloning term in the actor loss.

References:
  Fujimoto & Gu, "A Minimalist Approach to Offline Reinforcement Learning",
  NeurIPS 2021, https://arxiv.org/abs/2106.06860.
  Fujimoto, van Hoof & Meger, "Addressing Function Approximation Error in
  Actor-Critic Methods" (TD3), ICML 2018, https://arxiv.org/abs/1802.09477.
  Tarasov et al., "CORL: Research-oriented Deep Offline Reinforcement Learning
  Library", NeurIPS 2023 Datasets & Benchmarks, https://arxiv.org/abs/2210.07105
  (hyper-parameter defaults: `algorithms/offline/td3_bc.py`, `TrainConfig`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import optax
from flax import struct

from privrl_jax.agents import _common, _networks
from privrl_jax.data import Transitions


@dataclasses.dataclass(frozen=True, kw_only=True)
class TD3BCConfig:
    """TD3+BC hyper-parameters; defaults are CORL's (`td3_bc.py`, `TrainConfig`).

    Attributes:
      actor_lr: Adam learning rate of the actor (3e-4).
      critic_lr: Adam learning rate of the twin critics (3e-4).
      hidden_dims: hidden widths of actor and critics (256, 256).
      discount: gamma (0.99).
      tau: Polyak rate of the target networks (5e-3).
      policy_noise: std of target-policy smoothing noise, times max_action (0.2).
      noise_clip: clip of that noise, times max_action (0.5).
      policy_freq: actor and target updates every this many critic updates (2).
      alpha: weight of the Q term, lambda = alpha / mean|Q| (2.5).
      max_action: actions lie in [-max_action, max_action] (1.0).
      normalize_states: fit a state normaliser on the training data (True).
    """

    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    hidden_dims: Sequence[int] = (256, 256)
    discount: float = 0.99
    tau: float = 5e-3
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    policy_freq: int = 2
    alpha: float = 2.5
    max_action: float = 1.0
    normalize_states: bool = True

    def __post_init__(self):
        for name in ("actor_lr", "critic_lr", "max_action"):
            _common.check_positive(name, getattr(self, name))
        _common.check_unit_interval("discount", self.discount)
        _common.check_unit_interval("tau", self.tau)
        for name in ("policy_noise", "noise_clip", "alpha"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)!r}: expected >= 0")
        if not (isinstance(self.policy_freq, int) and self.policy_freq >= 1):
            raise ValueError(f"policy_freq={self.policy_freq!r}: expected an int >= 1")
        if not self.hidden_dims or any(int(h) < 1 for h in self.hidden_dims):
            raise ValueError(
                f"hidden_dims={self.hidden_dims!r}: expected positive widths"
            )


@struct.dataclass
class TD3BCState:
    """TD3+BC train state; critic parameters are stacked on a leading axis of 2."""

    actor_params: _common.PyTree
    actor_target_params: _common.PyTree
    critic_params: _common.PyTree
    critic_target_params: _common.PyTree
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    normalizer: _common.Normalizer
    step: jax.Array
    action_dim: int = struct.field(pytree_node=False)


def td3_bc(config: TD3BCConfig | None = None) -> _common.Agent:
    """Builds TD3+BC as pure (init, update, act) functions.

    The critic loss is the TD3 loss summed over the twin critics, with clipped
    target-policy noise; every `policy_freq` updates the actor minimises
    `-lambda * Q1(s, pi(s)) + (pi(s) - a)^2` with `lambda = alpha / mean|Q1|`
    (gradient stopped through lambda), then both targets move by Polyak averaging.
    The twin critics are one MLP vmapped over stacked parameters.

    Args:
      config: hyper-parameters; CORL's defaults when None.

    Returns:
      An `Agent`; `update` expects raw (unnormalised) batches with
      observations [B, obs_dim], actions [B, act_dim], rewards/terminals [B].
    """
    cfg = config or TD3BCConfig()
    critic = _networks.QNetwork(tuple(cfg.hidden_dims))
    actor_opt = optax.adam(cfg.actor_lr)
    critic_opt = optax.adam(cfg.critic_lr)

    def make_actor(action_dim: int) -> _networks.DeterministicActor:
        return _networks.DeterministicActor(
            tuple(cfg.hidden_dims), action_dim, cfg.max_action
        )

    def init(key: jax.Array, dataset: Transitions) -> TD3BCState:
        obs_dim, act_dim = _common.dims_of(dataset)
        actor = make_actor(act_dim)
        k_actor, k_critic = jax.random.split(key)
        obs, act = jnp.zeros((1, obs_dim)), jnp.zeros((1, act_dim))
        actor_params = actor.init(k_actor, obs)
        critic_params = _networks.init_ensemble(critic, k_critic, 2, obs, act)
        normalizer = _common.fit_state_normalizer(
            dataset.observations, cfg.normalize_states
        )
        return TD3BCState(
            actor_params=actor_params,
            actor_target_params=actor_params,
            critic_params=critic_params,
            critic_target_params=critic_params,
            actor_opt_state=actor_opt.init(actor_params),
            critic_opt_state=critic_opt.init(critic_params),
            normalizer=normalizer,
            step=jnp.zeros((), jnp.int32),
            action_dim=act_dim,
        )

    def update(
        state: TD3BCState, batch: Transitions, key: jax.Array
    ) -> tuple[TD3BCState, _common.Metrics]:
        actor = make_actor(state.action_dim)
        b = _common.normalized_batch(batch, state.normalizer)

        # Critic: TD3 target with clipped policy smoothing noise.
        noise = (
            jnp.clip(
                cfg.policy_noise * jax.random.normal(key, b.actions.shape),
                -cfg.noise_clip,
                cfg.noise_clip,
            )
            * cfg.max_action
        )
        next_actions = jnp.clip(
            actor.apply(state.actor_target_params, b.next_observations) + noise,
            -cfg.max_action,
            cfg.max_action,
        )
        next_q = _networks.apply_ensemble(
            critic, state.critic_target_params, b.next_observations, next_actions
        ).min(0)
        target_q = b.rewards + cfg.discount * (1.0 - b.terminals) * next_q

        def critic_loss_fn(params):
            q = _networks.apply_ensemble(
                critic, params, b.observations, b.actions
            )  # [2, B]
            return ((q - target_q) ** 2).mean(1).sum(), q

        (critic_loss, q), grads = jax.value_and_grad(critic_loss_fn, has_aux=True)(
            state.critic_params
        )
        updates, critic_opt_state = critic_opt.update(grads, state.critic_opt_state)
        state = state.replace(
            critic_params=optax.apply_updates(state.critic_params, updates),
            critic_opt_state=critic_opt_state,
            step=state.step + 1,
        )

        def actor_step(state: TD3BCState) -> tuple[TD3BCState, jax.Array, jax.Array]:
            def actor_loss_fn(params):
                pi = actor.apply(params, b.observations)
                q1 = critic.apply(
                    jax.tree.map(lambda x: x[0], state.critic_params),
                    b.observations,
                    pi,
                )
                lmbda = jax.lax.stop_gradient(cfg.alpha / jnp.abs(q1).mean())
                bc = ((pi - b.actions) ** 2).mean()
                return -lmbda * q1.mean() + bc, bc

            (loss, bc), grads = jax.value_and_grad(actor_loss_fn, has_aux=True)(
                state.actor_params
            )
            updates, actor_opt_state = actor_opt.update(grads, state.actor_opt_state)
            actor_params = optax.apply_updates(state.actor_params, updates)
            state = state.replace(
                actor_params=actor_params,
                actor_opt_state=actor_opt_state,
                actor_target_params=_common.polyak_update(
                    state.actor_target_params, actor_params, cfg.tau
                ),
                critic_target_params=_common.polyak_update(
                    state.critic_target_params, state.critic_params, cfg.tau
                ),
            )
            return state, loss, bc

        def skip(state: TD3BCState) -> tuple[TD3BCState, jax.Array, jax.Array]:
            return state, jnp.float32(jnp.nan), jnp.float32(jnp.nan)

        # CORL increments its counter first, so the actor moves on updates 2, 4, ...
        state, actor_loss, bc_loss = jax.lax.cond(
            state.step % cfg.policy_freq == 0, actor_step, skip, state
        )
        metrics = {
            "critic_loss": critic_loss,
            "q_mean": q.mean(),
            "actor_loss": actor_loss,  # NaN on critic-only steps; averaged with nanmean
            "bc_loss": bc_loss,
        }
        return state, metrics

    def act(state: TD3BCState, observations: jax.Array) -> jax.Array:
        actor = make_actor(state.action_dim)
        return actor.apply(state.actor_params, state.normalizer.normalize(observations))

    return _common.Agent(name="td3bc", config=cfg, init=init, update=update, act=act)
