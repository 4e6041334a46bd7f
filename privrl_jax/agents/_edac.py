"""EDAC: Ensemble-Diversified Actor-Critic (SAC-N plus a gradient-diversity term).

References:
  An, Moon, Kim & Song, "Uncertainty-Based Offline Reinforcement Learning with
  Diversified Q-Ensemble", NeurIPS 2021, https://arxiv.org/abs/2110.01548.
  Haarnoja et al., "Soft Actor-Critic Algorithms and Applications", 2018,
  https://arxiv.org/abs/1812.05905 (automatic entropy tuning).
  Tarasov et al., "CORL: Research-oriented Deep Offline Reinforcement Learning
  Library", NeurIPS 2023 Datasets & Benchmarks, https://arxiv.org/abs/2210.07105
  (defaults, initialisation and update order: `algorithms/offline/edac.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import struct

from privrl_jax.agents import _common, _networks
from privrl_jax.data import Transitions


@dataclasses.dataclass(frozen=True, kw_only=True)
class EDACConfig:
    """EDAC hyper-parameters; defaults are CORL's (`edac.py`, `TrainConfig`).

    Attributes:
      actor_lr: Adam learning rate of the actor (3e-4).
      critic_lr: Adam learning rate of the critic ensemble (3e-4).
      alpha_lr: Adam learning rate of log(alpha) (3e-4).
      hidden_dims: hidden widths of actor and critics (256, 256, 256), three layers
        as in CORL and the EDAC paper.
      num_critics: ensemble size N (10).
      eta: weight of the ensemble gradient-diversity loss (1.0); eta=0 is SAC-N.
      discount: gamma (0.99).
      tau: Polyak rate of the target critics (5e-3).
      target_entropy: entropy target of alpha's tuning; -act_dim when None.
      max_action: actions lie in [-max_action, max_action] (1.0).
      normalize_states: fit a state normaliser on the training data. True here
        for all our agents; CORL's EDAC does not normalise states (a deviation we
        choose so every agent sees the same inputs).
    """

    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4
    hidden_dims: Sequence[int] = (256, 256, 256)
    num_critics: int = 10
    eta: float = 1.0
    discount: float = 0.99
    tau: float = 5e-3
    target_entropy: float | None = None
    max_action: float = 1.0
    normalize_states: bool = True

    def __post_init__(self):
        for name in ("actor_lr", "critic_lr", "alpha_lr", "max_action"):
            _common.check_positive(name, getattr(self, name))
        _common.check_unit_interval("discount", self.discount)
        _common.check_unit_interval("tau", self.tau)
        if self.eta < 0:
            raise ValueError(f"eta={self.eta!r}: expected >= 0")
        if not (isinstance(self.num_critics, int) and self.num_critics >= 2):
            raise ValueError(f"num_critics={self.num_critics!r}: expected an int >= 2")
        if not self.hidden_dims or any(int(h) < 1 for h in self.hidden_dims):
            raise ValueError(
                f"hidden_dims={self.hidden_dims!r}: expected positive widths"
            )


def diversity_loss(
    critic: nn.Module,
    params: _common.PyTree,
    observations: jax.Array,
    actions: jax.Array,
) -> jax.Array:
    """EDAC's ensemble similarity loss (An et al., 2021, Eq. 4; CORL's form).

    The mean over the batch of the summed pairwise cosine similarities between the
    critics' action-gradients, divided by (N - 1).

    Args:
      critic: the Q network module.
      params: stacked critic parameters, leading axis N.
      observations: [B, obs_dim].
      actions: [B, act_dim].

    Returns:
      Scalar loss, differentiable w.r.t. params.
    """
    num = jax.tree.leaves(params)[0].shape[0]

    def q_sum(a: jax.Array) -> jax.Array:  # a: [N, B, A], one copy per critic
        return jax.vmap(lambda p, a_n: critic.apply(p, observations, a_n))(
            params, a
        ).sum()

    grads = jax.grad(q_sum)(
        jnp.broadcast_to(actions, (num, *actions.shape))
    )  # [N, B, A]
    grads = grads / (jnp.linalg.norm(grads, axis=-1, keepdims=True) + 1e-10)
    cosine = jnp.einsum("nba,mba->bnm", grads, grads)  # [B, N, N]
    off_diagonal = cosine * (1.0 - jnp.eye(num))
    return off_diagonal.sum((1, 2)).mean() / (num - 1)


@struct.dataclass
class EDACState:
    """EDAC train state; critic parameters are stacked on a leading axis of N."""

    actor_params: _common.PyTree
    critic_params: _common.PyTree
    critic_target_params: _common.PyTree
    log_alpha: jax.Array
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    alpha_opt_state: optax.OptState
    normalizer: _common.Normalizer
    step: jax.Array
    action_dim: int = struct.field(pytree_node=False)


def edac(config: EDACConfig | None = None) -> _common.Agent:
    """Builds EDAC as pure (init, update, act) functions.

    One update does, in CORL's order: the temperature step on
    `-log_alpha * (log pi(a|s) + target_entropy)`; the actor step on
    `alpha * log pi(a|s) - min_i Q_i(s, a)`, a ~ pi; the critic step on the sum over
    the N critics of the MSE to `r + gamma (1 - terminal) (min_i Q'_i(s', a') - alpha
    log pi(a'|s'))` plus `eta` times the diversity loss; then Polyak target updates.
    The N critics are one MLP vmapped over stacked parameters. Evaluation acts
    with `max_action * tanh(mu(s))`.

    Args:
      config: hyper-parameters; CORL's defaults when None.

    Returns:
      An `Agent` whose `update` expects raw (unnormalised) batches.
    """
    cfg = config or EDACConfig()
    # CORL's EDAC critic (`VectorizedCritic`): hidden kernels U(+-1/sqrt(out width))
    # (its VectorizedLinear quirk, see `_networks`), hidden biases 0.1, output layer
    # kernel and bias U(-3e-3, 3e-3).
    critic = _networks.QNetwork(
        tuple(cfg.hidden_dims),
        hidden_kernel_init=_networks.corl_vectorized_kernel_init,
        hidden_bias_init=nn.initializers.constant(0.1),
        out_kernel_init=_networks.uniform_init(3e-3),
        out_bias_init=_networks.uniform_init(3e-3),
    )
    actor_opt = optax.adam(cfg.actor_lr)
    critic_opt = optax.adam(cfg.critic_lr)
    alpha_opt = optax.adam(cfg.alpha_lr)

    def make_actor(action_dim: int) -> _networks.TanhGaussianActor:
        return _networks.TanhGaussianActor(tuple(cfg.hidden_dims), action_dim)

    def init(key: jax.Array, dataset: Transitions) -> EDACState:
        obs_dim, act_dim = _common.dims_of(dataset)
        k_actor, k_critic = jax.random.split(key)
        obs, act = jnp.zeros((1, obs_dim)), jnp.zeros((1, act_dim))
        actor_params = make_actor(act_dim).init(k_actor, obs)
        critic_params = _networks.init_ensemble(
            critic, k_critic, cfg.num_critics, obs, act
        )
        log_alpha = jnp.zeros((), jnp.float32)
        normalizer = _common.fit_state_normalizer(
            dataset.observations, cfg.normalize_states
        )
        return EDACState(
            actor_params=actor_params,
            critic_params=critic_params,
            critic_target_params=critic_params,
            log_alpha=log_alpha,
            actor_opt_state=actor_opt.init(actor_params),
            critic_opt_state=critic_opt.init(critic_params),
            alpha_opt_state=alpha_opt.init(log_alpha),
            normalizer=normalizer,
            step=jnp.zeros((), jnp.int32),
            action_dim=act_dim,
        )

    def update(
        state: EDACState, batch: Transitions, key: jax.Array
    ) -> tuple[EDACState, _common.Metrics]:
        actor = make_actor(state.action_dim)
        target_entropy = (
            -float(state.action_dim)
            if cfg.target_entropy is None
            else cfg.target_entropy
        )
        b = _common.normalized_batch(batch, state.normalizer)
        k_alpha, k_actor, k_next = jax.random.split(key, 3)

        def policy_sample(params, observations, key):
            mu, log_std = actor.apply(params, observations)
            return _networks.sample_tanh_gaussian(key, mu, log_std, cfg.max_action)

        # 1) Temperature.
        _, log_prob = policy_sample(state.actor_params, b.observations, k_alpha)
        log_prob = jax.lax.stop_gradient(log_prob)

        def alpha_loss_fn(log_alpha):
            return (-log_alpha * (log_prob + target_entropy)).mean()

        alpha_loss, grads = jax.value_and_grad(alpha_loss_fn)(state.log_alpha)
        updates, alpha_opt_state = alpha_opt.update(grads, state.alpha_opt_state)
        log_alpha = optax.apply_updates(state.log_alpha, updates)
        alpha = jnp.exp(log_alpha)

        # 2) Actor.
        def actor_loss_fn(params):
            actions, log_prob = policy_sample(params, b.observations, k_actor)
            q_min = _networks.apply_ensemble(
                critic, state.critic_params, b.observations, actions
            ).min(0)
            return (alpha * log_prob - q_min).mean(), -log_prob.mean()

        (actor_loss, entropy), grads = jax.value_and_grad(actor_loss_fn, has_aux=True)(
            state.actor_params
        )
        updates, actor_opt_state = actor_opt.update(grads, state.actor_opt_state)
        actor_params = optax.apply_updates(state.actor_params, updates)

        # 3) Critics, with the updated actor and temperature in the target.
        next_actions, next_log_prob = policy_sample(
            actor_params, b.next_observations, k_next
        )
        next_q = _networks.apply_ensemble(
            critic, state.critic_target_params, b.next_observations, next_actions
        ).min(0)
        target_q = b.rewards + cfg.discount * (1.0 - b.terminals) * (
            next_q - alpha * next_log_prob
        )

        def critic_loss_fn(params):
            q = _networks.apply_ensemble(
                critic, params, b.observations, b.actions
            )  # [N, B]
            td = ((q - target_q) ** 2).mean(1).sum()
            div = (
                diversity_loss(critic, params, b.observations, b.actions)
                if cfg.eta > 0
                else jnp.zeros(())
            )
            return td + cfg.eta * div, (td, div, q)

        (_, (td_loss, div_loss, q)), grads = jax.value_and_grad(
            critic_loss_fn, has_aux=True
        )(state.critic_params)
        updates, critic_opt_state = critic_opt.update(grads, state.critic_opt_state)
        critic_params = optax.apply_updates(state.critic_params, updates)

        state = state.replace(
            actor_params=actor_params,
            critic_params=critic_params,
            critic_target_params=_common.polyak_update(
                state.critic_target_params, critic_params, cfg.tau
            ),
            log_alpha=log_alpha,
            actor_opt_state=actor_opt_state,
            critic_opt_state=critic_opt_state,
            alpha_opt_state=alpha_opt_state,
            step=state.step + 1,
        )
        metrics = {
            "critic_loss": td_loss,
            "diversity_loss": div_loss,
            "actor_loss": actor_loss,
            "alpha_loss": alpha_loss,
            "alpha": alpha,
            "entropy": entropy,
            "q_mean": q.mean(),
        }
        return state, metrics

    def act(state: EDACState, observations: jax.Array) -> jax.Array:
        mu, _ = make_actor(state.action_dim).apply(
            state.actor_params, state.normalizer.normalize(observations)
        )
        return cfg.max_action * jnp.tanh(mu)

    return _common.Agent(name="edac", config=cfg, init=init, update=update, act=act)
