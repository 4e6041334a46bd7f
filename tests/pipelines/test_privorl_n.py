"""PrivORL-n pipeline: smoke run on the tiny test config, resume, config errors."""

import json
from pathlib import Path

import dp_accounting
import numpy as np
import pytest
from pipelines_testlib import (
    assert_rerun_refused,
    assert_resume_is_exact,
    assert_secret_not_published,
    read_secret,
)

from privrl_jax import data, privacy
from privrl_jax.pipelines import privorl_n

TEST_CONFIG = (
    Path(__file__).resolve().parents[2] / "configs" / "privorl_n" / "test.yaml"
)


def _cfg(*overrides):
    return privorl_n.load(TEST_CONFIG, list(overrides))


def test_smoke_run_writes_everything_and_spends_what_it_reports(tmp_path):
    cfg = _cfg("eval.train_real_agents=false")
    rep = privorl_n.run(cfg, tmp_path)
    for name in (
        "config.yaml",
        "ledger.json",
        "synthetic.hdf5",
        "report.json",
        "report.md",
    ):
        assert (tmp_path / name).exists(), name
    syn = data.load_hdf5(tmp_path / "synthetic.hdf5")
    assert len(syn) == cfg.synthesis.num_samples
    info = rep["finetune"]
    # The ledger holds exactly the planned Poisson steps with the calibrated sigma ...
    ledger = privacy.Ledger.load(tmp_path)
    assert (
        ledger.num_releases
        == info["steps"]
        == int(np.ceil(cfg.finetune.epochs * info["dataset_size"] / 32))
    )
    expected = privacy.compute_epsilon(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(
                info["sampling_rate"],
                dp_accounting.GaussianDpEvent(info["noise_multiplier"]),
            ),
            info["steps"],
        ),
        cfg.privacy.delta,
    ).epsilon
    # ... whose epsilon is dp-accounting's, at most the budget and close to it
    # (calibrated).
    assert rep["privacy"]["rdp"]["epsilon"] == pytest.approx(expected, rel=1e-12)
    assert 0.95 * cfg.privacy.epsilon <= expected <= cfg.privacy.epsilon
    assert info["sampling_rate"] == pytest.approx(32 / info["dataset_size"])
    # Release vs audit: what reads the sensitive data lives in audit/ only.
    audit = json.loads((tmp_path / "audit" / "audit.json").read_text())
    assert (
        "NOT DIFFERENTIALLY PRIVATE"
        in (tmp_path / "audit" / "NOT_DP_README.txt").read_text()
    )
    released = json.loads((tmp_path / "report.json").read_text())
    assert not {"fidelity", "mia", "agents_real", "audit"} & set(released)
    assert (
        0 <= audit["fidelity"]["marginal"] <= 1
        and 0 <= audit["fidelity"]["correlation"] <= 1
    )
    # The anchors are scored like the release, on as many rows as the holdout has.
    anchors = audit["anchors"]
    assert set(anchors) == {"real_holdout", "pretrain_only"}
    for scores in (audit["fidelity"], *anchors.values()):
        assert scores["rows_compared"] == cfg.data.holdout_size
        assert scores["sliced_wasserstein"] > 0 and 0 <= scores["free_cell_share"] <= 1
    # Real data lie in the sensitive maze's free cells by construction.
    assert anchors["real_holdout"]["free_cell_share"] == 1.0
    assert "pre-training only / real holdout" in (tmp_path / "report.md").read_text()
    assert (
        info["private"]
        and "warning" not in rep
        and "NOT PRIVATE" not in (tmp_path / "report.md").read_text()
    )
    assert set(rep["agents_synthetic"]) == {"td3bc"}
    # Agent score: per seed, the mean of the evaluations after the last 2 of 3 chunks;
    # then the mean over the 2 seeds (different seeds train different agents).
    td3 = rep["agents_synthetic"]["td3bc"]
    assert len(td3["per_seed"]) == 2
    for run in td3["per_seed"]:
        assert [e["step"] for e in run["curve"]] == [10, 20, 30]
        assert run["score_mean"] == pytest.approx(
            np.mean([e["score_mean"] for e in run["curve"][1:]])
        )
    assert td3["score_mean"] == pytest.approx(
        np.mean([r["score_mean"] for r in td3["per_seed"]])
    )
    assert td3["score_std"] == pytest.approx(
        np.std([r["score_mean"] for r in td3["per_seed"]], ddof=1)
    )
    assert td3["per_seed"][0]["curve"] != td3["per_seed"][1]["curve"]
    assert (
        0 <= audit["mia"]["tpr_at_1_fpr"] <= 1
        and 0 <= audit["mia_distance"]["auc"] <= 1
    )
    assert released["finetune"] == info
    # The secret (noise key and sampling seed) is in the checkpoints and nowhere else.
    assert_secret_not_published(tmp_path)
    # A rerun with another evaluation takes no new DP step and keeps the release; only
    # the audit changes.
    released_bytes = (tmp_path / "synthetic.hdf5").read_bytes()
    again = privorl_n.run(
        _cfg("eval.train_real_agents=false", "eval.agent_seeds=1"), tmp_path
    )
    assert privacy.Ledger.load(tmp_path).num_releases == info["steps"]
    assert again["finetune"] == info
    assert (tmp_path / "synthetic.hdf5").read_bytes() == released_bytes
    assert len(again["agents_synthetic"]["td3bc"]["per_seed"]) == 1


