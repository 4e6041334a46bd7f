"""The PGM / MST config and public bins (no mbi needed: nothing is fitted here)."""

import numpy as np
import pytest

from privrl_jax import envs
from privrl_jax.pipelines import marginal


def test_bins_are_the_envs_declared_spaces_and_read_no_data():
    cfg = marginal.load("marginal/pgm_umaze")
    # public_discretisation takes the config and the dimensions only: no rows reach it.
    disc = marginal.public_discretisation(cfg, 4, 2)
    env, params = envs.make(cfg.data.sensitive_env)
    space = env.observation_space(params)
    lows = [c.low for c in disc.columns[:4]]
    highs = [c.high for c in disc.columns[:4]]
    np.testing.assert_allclose(lows, np.asarray(space.low), rtol=1e-6)
    np.testing.assert_allclose(highs, np.asarray(space.high), rtol=1e-6)
    assert disc.sizes == (32,) * 4 + (16, 16, 16) + (32,) * 4 + (2,)
    assert (disc.columns[6].low, disc.columns[6].high) == (
        0.0,
        1.0,
    )  # the declared reward range
    declared = marginal.load(
        "marginal/pgm_umaze",
        [
            "model.obs_low=[0, 0, -1, -1]",
            "model.obs_high=[4, 4, 1, 1]",
            "model.act_low=[-1, -1]",
            "model.act_high=[1, 1]",
        ],
    )
    assert marginal.public_discretisation(declared, 4, 2).columns[2].high == 1.0
    with pytest.raises(ValueError, match="the data have 3"):
        marginal.public_discretisation(cfg, 3, 2)


def test_config_errors_are_clear():
    with pytest.raises(
        ValueError, match="model.name must be 'pgm', 'mst', 'privsyn' or 'aim'"
    ):
        marginal.load("marginal/test", ["model.name=gan"])
    with pytest.raises(ValueError, match="MST selects its own"):
        marginal.load(
            "marginal/test", ["model.name=mst", "model.cliques=[[obs0, act0]]"]
        )
    # AIM's selections are ZCDpEvents, which dp-accounting's PLD accountant refuses.
    with pytest.raises(ValueError) as refused:
        marginal.load("marginal/test", ["model.name=aim", "privacy.accountant=pld"])
    assert str(refused.value) == (
        "model.name=aim records its exponential-mechanism selections as ZCDpEvent, "
        "which dp-accounting's PLD accountant does not support; set "
        "privacy.accountant=rdp."
    )
    assert marginal.load("marginal/test", ["model.name=pgm", "privacy.accountant=pld"])
    aim = marginal.load("marginal/aim_umaze")
    assert (aim.model.name, aim.privacy.accountant, aim.model.aim_rounds) == (
        "aim",
        "rdp",
        24,
    )
    with pytest.raises(
        ValueError, match=r"model.aim_max_model_size must be a number in \(0, "
    ):
        marginal.load("marginal/test", ["model.aim_max_model_size=0"])
    with pytest.raises(ValueError, match="reward_range"):
        marginal.load("marginal/test", ["model.reward_range=[1, 0]"])
    assert (
        marginal.noise_multiplier(
            marginal.load("marginal/test", ["privacy.epsilon=inf"])
        )
        == 0.0
    )
    sigma = marginal.noise_multiplier(
        marginal.load("marginal/test", ["privacy.epsilon=1"])
    )
    assert sigma == pytest.approx(
        3.5086, rel=1e-3
    )  # dp-accounting's Gaussian at (1, 1e-4)
