"""GPOPE pipeline: end to end on the tiny test config, ledger, rerun, secrets, CLI."""

import json

import dp_accounting
import numpy as np
import pytest
from typer.testing import CliRunner

from privrl_jax import ope, privacy
from privrl_jax.cli.main import app
from privrl_jax.pipelines import gpope
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._dp_loop import DPSecret

PUBLIC = ("config.yaml", "report.json", "report.md", "ledger.json", "weights.json")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check_plots(run_dir):
    """Both PNGs exist where they belong (release vs audit), are valid and not empty."""
    release, audit = run_dir / gpope.VALUES_PLOT, run_dir / gpope.AUDIT_PLOT
    assert release.parent == run_dir and audit.parent == run_dir / "audit"
    for png in (release, audit):
        data = png.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 5_000, png
    # Neither is on the other side of the release/audit split.
    assert not (run_dir / "audit" / release.name).exists()
    assert not (run_dir / audit.name).exists()
    assert {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*.png")} == {
        gpope.VALUES_PLOT,
        gpope.AUDIT_PLOT,
    }
    report = json.loads((run_dir / "report.json").read_text())
    assert report["plots"] == {
        "release": [gpope.VALUES_PLOT],
        "audit": [gpope.AUDIT_PLOT],
    }
    assert gpope.VALUES_PLOT in report["release"]["publishable"]
    assert not any("audit" in f for f in report["release"]["publishable"])
    md = (run_dir / "report.md").read_text()
    release_par = next(x for x in md.split("\n\n") if x.startswith("**Release**"))
    audit_par = next(x for x in md.split("\n\n") if x.startswith("**Audit**"))
    assert (
        f"`{gpope.VALUES_PLOT}`" in release_par and gpope.AUDIT_PLOT not in release_par
    )
    assert f"`{gpope.AUDIT_PLOT}`" in audit_par


def _cfg(*overrides):
    return gpope.load("gpope/test", list(overrides))


def _secret(run_dir):
    ckpt = Checkpoints(run_dir / "checkpoints" / "dp")
    return DPSecret.from_tree(ckpt.mgr.restore(ckpt.latest())["secret"])


def _check_ledger(run_dir, plan, event_type, delta):
    ledger = privacy.Ledger.load(run_dir)
    assert ledger.num_releases == plan.steps
    assert {r.what for r in ledger.releases} == {gpope.DP_STEP}
    assert all(
        r.event == privacy.event_to_dict(plan.step_event()) for r in ledger.releases
    )
    assert isinstance(plan.step_event(), event_type)
    assert ledger.epsilon("rdp").epsilon == pytest.approx(
        plan.epsilon(delta).epsilon, rel=1e-9
    )
    return ledger


def _check_release_is_ope_gpope(run_dir, cfg, secret):
    """The pipeline's release is ``ope.gpope`` on the same data, schedule and key.

    One update (``ope.gpope_method`` in the loop, the same pieces in the scan), one
    sampling stream (``sample_schedule`` row t is the loop's ``plan.sample(seed, t)``)
    and the same microbatched sum: bit for bit, not to a tolerance.
    """
    plan = gpope.make_plan(cfg)
    schedule = ope.sample_schedule(plan, secret.sampling_seed)
    for t in range(plan.steps):
        batch = plan.sample(secret.sampling_seed, t)
        np.testing.assert_array_equal(
            schedule.indices[t][schedule.mask[t]], batch.indices[batch.mask]
        )
    g = cfg.gpope
    res = ope.gpope(
        plan,
        gpope.collect_data(gpope.build_task(cfg)),
        schedule,
        secret.noise_key,
        step_size=ope.StepSize(g.step_size, g.decay_steps, g.decay_power),
        normalization=g.normalization,
    )
    weights = json.loads((run_dir / "weights.json").read_text())
    np.testing.assert_array_equal(np.float32(weights["theta"]), np.asarray(res.theta))
    np.testing.assert_array_equal(np.float32(weights["w"]), np.asarray(res.w))


