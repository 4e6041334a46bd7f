"""IQL: Implicit Q-Learning.

References:
  Kostrikov, Nair & Levine, "Offline Reinforcement Learning with Implicit
  Q-Learning", ICLR 2022, https://arxiv.org/abs/2110.06169.
  Tarasov et al., "CORL: Research-oriented Deep Offline Reinforcement Learning
  Library", NeurIPS 2023 Datasets & Benchmarks, https://arxiv.org/abs/2210.07105
  (hyper-parameter defaults and update order: `algorithms/offline/iql.py`).
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

# CORL's cap on exp(beta * A); the policy's log-std clamp is in
# `_networks.GaussianPolicy`.
EXP_ADV_MAX = 100.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class IQLConfig:
    """IQL hyper-parameters; defaults are CORL's (`iql.py`, `TrainConfig`).

    Attributes:
      actor_lr: Adam learning rate of the policy (3e-4), cosine-decayed to 0 over
        `actor_decay_steps` (CORL's `CosineAnnealingLR(actor_optimizer,
        max_timesteps)`).
      critic_lr: Adam learning rate of the twin Q networks (3e-4).
      value_lr: Adam learning rate of V (3e-4).
      hidden_dims: hidden widths of all networks (256, 256).
      discount: gamma (0.99).
      tau: Polyak rate of the target Q networks (5e-3).
      expectile: the expectile of the value loss, CORL's `iql_tau` (0.7).
      beta: inverse temperature of advantage-weighted regression (3.0).
      actor_decay_steps: horizon of the actor's cosine schedule; CORL uses the
        number of training steps (1e6 by default). `train` callers usually set it
        to their own step count.
      max_action: actions lie in [-max_action, max_action] (1.0).
      normalize_states: fit a state normaliser on the training data (True).
      log_std_param: the policy's log-std: "clamp" (CORL: a parameter starting at 0,
        clamped to [-20, 2]) or "sigmoid" (d3rlpy 2.x: -5 + 7 sigmoid(p), starting
        at -1.5).
      advantage_from: the V in the policy's advantage Q - V: "old_v" (CORL: V before
        this update's step) or "new_v" (d3rlpy 2.x: V after it).
    """

    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    value_lr: float = 3e-4
    hidden_dims: Sequence[int] = (256, 256)
    discount: float = 0.99
    tau: float = 5e-3
    expectile: float = 0.7
    beta: float = 3.0
    actor_decay_steps: int = 1_000_000
    max_action: float = 1.0
    normalize_states: bool = True
    log_std_param: str = "clamp"
    advantage_from: str = "old_v"

    def __post_init__(self):
        for name, choices in (
            ("log_std_param", ("clamp", "sigmoid")),
            ("advantage_from", ("old_v", "new_v")),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"{name}={getattr(self, name)!r}: expected one of {list(choices)}"
                )
        for name in ("actor_lr", "critic_lr", "value_lr", "max_action", "beta"):
            _common.check_positive(name, getattr(self, name))
        _common.check_unit_interval("discount", self.discount)
        _common.check_unit_interval("tau", self.tau)
        _common.check_unit_interval("expectile", self.expectile, closed=False)
        if not (
            isinstance(self.actor_decay_steps, int) and self.actor_decay_steps >= 1
        ):
            raise ValueError(
                f"actor_decay_steps={self.actor_decay_steps!r}: expected an int >= 1"
            )
        if not self.hidden_dims or any(int(h) < 1 for h in self.hidden_dims):
            raise ValueError(
                f"hidden_dims={self.hidden_dims!r}: expected positive widths"
            )


def expectile_loss(diff: jax.Array, expectile: jax.typing.ArrayLike) -> jax.Array:
    """Asymmetric L2 loss mean(|expectile - 1[diff < 0]| * diff^2); diff [B]."""
    weight = jnp.where(diff < 0, 1.0 - expectile, expectile)
    return (weight * diff**2).mean()


@struct.dataclass
class IQLState:
    """IQL train state; Q parameters are stacked on a leading axis of 2."""

    actor_params: _common.PyTree
    critic_params: _common.PyTree
    critic_target_params: _common.PyTree
    value_params: _common.PyTree
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    value_opt_state: optax.OptState
    normalizer: _common.Normalizer
    step: jax.Array
    action_dim: int = struct.field(pytree_node=False)


def iql(config: IQLConfig | None = None) -> _common.Agent:
    """Builds IQL as pure (init, update, act) functions.

    One update does, in CORL's order: V regresses the `expectile` of min(target Q1,
    target Q2); the twin Qs regress r + gamma * (1 - terminal) * V(s') (mean of the
    two MSEs), with V(s') from V before its step (CORL computes it first); the target
    Qs move by Polyak averaging; the policy maximises
    exp(beta * (Q - V)) (capped at 100) weighted log-likelihood of the data actions,
    using the advantage computed before V's step (after it with
    `advantage_from="new_v"`, as d3rlpy). Evaluation acts with the mean.

    Args:
      config: hyper-parameters; CORL's defaults when None.

    Returns:
      An `Agent` whose `update` expects raw (unnormalised) batches.
    """
    cfg = config or IQLConfig()
    critic = _networks.QNetwork(tuple(cfg.hidden_dims))
    value = _networks.ValueNetwork(tuple(cfg.hidden_dims))
    actor_opt = optax.adam(
        optax.cosine_decay_schedule(cfg.actor_lr, cfg.actor_decay_steps)
    )
    critic_opt = optax.adam(cfg.critic_lr)
    value_opt = optax.adam(cfg.value_lr)

    def make_actor(action_dim: int) -> _networks.GaussianPolicy:
        if cfg.log_std_param == "sigmoid":  # d3rlpy's IQL policy: log-std in [-5, 2]
            return _networks.GaussianPolicy(
                tuple(cfg.hidden_dims),
                action_dim,
                log_std_min=-5.0,
                log_std_max=2.0,
                log_std_mode="sigmoid",
            )
        return _networks.GaussianPolicy(tuple(cfg.hidden_dims), action_dim)

    def init(key: jax.Array, dataset: Transitions) -> IQLState:
        obs_dim, act_dim = _common.dims_of(dataset)
        k_actor, k_critic, k_value = jax.random.split(key, 3)
        obs, act = jnp.zeros((1, obs_dim)), jnp.zeros((1, act_dim))
        actor_params = make_actor(act_dim).init(k_actor, obs)
        critic_params = _networks.init_ensemble(critic, k_critic, 2, obs, act)
        value_params = value.init(k_value, obs)
        normalizer = _common.fit_state_normalizer(
            dataset.observations, cfg.normalize_states
        )
        return IQLState(
            actor_params=actor_params,
            critic_params=critic_params,
            critic_target_params=critic_params,
            value_params=value_params,
            actor_opt_state=actor_opt.init(actor_params),
            critic_opt_state=critic_opt.init(critic_params),
            value_opt_state=value_opt.init(value_params),
            normalizer=normalizer,
            step=jnp.zeros((), jnp.int32),
            action_dim=act_dim,
        )

    def update(
        state: IQLState, batch: Transitions, key: jax.Array
    ) -> tuple[IQLState, _common.Metrics]:
        del key  # IQL's update is deterministic given the batch.
        actor = make_actor(state.action_dim)
        b = _common.normalized_batch(batch, state.normalizer)

        # V(s') before V's step, as CORL's `train` computes `next_v` first (d3rlpy's
        # IQL too: one optimiser step on the Q and V losses, target from the old V).
        next_v = value.apply(state.value_params, b.next_observations)

        # 1) V: expectile regression towards the target twin-Q minimum.
        target_q = _networks.apply_ensemble(
            critic, state.critic_target_params, b.observations, b.actions
        ).min(0)

        def value_loss_fn(params):
            v = value.apply(params, b.observations)
            return expectile_loss(target_q - v, cfg.expectile), target_q - v

        (value_loss, adv), grads = jax.value_and_grad(value_loss_fn, has_aux=True)(
            state.value_params
        )
        updates, value_opt_state = value_opt.update(grads, state.value_opt_state)
        value_params = optax.apply_updates(state.value_params, updates)

        # 2) Q: one-step TD towards V(s') of the pre-update V.
        q_target = b.rewards + cfg.discount * (1.0 - b.terminals) * next_v

        def critic_loss_fn(params):
            q = _networks.apply_ensemble(critic, params, b.observations, b.actions)
            return ((q - q_target) ** 2).mean(1).mean(), q

        (critic_loss, q), grads = jax.value_and_grad(critic_loss_fn, has_aux=True)(
            state.critic_params
        )
        updates, critic_opt_state = critic_opt.update(grads, state.critic_opt_state)
        critic_params = optax.apply_updates(state.critic_params, updates)

        # 3) Policy: advantage-weighted regression with the pre-update advantage
        # (CORL), or with V after its step (d3rlpy).
        if cfg.advantage_from == "new_v":
            adv = target_q - value.apply(value_params, b.observations)
        weights = jnp.minimum(jnp.exp(cfg.beta * adv), EXP_ADV_MAX)

        def actor_loss_fn(params):
            mean, log_std = actor.apply(params, b.observations)
            return (
                weights * -_networks.gaussian_log_prob(mean, log_std, b.actions)
            ).mean()

        actor_loss, grads = jax.value_and_grad(actor_loss_fn)(state.actor_params)
        updates, actor_opt_state = actor_opt.update(grads, state.actor_opt_state)

        state = state.replace(
            actor_params=optax.apply_updates(state.actor_params, updates),
            critic_params=critic_params,
            critic_target_params=_common.polyak_update(
                state.critic_target_params, critic_params, cfg.tau
            ),
            value_params=value_params,
            actor_opt_state=actor_opt_state,
            critic_opt_state=critic_opt_state,
            value_opt_state=value_opt_state,
            step=state.step + 1,
        )
        metrics = {
            "critic_loss": critic_loss,
            "value_loss": value_loss,
            "actor_loss": actor_loss,
            "q_mean": q.mean(),
            "adv_mean": adv.mean(),
        }
        return state, metrics

    def act(state: IQLState, observations: jax.Array) -> jax.Array:
        mean, _ = make_actor(state.action_dim).apply(
            state.actor_params, state.normalizer.normalize(observations)
        )
        return jnp.clip(cfg.max_action * mean, -cfg.max_action, cfg.max_action)

    return _common.Agent(name="iql", config=cfg, init=init, update=update, act=act)