def test_default_runs_draw_secret_noise_and_a_fixed_seed_says_not_private(tmp_path):
    fast = (
        "pretrain.steps=0",
        "eval.agents=[]",
        "eval.mia=false",
        "synthesis.num_samples=200",
    )
    out = {}
    for name, extra in (
        ("a", ()),
        ("b", ()),
        ("c", ("privacy.noise_seed=7",)),
        ("d", ("privacy.noise_seed=7",)),
    ):
        out[name] = privorl_n.run(_cfg(*fast, *extra), tmp_path / name)
    syn = {
        k: np.asarray(data.load_hdf5(tmp_path / k / "synthetic.hdf5").observations)
        for k in out
    }
    # Same config, fresh secrets: different noise, so different synthetic data.
    assert not np.array_equal(
        read_secret(tmp_path / "a").words, read_secret(tmp_path / "b").words
    )
    assert not np.allclose(syn["a"], syn["b"])
    assert out["a"]["finetune"]["private"] and out["b"]["finetune"]["private"]
    # A fixed noise seed reproduces the release exactly, and every report says it is not
    # private.
    np.testing.assert_array_equal(syn["c"], syn["d"])
    assert not out["c"]["finetune"]["private"]
    assert "NOT PRIVATE" in out["c"]["warning"]
    assert "NOT PRIVATE" in (tmp_path / "c" / "report.md").read_text()
    assert (
        json.loads((tmp_path / "c" / "report.json").read_text())["warning"]
        == out["c"]["warning"]
    )


def test_rerun_with_other_config_is_refused(tmp_path):
    assert_rerun_refused(privorl_n.run, _cfg(), tmp_path)


@pytest.mark.parametrize(
    "override, match",
    [
        ("privacy.epsilon=0", "privacy.epsilon"),
        ("privacy.delta=2", "delta"),
        ("finetune.clip_method=fast", "clip_method"),
        ("finetune.nonsense=1", "unknown config key"),
        ("finetune.batch_size=abc", "must be an integer"),
        ("finetune.learning_rate=fast", "must be a number"),
        ("eval.final_evals=4", "eval.final_evals"),
        ("eval.agent_seeds=0", "eval.agent_seeds"),
        ("eval.backend=gpu", r"eval.backend must be 'jax' or 'mujoco'; got 'gpu'\."),
        # Values that size the DP phase or the release, refused before any noise is
        # drawn.
        ("finetune.epochs=0", r"finetune.epochs must be a number in \(0, 100,000\]"),
        ("finetune.epochs=-3", r"finetune.epochs must be a number in \(0, 100,000\]"),
        ("finetune.epochs=.inf", r"finetune.epochs must be a number in \(0, 100,000\]"),
        ("finetune.epochs=nan", r"finetune.epochs must be a number in \(0, 100,000\]"),
        ("finetune.l2_clip_norm=0", "finetune.l2_clip_norm must be"),
        ("finetune.learning_rate=-1", "finetune.learning_rate must be"),
        (
            "synthesis.num_samples=100000000000",
            r"synthesis.num_samples must be an integer in \[1, 100,000,000\]; got "
            "100000000000",
        ),
        (
            "synthesis.num_samples=0",
            r"synthesis.num_samples must be an integer in \[1,",
        ),
        (
            "pretrain.steps=-20",
            r"pretrain.steps must be an integer in \[0, 10,000,000\]",
        ),
        ("pretrain.chunk_steps=0", r"pretrain.chunk_steps must be an integer in \[1,"),
        (
            "synthesis.ema_decay=1.5",
            r"synthesis.ema_decay must be a number in \[0, 1\)",
        ),
        ("synthesis.ema_decay=1", r"synthesis.ema_decay must be a number in \[0, 1\)"),
        ("model.width=0", r"model.width must be an integer in \[1, 65,536\]; got 0"),
        ("model.fourier_dim=3", "model.fourier_dim must be even"),
        ("data.sensitive_size=1e12", r"data.sensitive_size must be an integer in \[1,"),
        ("data.holdout_size=0", r"data.holdout_size must be an integer in \[1,"),
        ("eval.mia_size=-1", r"eval.mia_size must be an integer in \[1,"),
    ],
)
def test_bad_config_values(override, match):
    with pytest.raises(ValueError, match=match):
        _cfg(override)