def test_default_run_end_to_end_rerun_spends_nothing_and_hides_the_secret(tmp_path):
    cfg = _cfg("audit.canaries=200")
    rep = gpope.run(cfg, tmp_path)
    # One-of-m sampling is replace-one: a canary added is an add/remove neighbour, so
    # the audit says it cannot test this relation instead of showing a bound of another
    # one.
    (row,) = rep["epsilon_audit"]["rows"]
    assert not row["audited"] and "replace-one" in row["why"]
    assert "not audited (replace-one" in (tmp_path / "report.md").read_text()
    for name in (*PUBLIC, "audit/audit.json", "audit/NOT_DP_README.txt"):
        assert (tmp_path / name).exists(), name
    # plots: false in gpope/test: no PNG anywhere, none listed.
    assert not cfg.plots and not list(tmp_path.rglob("*.png"))
    assert rep["plots"] == {"release": [], "audit": []}
    assert ".png" not in (tmp_path / "report.md").read_text()
    plan = gpope.make_plan(cfg)
    ledger = _check_ledger(
        tmp_path,
        plan,
        dp_accounting.SampledWithoutReplacementDpEvent,
        cfg.privacy.delta,
    )
    eps = ledger.epsilon("rdp").epsilon
    assert rep["epsilon_spent"] == pytest.approx(eps)
    assert 0.95 * cfg.privacy.epsilon <= eps <= cfg.privacy.epsilon
    # Uniform one-of-m is replace-one: noise std = sigma * 2h.
    g = rep["gpope"]
    assert g["neighboring"] == "REPLACE_ONE" and g["private"]
    assert g["noise_std"] == pytest.approx(
        2 * cfg.gpope.l2_clip_norm * g["noise_multiplier"]
    )
    t1 = ope.theorem1_sigma(
        cfg.privacy.epsilon,
        cfg.privacy.delta,
        steps=plan.steps,
        dataset_size=plan.dataset_size,
    )
    assert rep["theorem1"]["paper_sigma"] == pytest.approx(t1.paper_sigma)
    # The theorem's sigma priced by dp-accounting's RDP accountant, in its own mode.
    at_t1 = dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(
            plan.dataset_size, 1, dp_accounting.GaussianDpEvent(t1.noise_multiplier)
        ),
        plan.steps,
    )
    want = (
        dp_accounting.rdp.RdpAccountant(
            neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
        )
        .compose(at_t1)
        .get_epsilon(cfg.privacy.delta)
    )
    assert rep["theorem1"]["accountant_epsilon"] == pytest.approx(want, rel=1e-9)
    assert rep["theorem1"]["accountant_epsilon_ratio"] == pytest.approx(
        want / cfg.privacy.epsilon, rel=1e-9
    )
    assert (
        "warning" not in rep
        and "NOT PRIVATE" not in (tmp_path / "report.md").read_text()
    )
    # Release vs audit: what reads the data without DP is in audit/ only.
    released = json.loads((tmp_path / "report.json").read_text())
    assert "audit" not in released and "mse_vs_exact" not in json.dumps(released)
    audit = json.loads((tmp_path / "audit" / "audit.json").read_text())
    assert (
        np.isfinite(audit["mse_vs_exact"]) and "NOT DIFFERENTIALLY" in audit["notice"]
    )
    weights = json.loads((tmp_path / "weights.json").read_text())
    assert len(weights["theta"]) == cfg.env.num_states
    # The secret is in the checkpoints and nowhere in the release.
    secret = _secret(tmp_path)
    assert not secret.fixed
    public = "".join((tmp_path / f).read_text() for f in PUBLIC)
    for word in [*map(str, secret.words), str(secret.sampling_seed)]:
        assert word not in public
    # A rerun into the same directory resumes at the end: nothing new is spent.
    before = (tmp_path / "ledger.json").read_bytes()
    rep2 = gpope.run(cfg, tmp_path)
    assert (tmp_path / "ledger.json").read_bytes() == before
    assert rep2["weights"] == rep["weights"]
    # A different config into the same directory is refused.
    with pytest.raises(ValueError, match="different config"):
        gpope.run(_cfg("gpope.steps=41"), tmp_path)


