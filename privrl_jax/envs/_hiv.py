"""The HIV treatment simulator of Adams et al. (2004) as an RL task (Ernst et al. 2006).

Dynamics. Six concentrations (per ml of blood), in this order: T1 (uninfected CD4+
T-lymphocytes), T2 (uninfected macrophages), T1* and T2* (their infected forms), V (free
virions) and E (cytotoxic T-lymphocytes, the immune effectors). With drug efficacies
eps1 (reverse-transcriptase inhibitor) and eps2 (protease inhibitor), Adams et al.
(2004, "Dynamic multidrug therapies for HIV: optimal and STI control approaches", Math.
Biosci. Eng. 1(2); eq. 2.1 and Table 1) write

    dT1/dt  = lambda1 - d1 T1 - (1 - eps1) k1 V T1
    dT2/dt  = lambda2 - d2 T2 - (1 - f eps1) k2 V T2
    dT1*/dt = (1 - eps1) k1 V T1 - delta T1* - m1 E T1*
    dT2*/dt = (1 - f eps1) k2 V T2 - delta T2* - m2 E T2*
    dV/dt   = (1 - eps2) N_T delta (T1* + T2*) - c V
              - [(1 - eps1) rho1 k1 T1 + (1 - f eps1) rho2 k2 T2] V
    dE/dt   = lambda_E + b_E (T1* + T2*) / (T1* + T2* + K_b) E
              - d_E (T1* + T2*) / (T1* + T2* + K_d) E - delta_E E

with the constants of :class:`HIVParams` (Adams et al. 2004, Table 1; the same values
are in Ernst et al. 2006, "Clinical data based optimal STI strategies for HIV: a
reinforcement learning approach", IEEE CDC, Section IV, and in RLPy's ``HIVTreatment``
and WhyNot's ``hiv`` simulators, which we read to cross-check the numbers, not the
code).

The RL task (Ernst et al. 2006, Section IV): a decision every 5 days among 4 drug
combinations, (eps1, eps2) in {0, 0.7} x {0, 0.3}, held constant over the 5 days; the
reward of a step is ``-(Q V + R1 eps1^2 + R2 eps2^2 - S E)`` with Q = 0.1, R1 = 20000,
R2 = 2000, S = 1000, evaluated at the end of the step (as RLPy does); discount 0.98; 200
decisions (1000 days); episodes start at the "unhealthy" steady state of the untreated
system, (T1, T2, T1*, T2*, V, E) = (163573, 5, 11945, 46, 63919, 24) (Adams et al. 2004,
Table 2; Ernst et al. 2006). ``reward_scale`` multiplies the reward (default 1: Ernst's
units, which reach 1e8 when E grows); the OPE configs use a small public scale so that
values are O(1) for clipping. ``init_log10_spread`` > 0 draws each initial concentration
as the unhealthy value times 10^U(-spread, spread) (0: Ernst's fixed start), which gives
off-policy data some variety of start states. Observations are log10 of the six
concentrations (Ernst et al. use log10 states; RLPy's ``logspace``).

Integration. Adaptive Dormand-Prince 5(4) (``jax.experimental.ode.odeint``; diffrax is
not installed), rtol = atol = 1e-6, over each 5-day decision; jittable and vmappable (a
vmapped batch takes the steps its stiffest member needs). Not fixed-step RK4: the system
is stiff in exactly the phases the task is about. After a treatment interruption the
virus rebounds to V ~ 1e6-2.5e6 (the acute phase of Adams et al.'s Fig. 2), where the
macrophage loss rate k2 V reaches 100-250 per day, so an explicit fixed step must stay
below 2.8 / 250 ~ 0.01 day: RK4 with 100 steps per decision (dt = 0.05) diverged to NaN
for 128 random treatment schedules from the unhealthy state, and 200 steps diverged from
the early-infection state; a fixed-step L-stable Rosenbrock (ROS2) stayed finite but
needed 400 steps per decision for 2% accuracy. The convergence check (tests/envs/
test_hiv.py): against SciPy's LSODA at rtol 1e-10 over 30 random decisions, the largest
relative error of any concentration is below 2e-3 (float32); the early-infection state,
untreated, settles at the published unhealthy equilibrium within its rounding after 800
days; with rtol 1e-5 vs 1e-8 over 128 x 200 random decisions the largest relative
difference is 3e-4 (uniform actions) to 4e-3 (mostly both drugs, on concentrations
below 1), see docs/gpope_envs.md.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces
from jax.experimental.ode import odeint

from privrl_jax.envs._base import Environment

STATE_NAMES = ("T1", "T2", "T1*", "T2*", "V", "E")

# Adams et al. 2004, Table 2; Ernst et al. 2006: the untreated system's stable
# "unhealthy" equilibrium (rounded to integers by the authors).
UNHEALTHY_STEADY_STATE = (163573.0, 5.0, 11945.0, 46.0, 63919.0, 24.0)
# Adams et al. 2004, Table 2: the stable "healthy" equilibrium (for reference).
HEALTHY_STEADY_STATE = (967839.0, 621.0, 76.0, 6.0, 415.0, 353108.0)

# The four drug combinations (Ernst et al. 2006): index -> (eps1 on?, eps2 on?).
ACTIONS = ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0))


@struct.dataclass
class HIVState:
    """Concentrations ``cells`` [6] (order of ``STATE_NAMES``) and the step counter."""

    cells: jax.Array
    time: jax.Array


@struct.dataclass
class HIVParams:
    """Constants of the model (Adams et al. 2004, Table 1) and of the task (Ernst 2006).

    Rates are per day, concentrations per ml.
    """

    lambda1: float = 1e4
    d1: float = 0.01
    k1: float = 8e-7
    lambda2: float = 31.98
    d2: float = 0.01
    f: float = 0.34
    k2: float = 1e-4
    delta: float = 0.7
    m1: float = 1e-5
    m2: float = 1e-5
    n_t: float = 100.0
    c: float = 13.0
    rho1: float = 1.0
    rho2: float = 1.0
    lambda_e: float = 1.0
    b_e: float = 0.3
    k_b: float = 100.0
    d_e: float = 0.25
    k_d: float = 500.0
    delta_e: float = 0.1
    # Task (Ernst et al. 2006).
    eps1_max: float = 0.7
    eps2_max: float = 0.3
    q: float = 0.1
    r1: float = 2e4
    r2: float = 2e3
    s: float = 1e3
    reward_scale: float = 1.0
    days_per_step: float = 5.0
    init_log10_spread: float = 0.0
    rtol: float = struct.field(pytree_node=False, default=1e-6)
    atol: float = struct.field(pytree_node=False, default=1e-6)
    max_steps_in_episode: int = struct.field(pytree_node=False, default=200)


def derivatives(
    x: jax.Array, eps1: jax.Array, eps2: jax.Array, p: HIVParams
) -> jax.Array:
    """dx/dt of the six concentrations ``x`` [6] under drug efficacies (eps1, eps2)."""
    t1, t2, t1s, t2s, v, e = x
    infect1 = (1.0 - eps1) * p.k1 * v * t1
    infect2 = (1.0 - p.f * eps1) * p.k2 * v * t2
    infected = t1s + t2s
    return jnp.stack(
        [
            p.lambda1 - p.d1 * t1 - infect1,
            p.lambda2 - p.d2 * t2 - infect2,
            infect1 - p.delta * t1s - p.m1 * e * t1s,
            infect2 - p.delta * t2s - p.m2 * e * t2s,
            (1.0 - eps2) * p.n_t * p.delta * infected
            - p.c * v
            - (
                (1.0 - eps1) * p.rho1 * p.k1 * t1
                + (1.0 - p.f * eps1) * p.rho2 * p.k2 * t2
            )
            * v,
            p.lambda_e
            + p.b_e * infected / (infected + p.k_b) * e
            - p.d_e * infected / (infected + p.k_d) * e
            - p.delta_e * e,
        ]
    )


@partial(jax.jit, static_argnames=("rtol", "atol"))
def integrate(
    x: jax.Array,
    eps1: jax.Array,
    eps2: jax.Array,
    p: HIVParams,
    *,
    days: float | jax.Array,
    rtol: float = 1e-6,
    atol: float = 1e-6,
) -> jax.Array:
    """x(t + days) from x [6] under constant (eps1, eps2): adaptive Dormand-Prince 5(4).

    ``jax.experimental.ode.odeint`` (error-controlled, jittable and vmappable); see the
    module docstring for why not fixed-step RK4.
    """

    def rate(y, t):
        del t  # autonomous
        return derivatives(y, eps1, eps2, p)

    span = jnp.stack(
        [jnp.zeros_like(jnp.asarray(days, jnp.float32)), jnp.asarray(days, jnp.float32)]
    )
    return odeint(rate, x, span, rtol=rtol, atol=atol)[-1]


def drug_efficacies(action: jax.Array, p: HIVParams) -> tuple[jax.Array, jax.Array]:
    """(eps1, eps2) of action 0..3: none, RTI, PI, both (Ernst et al. 2006)."""
    on = jnp.asarray(ACTIONS, jnp.float32)[action]
    return on[0] * p.eps1_max, on[1] * p.eps2_max


def reward(x: jax.Array, eps1: jax.Array, eps2: jax.Array, p: HIVParams) -> jax.Array:
    """``reward_scale * -(Q V + R1 eps1^2 + R2 eps2^2 - S E)`` (Ernst et al. 2006)."""
    v, e = x[4], x[5]
    return p.reward_scale * -(p.q * v + p.r1 * eps1**2 + p.r2 * eps2**2 - p.s * e)


class HIVTreatment(Environment[HIVState, HIVParams]):
    """Ernst et al.'s (2006) HIV structured-treatment-interruption task (gymnax API).

    Four discrete actions (none, RTI, PI, both), observations log10 of the six
    concentrations, no terminal state (episodes end at the time limit).
    """

    @property
    def default_params(self) -> HIVParams:
        return HIVParams()

    @property
    def name(self) -> str:
        return "HIVTreatment"

    @property
    def num_actions(self) -> int:
        return 4

    def reset_env(
        self, key: jax.Array, params: HIVParams
    ) -> tuple[jax.Array, HIVState]:
        base = jnp.asarray(UNHEALTHY_STEADY_STATE, jnp.float32)
        spread = params.init_log10_spread
        cells = base * 10.0 ** jax.random.uniform(
            key, (6,), minval=-spread, maxval=spread
        )
        state = HIVState(cells=cells, time=jnp.zeros((), jnp.int32))
        return self.get_obs(state), state

    def step_env(self, key, state: HIVState, action, params: HIVParams):
        del key  # deterministic dynamics
        eps1, eps2 = drug_efficacies(action, params)
        cells = integrate(
            state.cells,
            eps1,
            eps2,
            params,
            days=params.days_per_step,
            rtol=params.rtol,
            atol=params.atol,
        )
        state = HIVState(cells=cells, time=state.time + 1)
        r = reward(cells, eps1, eps2, params)
        return self.get_obs(state), state, r, jnp.asarray(False), {}

    def get_obs(self, state: HIVState) -> jax.Array:
        return jnp.log10(state.cells)

    def observation_space(self, params: HIVParams) -> spaces.Box:
        # log10 concentrations; RLPy bounds them by [-5, 8].
        return spaces.Box(-5.0, 8.0, (6,), jnp.float32)

    def action_space(self, params: HIVParams) -> spaces.Discrete:
        return spaces.Discrete(4)


@dataclasses.dataclass(frozen=True)
class ViralLoadRule:
    """A simple structured-treatment-interruption rule: treat while the load is high.

    Both drugs (action 3) while the viral load exceeds ``10 ** log10_threshold``
    copies/ml, none (action 0) otherwise.

    A hand-written clinical heuristic (treat on viral rebound, interrupt when
    suppressed), used to build OPE behaviour and target policies; not Ernst et al.'s
    learned policy. Takes the log10 observation. Frozen, so usable as a static jit
    argument.
    """

    log10_threshold: float = 4.0

    def __call__(self, obs: jax.Array) -> jax.Array:
        return jnp.where(obs[4] > self.log10_threshold, 3, 0).astype(jnp.int32)


# Boxes for tile coding the log10 observations: the 0-100th percentiles of 256 x 60
# steps of an epsilon-soft ViralLoadRule (eps 0.5) from the spread start, widened by
# about half a decade (values outside are clipped to the box by the coder).
OBS_LOG10_LOW = (4.5, -1.0, -0.5, -1.0, 0.0, 1.0)
OBS_LOG10_HIGH = (6.0, 3.5, 5.5, 3.0, 6.5, 3.0)
