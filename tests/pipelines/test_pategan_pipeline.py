"""The PATE-GAN pipeline: sigma calibrated by dp-accounting for the run's query count
(fast); end to end on the tiny config (slow): the release layout, the ledger's epsilon
against dp-accounting's for the events that ran, the not-private labels, and the
pre-trained variant's networks coming from the public rows only."""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import data, diffusion, privacy, synth
from privrl_jax.pipelines import pategan
from privrl_jax.pipelines.privorl_n import load_data

TINY = ["data.public_envs=[maze2d-medium-dense-v1]", "data.public_size=200"]


def _eps(sigma, t, delta, acc):
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma), t)
    return privacy.compute_epsilon(event, delta, accountant=acc).epsilon


@pytest.mark.parametrize("acc", ["rdp", pytest.param("pld", marks=pytest.mark.slow)])
@pytest.mark.parametrize("eps,t", [(1.0, 50), (10.0, 1000)])
def test_sigma_is_the_smallest_within_budget_for_the_query_count(acc, eps, t):
    sigma = pategan.vote_noise_multiplier(eps, 1e-5, t, acc)
    assert _eps(sigma, t, 1e-5, acc) <= eps * (1 + 1e-9)
    assert _eps(sigma * (1 - 1e-3), t, 1e-5, acc) > eps  # not needlessly noisy
    if acc == "rdp":  # T Gaussians of sigma compose to one of sigma / sqrt(T) (RDP)
        one = privacy.GaussianMechanism(l2_sensitivity=1.0).calibrate(eps, 1e-5)
        assert sigma / math.sqrt(t) == pytest.approx(one.noise_multiplier, rel=1e-3)
    assert pategan.vote_noise_multiplier(math.inf, 1e-5, t, acc) == 0.0


def test_config_checks_and_query_count():
    cfg = pategan.load("pategan/umaze")
    assert cfg.model.num_queries == 1000 and cfg.model.name == "pategan"
    pre = pategan.load("pategan/umaze_pretrained")
    assert pre.model.name == "pategan_pretrained" and pre.model.pretrain_steps > 0
    with pytest.raises(ValueError, match="multiple of model.chunk_rounds"):
        pategan.load("pategan/test", ["model.rounds=15"])
    with pytest.raises(ValueError, match="model.name"):
        pategan.load("pategan/test", ["model.name=gan"])
    g = pategan.gan_config(cfg.model)
    assert (g.num_teachers, g.queries_per_round, g.generator_steps) == (100, 4, 5)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pategan")
    out, seen = {}, {}
    with pytest.MonkeyPatch.context() as mp:
        real_pretrain, real_init = pategan.pretrain_on_public, synth.init_pategan

        def watch_pretrain(cfg, nets, gcfg, public_rows, key):
            seen["public_rows"] = np.asarray(public_rows)
            seen["pretrained"] = real_pretrain(cfg, nets, gcfg, public_rows, key)
            return seen["pretrained"]

        def watch_init(*args, **kwargs):
            seen["init_kwargs"] = kwargs
            return real_init(*args, **kwargs)

        mp.setattr(pategan.runner, "pretrain_on_public", watch_pretrain)
        mp.setattr(synth, "init_pategan", watch_init)
        for name, overrides in {
            "eps10_seeded": ["privacy.noise_seed=7"],
            "inf": ["privacy.epsilon=inf"],
            "pretrained": ["model.name=pategan_pretrained"],  # fresh secret: private
        }.items():
            cfg = pategan.load("pategan/test", [*TINY, *overrides])
            out[name] = (root / name, pategan.run(cfg, root / name), cfg)
            if name == "eps10_seeded":
                assert "public_rows" not in seen  # no pre-training for plain PATE-GAN
    return out, seen


@pytest.mark.slow
def test_release_has_privorl_n_layout(runs):
    run_dir, report, _ = runs[0]["eps10_seeded"]
    for f in (
        "synthetic.hdf5",
        "ledger.json",
        "report.json",
        "config.yaml",
        "report.md",
        "audit/audit.json",
    ):
        assert (run_dir / f).is_file(), f
    syn = data.load_hdf5(run_dir / "synthetic.hdf5")
    assert len(syn) == 400 and syn.observations.shape == (400, 4)
    assert syn.actions.shape == (400, 2) and np.abs(syn.actions).max() <= 1.0
    assert set(np.unique(syn.terminals)) <= {0.0, 1.0}
    meta = data.read_hdf5_metadata(run_dir / "synthetic.hdf5")
    assert meta["generator"].startswith("PATE-GAN") and not meta["private"]
    assert "fidelity" not in report and "fidelity" in report["audit"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["eps10_seeded", "pretrained"])