def test_poisson_run_records_poisson_events(tmp_path):
    cfg = _cfg("gpope.sampler=poisson", "audit.canaries=1000")
    rep = gpope.run(cfg, tmp_path)
    plan = gpope.make_plan(cfg)
    ledger = _check_ledger(
        tmp_path, plan, dp_accounting.PoissonSampledDpEvent, cfg.privacy.delta
    )
    # The Poisson plan (add/remove-one) is audited; its accounted epsilon is the
    # ledger's.
    (row,) = rep["epsilon_audit"]["rows"]
    assert row["audited"] and not row["violation"]
    assert row["epsilon_accounted"] == pytest.approx(
        ledger.epsilon("rdp").epsilon, rel=1e-9
    )
    assert 0 <= row["epsilon_demonstrated"] <= row["epsilon_accounted"]
    assert "epsilon demonstrated >=" in (tmp_path / "report.md").read_text()
    g = rep["gpope"]
    assert g["neighboring"] == "ADD_OR_REMOVE_ONE"
    assert g["sampling_rate"] == pytest.approx(
        cfg.gpope.batch_size / cfg.env.num_trajectories
    )
    assert g["noise_std"] == pytest.approx(
        cfg.gpope.l2_clip_norm * g["noise_multiplier"]
    )
    # The run's own (fresh, secret) sampling seed and noise key reproduce it through
    # ope.gpope (tests/ope/test_gpope.py checks batches over several microbatches).
    _check_release_is_ope_gpope(tmp_path, cfg, _secret(tmp_path))


def test_non_private_run_records_every_step_it_ran(tmp_path):
    # epsilon = inf: no noise, but the ledger still says what ran (sampler, clip norm
    # and all 40 steps, one entry per commit), so the audit reruns 40 steps, not one.
    cfg = _cfg(
        "privacy.epsilon=inf",
        "gpope.sampler=poisson",
        "gpope.checkpoint_every=15",
        "audit.canaries=1000",
    )
    rep = gpope.run(cfg, tmp_path)
    plan = gpope.make_plan(cfg)
    assert not plan.private and plan.steps == 40
    ledger = privacy.Ledger.load(tmp_path)
    assert [r.count for r in ledger.releases] == [15, 15, 10]
    assert all(r.params == plan.describe() for r in ledger.releases)
    assert all(
        r.event == privacy.event_to_dict(dp_accounting.NonPrivateDpEvent())
        for r in ledger.releases
    )
    assert rep["epsilon_spent"] == float("inf")
    (row,) = rep["epsilon_audit"]["rows"]
    assert row["count"] == 40 and row["audited"]
    assert row["epsilon_accounted"] == float("inf") and not row["violation"]


def test_plots_on_writes_the_release_and_audit_pngs_apart(tmp_path, monkeypatch):
    cfg = _cfg("plots=true", "privacy.noise_seed=3")
    assert gpope.load("gpope/chain").plots  # on by default in the shipped configs
    gpope.run(cfg, tmp_path)
    _check_plots(tmp_path)
    # The release plot shows theta . phi(s): with one-hot chain features, theta itself.
    theta = np.array(json.loads((tmp_path / "weights.json").read_text())["theta"])
    task = gpope.build_task(cfg)
    np.testing.assert_allclose(gpope.release_values(task, theta), theta, rtol=1e-6)

    # The release plot reads no sensitive data and no truth: it renders with every
    # such source disabled.
    def forbidden(*a, **k):
        raise AssertionError("the release plot read the data or the truth")

    from privrl_jax.pipelines.gpope import audit as audit_module
    from privrl_jax.pipelines.gpope import task as task_module

    for module, names in (
        (task_module, ("collect_data", "true_values", "lstd_min_norm")),
        (audit_module, ("references", "audit_release", "_audit_continuous")),
    ):
        for name in names:
            monkeypatch.setattr(module, name, forbidden)
    out = tmp_path / "again.png"
    rep = json.loads((tmp_path / "report.json").read_text())
    gpope.plot_release_values(task, theta, rep["gpope"], out)
    assert out.read_bytes()[:8] == PNG_MAGIC
    # The audit plot's curves are the audit's own numbers (checked there).
    audit = json.loads((tmp_path / "audit" / "audit.json").read_text())
    np.testing.assert_allclose(audit["estimated_values"], theta, rtol=1e-5, atol=1e-7)