def test_eval_backend_mujoco_only_for_the_v1_mazes():
    assert _cfg("eval.backend=mujoco").eval.backend == "mujoco"  # umaze-dense-v1
    match = r"eval.backend='mujoco' scores D4RL's maze2d-\*-v1"
    with pytest.raises(ValueError, match=match):
        _cfg("eval.backend=mujoco", "data.sensitive_env=maze2d-umaze-dense")


def test_exponent_without_dot_is_a_float():
    # YAML 1.1 reads 1e-3 as a string; the loader must take it as the number.
    assert _cfg("finetune.learning_rate=1e-3").finetune.learning_rate == 1e-3


@pytest.mark.slow
@pytest.mark.parametrize(
    "curiosity", ["0.0", "0.3"]
)  # 0.3: FineCur, whose pool and RND resume too
def test_interrupted_run_resumes_to_the_same_result(tmp_path, monkeypatch, curiosity):
    overrides = (
        "eval.agents=[]",
        "eval.mia=false",
        "finetune.epochs=1.0",
        f"finetune.curiosity_rate={curiosity}",
        "privacy.noise_seed=3",
    )  # the same secret as the interrupted run's (checkpointed) one
    # Crash after 2 pre-training chunks, the DP secret and 2 DP checkpoints.
    assert_resume_is_exact(
        privorl_n.run, lambda: _cfg(*overrides), tmp_path, monkeypatch, crash_after=5
    )


FAST = (
    "pretrain.steps=0",
    "eval.agents=[]",
    "eval.mia=false",
    "synthesis.num_samples=200",
)


def test_privacy_report_refuses_an_edited_truncated_or_missing_ledger(tmp_path):
    from typer.testing import CliRunner

    from privrl_jax.cli.main import app

    privorl_n.run(_cfg(*FAST), tmp_path)
    runner = CliRunner()
    good = runner.invoke(app, ["privacy", "report", str(tmp_path), "--json"])
    assert good.exit_code == 0, good.output
    assert (
        json.loads(good.output)["verified"]
        and not json.loads(good.output)["over_budget"]
    )
    original = (tmp_path / "ledger.json").read_text()

    def lower_count(d):
        d["releases"][0]["count"] = 1

    def truncate(
        d,
    ):  # a valid chain, but shorter than the one the checkpoints and release hold
        d["releases"] = d["releases"][:1]

    for edit, match in (
        (lower_count, "does not match its hash"),
        (truncate, "truncated or replaced"),
    ):
        d = json.loads(original)
        edit(d)
        (tmp_path / "ledger.json").write_text(json.dumps(d))
        res = runner.invoke(app, ["privacy", "report", str(tmp_path)])
        assert res.exit_code == 2 and match in res.output, res.output
    (tmp_path / "ledger.json").unlink()
    res = runner.invoke(app, ["privacy", "report", str(tmp_path)])
    assert res.exit_code == 2 and "is missing" in res.output
    # A rerun never replaces the missing ledger with an empty one.
    with pytest.raises(privacy.LedgerError, match="is missing"):
        privorl_n.run(_cfg(*FAST), tmp_path)
    assert not (tmp_path / "ledger.json").exists()