def test_ledger_epsilon_equals_dp_accounting_for_the_events_that_ran(runs, name):
    run_dir, report, cfg = runs[0][name]
    ledger = privacy.Ledger.load(run_dir)
    m = cfg.model
    t = m.rounds * m.queries_per_round
    sigma = report["finetune"]["noise_multiplier"]
    # One ledger entry per chunk, recorded before it ran, T queries in all.
    assert [r.count for r in ledger.releases] == [
        m.chunk_rounds * m.queries_per_round
    ] * (m.rounds // m.chunk_rounds)
    assert ledger.num_releases == t == report["finetune"]["recorded_queries"]
    for r in ledger.releases:
        assert r.dp_event() == dp_accounting.SelfComposedDpEvent(
            dp_accounting.GaussianDpEvent(sigma), r.count
        )
        assert r.params["l2_sensitivity"] == 1.0
    for acc in ("rdp", "pld"):
        expected = _eps(sigma, t, cfg.privacy.delta, acc)
        assert ledger.epsilon(acc).epsilon == pytest.approx(expected, rel=1e-9)
        assert report["privacy"][acc]["epsilon"] == pytest.approx(expected, rel=1e-9)
    target = cfg.privacy.epsilon
    assert target * 0.99 <= report["privacy"]["rdp"]["epsilon"] <= target * (1 + 1e-9)


@pytest.mark.slow
def test_runs_are_labelled_private_or_not(runs):
    _, seeded, _ = runs[0]["eps10_seeded"]
    inf_dir, inf, _ = runs[0]["inf"]
    _, private, _ = runs[0]["pretrained"]
    assert not seeded["finetune"]["private"] and "noise_seed" in seeded["warning"]
    assert not inf["finetune"]["private"] and inf["finetune"]["noise_multiplier"] == 0
    assert "epsilon = inf" in inf["warning"]
    assert "NOT PRIVATE" in (inf_dir / "report.md").read_text()
    assert {g["event"]["type"] for g in inf["privacy"]["releases"]} == {
        "NonPrivateDpEvent"
    }
    assert math.isinf(inf["privacy"]["rdp"]["epsilon"])
    assert private["finetune"]["private"] and "warning" not in private
    assert private["finetune"]["noise_secret"].startswith("drawn from os.urandom")


@pytest.mark.slow
def test_pretrained_networks_come_from_the_public_rows_only(runs):
    _, report, cfg = runs[0]["pretrained"]
    seen = runs[1]
    public, sensitive, _ = load_data(cfg)
    layout = diffusion.TransitionLayout(obs_dim=4, act_dim=2, next_obs_delta=True)
    flat = diffusion.flatten_transitions(
        jax.tree_util.tree_map(jnp.asarray, public), layout
    )
    norm = diffusion.fit_normaliser_on_public(
        np.asarray(flat), one_hot_mask=layout.one_hot_mask()
    )
    expected = np.asarray(diffusion.normalise(norm, flat))
    np.testing.assert_array_equal(seen["public_rows"], expected)
    assert len(seen["public_rows"]) == len(public) != len(sensitive)
    g, d, _ = seen["pretrained"]
    kw = seen["init_kwargs"]
    for a, b in zip(
        jax.tree_util.tree_leaves((kw["generator"], kw["discriminator"])),
        jax.tree_util.tree_leaves((g, d)),
    ):
        np.testing.assert_array_equal(a, b)
    assert report["finetune"]["pretrain"]["steps"] == cfg.model.pretrain_steps


def _without_clock(x):
    """A ledger or report with what a rerun must change dropped: times, wall time and
    the hashes that chain them."""
    drop = {"time", "hash", "prev", "chain_head", "wall_time_s", "ledger_head"}
    if isinstance(x, dict):
        return {k: _without_clock(v) for k, v in x.items() if k not in drop}
    if isinstance(x, list):
        return [_without_clock(v) for v in x]
    return x


@pytest.mark.slow
def test_fixed_seed_rerun_is_bit_identical(runs, tmp_path):
    # Issue 26: a fixed-seed run (seed, privacy.noise_seed) must give the same release,
    # ledger and report when rerun into a fresh directory (what a results table's
    # rerun relies on); only clocks and the hashes over them may differ.
    import json

    first_dir, first, cfg = runs[0]["eps10_seeded"]
    again = pategan.run(cfg, tmp_path / "again")
    a, b = (
        data.load_hdf5(d / "synthetic.hdf5") for d in (first_dir, tmp_path / "again")
    )
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()
    assert _without_clock(again) == _without_clock(first)
    ledgers = [
        json.loads((d / "ledger.json").read_text())
        for d in (first_dir, tmp_path / "again")
    ]
    assert _without_clock(ledgers[0]) == _without_clock(ledgers[1])
    assert again["audit"]["fidelity"] == first["audit"]["fidelity"]