def test_fixed_noise_seed_reproduces_the_core_and_says_not_private(tmp_path):
    cfg = _cfg("privacy.noise_seed=3")
    reps = [gpope.run(cfg, tmp_path / name) for name in ("a", "b")]
    wa, wb = (
        json.loads((tmp_path / n / "weights.json").read_text()) for n in ("a", "b")
    )
    assert wa["theta"] == wb["theta"] and wa["w"] == wb["w"]
    for name, rep in zip("ab", reps):
        assert not rep["gpope"]["private"] and "NOT PRIVATE" in rep["warning"]
        assert "NOT PRIVATE" in (tmp_path / name / "report.md").read_text()
    _check_release_is_ope_gpope(tmp_path / "a", cfg, DPSecret.from_seed(3))


@pytest.mark.parametrize(
    "override, match",
    [
        ("gpope.sampler=shuffle", "gpope.sampler"),
        ("privacy.accountant=pld", "PLD"),
        ("env.behaviour_treat=[0.0]", "behaviour_treat"),
        ("privacy.epsilon=0", "privacy.epsilon"),
        ("gpope.nonsense=1", "unknown config key"),
        ("env.name=cartpole", "env.name"),
        ("env.name=hiv env.behaviour_epsilon=0", "behaviour_epsilon"),
        ("env.name=mountain_car env.reward_scale=0", "reward_scale"),
        ("env.name=hiv truth.rollouts=0", "truth.rollouts"),
        ("plots=maybe", "plots"),
    ],
)
def test_bad_config_values(override, match):
    with pytest.raises(ValueError, match=match):
        _cfg(*override.split())


@pytest.mark.parametrize("name", ["chain", "chain_uniform", "mountain_car", "hiv"])
def test_shipped_configs_load(name):
    cfg = gpope.load(f"gpope/{name}")
    assert cfg.env.name == name.removesuffix("_uniform")


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_mountain_car_run_audits_against_monte_carlo(tmp_path):
    cfg = gpope.load("gpope/mc_test", ["privacy.noise_seed=3", "plots=true"])
    rep = gpope.run(cfg, tmp_path)
    _check_plots(tmp_path)
    w = json.loads((tmp_path / "weights.json").read_text())
    assert w["env"] == "mountain_car" and not w["private"]
    n = 1 + 2 * 5**2  # constant + 2 tilings of (4 + 1)^2 tiles
    assert len(w["theta"]) == n
    audit = json.loads((tmp_path / "audit" / "audit.json").read_text())
    assert len(audit["mc_values"]) == cfg.truth.eval_states
    # The audit's numbers recompute from its own parts.
    est, mc = np.array(audit["estimated_values"]), np.array(audit["mc_values"])
    assert audit["mse_vs_exact"] == pytest.approx(np.mean((est - mc) ** 2), rel=1e-5)
    assert audit["zero_predictor_mse"] == pytest.approx(np.mean(mc**2), rel=1e-5)
    # Values of -1 per step scaled by 0.02 with gamma 0.98 lie in (-1, 0).
    assert np.all((mc < 0) & (mc > -1))
    # The ledger holds the Poisson events of the run and matches the plan's epsilon.
    _check_ledger(
        tmp_path,
        gpope.make_plan(cfg),
        dp_accounting.PoissonSampledDpEvent,
        cfg.privacy.delta,
    )
    assert "NOT PRIVATE" in (tmp_path / "report.md").read_text()
    assert rep["audit"]["mse_vs_exact"] == audit["mse_vs_exact"]
    # The release plot's values: theta . phi over the public evaluation states, sorted;
    # the same states the audit's estimates are taken at.
    v = gpope.release_values(gpope.build_task(cfg), np.array(w["theta"]))
    np.testing.assert_allclose(v, np.sort(est), rtol=1e-5, atol=1e-6)
    assert len(audit["mc_stderr"]) == cfg.truth.eval_states