def test_bad_input_writes_nothing_and_a_live_run_locks_its_directory(tmp_path):
    from privrl_jax.pipelines._rundir import RunDirError, RunLock

    with pytest.raises(ValueError, match="does not exist"):
        privorl_n.run(
            _cfg(*FAST, "data.sensitive_file=/nope/umaze.hdf5"), tmp_path / "a"
        )
    with pytest.raises(ValueError, match="unknown"):
        privorl_n.run(_cfg(*FAST, "data.sensitive_env=maze2d-typo"), tmp_path / "b")
    with pytest.raises(ValueError, match="finetune.batch_size"):
        privorl_n.run(
            _cfg(*FAST, "finetune.batch_size=4096", "finetune.microbatch_size=64"),
            tmp_path / "c",
        )
    for d in ("a", "b", "c"):
        assert not (
            tmp_path / d
        ).exists()  # refused before writing: no config, no ledger, no .lock
    with RunLock(tmp_path / "d"):
        with pytest.raises(RunDirError, match="another run is using"):
            privorl_n.run(_cfg(*FAST), tmp_path / "d")


def test_a_too_small_sensitive_file_is_refused_before_any_public_collection(
    tmp_path, monkeypatch
):
    z = np.zeros(10, np.float32)
    rng = np.random.default_rng(0)
    small = tmp_path / "small.hdf5"
    data.save_hdf5(
        small,
        data.Transitions(
            observations=rng.normal(size=(10, 4)).astype(np.float32),
            actions=rng.uniform(-1, 1, size=(10, 2)).astype(np.float32),
            rewards=z,
            next_observations=rng.normal(size=(10, 4)).astype(np.float32),
            terminals=z,
            timeouts=z,
        ),
    )
    collected = []
    monkeypatch.setattr(
        privorl_n.task, "collect_transitions", lambda *a, **k: collected.append(a)
    )
    with pytest.raises(ValueError, match="too few for a holdout"):
        privorl_n.run(_cfg(*FAST, f"data.sensitive_file={small}"), tmp_path / "run")
    assert collected == []  # refused before minutes of public collection


@pytest.mark.slow  # ~50 s: two runs; the imported sweep and tuning rows rely on it
def test_a_reused_pre_training_is_the_source_runs_model_and_a_mismatch_is_refused(
    tmp_path,
):
    base = (
        "eval.agents=[]",
        "eval.mia=false",
        "synthesis.num_samples=300",
        "privacy.noise_seed=1",
    )
    a = privorl_n.run(_cfg(*base), tmp_path / "a")
    reused = privorl_n.run(
        _cfg(*base, "privacy.epsilon=1.0", f"pretrain.reuse_from={tmp_path / 'a'}"),
        tmp_path / "reused",
    )
    assert not (tmp_path / "reused" / "checkpoints" / "pretrain").exists()
    # The reusing run samples its anchor (the pre-trained model alone, same key) from
    # a's model: the scores are equal to the bit. Pre-training is public and
    # deterministic given the fields compared, so that is the model the run would have
    # trained.
    assert (
        reused["audit"]["anchors"]["pretrain_only"]
        == a["audit"]["anchors"]["pretrain_only"]
    )
    assert (
        reused["finetune"]["noise_multiplier"] > a["finetune"]["noise_multiplier"]
    )  # eps 1 < 10
    # Another pre-training, or a directory that is no run, is refused before anything is
    # written.
    for extra, match in (
        (("pretrain.learning_rate=0.01",), "another seed, model, pretrain section"),
        (("seed=3",), "another seed"),
        ((), "no config.yaml"),
    ):
        src = tmp_path / ("a" if extra else "nope")
        with pytest.raises(ValueError, match=match):
            privorl_n.run(
                _cfg(*base, *extra, f"pretrain.reuse_from={src}"), tmp_path / "refused"
            )
        assert not (tmp_path / "refused").exists()


def test_audit_canaries_show_epsilon_demonstrated_and_a_noise_fault_stops_the_run(
    tmp_path, monkeypatch
):
    """``--set audit.canaries=m``: the ledger's DP-SGD plan is rerun with m canaries
    beside the
    release; the bound is below the accounted epsilon, and when the loop's noise is gone
    (the fault: the ledger still records the calibrated sigma) it exceeds it and the run
    stops."""
    from privrl_jax.privacy.audit import PrivacyAuditError

    # 5 epochs: every included canary is sampled (about 5 times), so a noiseless loop
    # separates them all; a small budget is what an m = 1000 audit (at most ~2) can
    # refute.
    over = (
        *FAST,
        "finetune.epochs=5",
        "finetune.batch_size=160",
        "privacy.epsilon=0.3",
        "audit.canaries=1000",
        "privacy.noise_seed=0",
    )
    rep = privorl_n.run(_cfg(*over), tmp_path / "ok")
    (row,) = rep["epsilon_audit"]["rows"]
    assert row["audited"] and not row["violation"]
    assert row["epsilon_accounted"] == pytest.approx(
        rep["privacy"]["rdp"]["epsilon"], rel=1e-9
    )
    assert 0 <= row["epsilon_demonstrated"] <= row["epsilon_accounted"] <= 0.3
    assert "epsilon demonstrated >=" in (tmp_path / "ok" / "report.md").read_text()
    assert (
        json.loads(
            (tmp_path / "ok" / "audit" / "epsilon_lower_bound.json").read_text()
        )["canaries"]
        == 1000
    )
    # The release holds no canary: the audit does not touch the release or the ledger.
    assert len(data.load_hdf5(tmp_path / "ok" / "synthetic.hdf5")) == 200

    stds = privacy.DPPlan.noise_stds
    monkeypatch.setattr(
        privacy.DPPlan,
        "noise_stds",
        property(lambda self: tuple(0 * s for s in stds.fget(self))),
    )
    with pytest.raises(PrivacyAuditError, match="privacy bug"):
        privorl_n.run(_cfg(*over), tmp_path / "fault")
    (bad,) = json.loads(
        (tmp_path / "fault" / "audit" / "epsilon_lower_bound.json").read_text()
    )["rows"]
    assert bad["violation"] and bad["epsilon_demonstrated"] > bad["epsilon_accounted"]
    assert not (tmp_path / "fault" / "report.json").exists()


def test_the_task_refuses_public_and_sensitive_data_of_other_dimensions():
    # build_task reads only the shapes of the sensitive data; the privorl_n_mia
    # experiment relies on this check.
    def rows(obs_dim, act_dim, n=8):
        z = np.zeros(n, np.float32)
        return data.Transitions(
            observations=np.zeros((n, obs_dim), np.float32),
            actions=np.zeros((n, act_dim), np.float32),
            rewards=z,
            next_observations=np.zeros((n, obs_dim), np.float32),
            terminals=z,
            timeouts=z,
        )

    cfg = _cfg()
    task = privorl_n.build_task(cfg, rows(4, 2), rows(4, 2))
    # The row is s, a, r, s' - s and a one-hot terminal: 4 + 2 + 1 + 4 + 2 columns.
    assert task.dim == 13 and task.public_x.shape == (8, 13)
    for obs_dim, act_dim in ((5, 2), (4, 3)):
        with pytest.raises(ValueError, match="same observation and action dimensions"):
            privorl_n.build_task(cfg, rows(4, 2), rows(obs_dim, act_dim))


def test_the_clip_row_shows_initial_and_final_c_only_under_adaptive_clipping():
    from privrl_jax.pipelines._synth.report import clip_rows

    fin = {"l2_clip_norms": [1.0], "final_l2_clip_norm": 0.123456}
    assert clip_rows(fin) == []  # a fixed clip norm: the plan's, no row
    fin["adaptive_clipping"] = {"target_quantile": 0.7}
    assert clip_rows(fin) == [
        "| clip norm C (adaptive, target quantile 0.7): initial -> final | "
        "1 -> 0.1235 |"
    ]


@pytest.mark.slow  # ~35 s of CPU: two runs
def test_adaptive_clipping_reports_the_final_clip_norm_the_loop_checkpointed(tmp_path):
    import orbax.checkpoint as ocp  # noqa: PLC0415

    cfg = _cfg(
        "pretrain.steps=0",
        "eval.agents=[]",
        "eval.mia=false",
        "synthesis.num_samples=200",
        "finetune.adaptive_clip_quantile=0.5",
    )
    rep = privorl_n.run(cfg, tmp_path)
    fin = rep["finetune"]
    # The clip norm the last commit saved (the state a resume continues from).
    ckpt = tmp_path / "checkpoints" / "dp"
    mgr = ocp.CheckpointManager(ckpt)
    saved = mgr.restore(mgr.latest_step(), args=ocp.args.StandardRestore())
    assert fin["final_l2_clip_norm"] == pytest.approx(float(saved["l2_clip_norm"]))
    assert fin["final_l2_clip_norm"] != fin["l2_clip_norms"][0]
    assert (
        f"| clip norm C (adaptive, target quantile 0.5): initial -> final | "
        f"{fin['l2_clip_norms'][0]:.4g} -> {fin['final_l2_clip_norm']:.4g} |"
    ) in (tmp_path / "report.md").read_text()
    # A rerun takes no DP step and reports the same final norm (read back on resume).
    assert privorl_n.run(cfg, tmp_path)["finetune"] == fin