def test_cli_runs_and_reports_errors_on_one_line(tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        [
            "ope",
            "run",
            "--config",
            "gpope/test",
            "--out",
            str(out),
            "--set",
            "privacy.noise_seed=1",
        ],
    )
    assert res.exit_code == 0, res.output
    assert (out / "weights.json").exists()
    bad = runner.invoke(
        app,
        [
            "ope",
            "run",
            "--config",
            "test",
            "--out",
            str(out),
            "--set",
            "gpope.sampler=nope",
        ],
    )
    assert bad.exit_code == 2 and "gpope.sampler" in bad.output


def test_interrupted_run_resumes_to_the_same_weights_and_spend(tmp_path, monkeypatch):
    cfg = _cfg("privacy.noise_seed=5", "gpope.checkpoint_every=20")
    gpope.run(cfg, tmp_path / "ref")
    save = Checkpoints.save

    def crash_at_40(self, step, tree):
        # After the ledger recorded steps 21-40, before their checkpoint: the worst
        # case.
        if step == 40:
            raise KeyboardInterrupt
        save(self, step, tree)

    monkeypatch.setattr(Checkpoints, "save", crash_at_40)
    with pytest.raises(KeyboardInterrupt):
        gpope.run(cfg, tmp_path / "b")
    assert privacy.Ledger.load(tmp_path / "b").num_releases == 40
    monkeypatch.setattr(Checkpoints, "save", save)
    gpope.run(cfg, tmp_path / "b")
    # The replayed steps 21-40 drew the same batches and noise and were not counted
    # twice.
    assert privacy.Ledger.load(tmp_path / "b").num_releases == 40
    ref, got = (
        json.loads((tmp_path / n / "weights.json").read_text()) for n in ("ref", "b")
    )
    assert got["theta"] == ref["theta"] and got["w"] == ref["w"]


@pytest.mark.slow  # compiles the adaptive ODE solver for data, evaluation and truth
def test_hiv_run_end_to_end(tmp_path):
    cfg = gpope.load(
        "gpope/hiv",
        [
            "env.num_trajectories=16",
            "env.max_length=5",
            "gpope.steps=10",
            "gpope.batch_size=4",
            "gpope.checkpoint_every=10",
            "truth.eval_states=4",
            "truth.rollouts=2",
            "truth.horizon=20",
            "truth.eval_max_steps=5",
            "privacy.noise_seed=0",
        ],
    )
    gpope.run(cfg, tmp_path)
    w = json.loads((tmp_path / "weights.json").read_text())
    assert w["env"] == "hiv" and len(w["theta"]) == 1 + 6 * 2 * 4
    audit = json.loads((tmp_path / "audit" / "audit.json").read_text())
    # Near the unhealthy state E ~ 24 dominates the reward: +1000 E - 0.1 V ~ +1.8e4 per
    # step, 0.018 in units of 1e6, so 20-step values are positive and below 1.
    assert all(0 < v < 1 for v in audit["mc_values"])


def test_budget_advice_names_gpope_keys_not_privorl_ones(tmp_path, monkeypatch):
    # The DP loop's default advice is PrivORL-n's (finetune.*); a GPOPE user who runs
    # over budget must be told GPOPE's own keys.
    from privrl_jax.pipelines.gpope import runner

    seen = {}

    def capture(*args, **kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_dp_loop", capture)
    with pytest.raises(KeyboardInterrupt):
        gpope.run(_cfg(), tmp_path / "run")
    hint = seen["budget_hint"]
    assert "gpope.steps" in hint and "privacy.epsilon" in hint
    assert "finetune" not in hint
