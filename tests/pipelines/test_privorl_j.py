"""PrivORL-j pipeline: tiny run, ledger vs plan, trajectories in the release, resume,
secrets."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from pipelines_testlib import (
    assert_rerun_refused,
    assert_resume_is_exact,
    assert_secret_not_published,
)

from privrl_jax import data, envs, privacy
from privrl_jax import eval as evaluation
from privrl_jax.pipelines import privorl_j

TEST_CONFIG = (
    Path(__file__).resolve().parents[2] / "configs" / "privorl_j" / "test.yaml"
)
FAST = ("pretrain.steps=0", "eval.agents=[]", "eval.trajscore=false")


def _cfg(*overrides):
    return privorl_j.load(TEST_CONFIG, list(overrides))


def _walks(path, num, seed):
    """Point-mass-like random walks (obs 4, act 2) in D4RL format, episodes of 5-40
    steps."""
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(num):
        n = int(rng.integers(5, 41))
        act = rng.uniform(-1, 1, size=(n, 2)).astype(np.float32)
        pos = np.cumsum(0.1 * act, axis=0) + rng.uniform(0, 3, size=2)
        vel = act.copy()
        obs = np.concatenate([pos, vel], 1).astype(np.float32)
        nxt = np.concatenate([obs[1:], obs[-1:] + 0.1], 0)
        tout = np.zeros(n, np.float32)
        tout[-1] = 1
        parts.append(
            (
                obs,
                act,
                rng.random(n).astype(np.float32),
                nxt,
                np.zeros(n, np.float32),
                tout,
            )
        )
    cols = [np.concatenate(c) for c in zip(*parts)]
    data.save_hdf5(path, data.Transitions(*cols))
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Small D4RL-format files, so the default test compiles no collector (CPU time)."""
    d = tmp_path_factory.mktemp("pj_data")
    return (
        f"data.sensitive_file={_walks(d / 'sens.hdf5', 20, 0)}",
        f"data.public_files=[{_walks(d / 'pub.hdf5', 30, 1)}]",
    )


# About 50 s CPU (compilation) even with data files and no pre-training.
@pytest.mark.slow
@pytest.mark.parametrize("full", [False, True])
def test_tiny_run_writes_trajectories_and_the_ledger_is_the_plan(tmp_path, files, full):
    """Default: data from files, no pre-training, agents or TrajScore (compile time);
    slow:
    test.yaml as shipped (collected mazes, curiosity pre-training, an agent, TrajScore).
    """
    cfg = _cfg(
        "privacy.noise_seed=3",
        "eval.train_real_agents=false",
        *(() if full else FAST + files),
    )
    rep = privorl_j.run(cfg, tmp_path)
    for name in (
        "config.yaml",
        "ledger.json",
        "synthetic.hdf5",
        "report.json",
        "report.md",
        "audit/audit.json",
    ):
        assert (tmp_path / name).exists(), name
    # The release: whole stitched trajectories, each ending in a timeout (or a
    # terminal).
    syn = data.load_hdf5(tmp_path / "synthetic.hdf5")
    starts, lengths = data.episode_boundaries(syn)
    assert len(lengths) == cfg.synthesis.num_trajectories
    assert np.all(
        lengths == cfg.synthesis.episode_length
    )  # maze2d: no terminals (stop_at_terminal: false)
    ends = np.asarray(syn.timeouts) + np.asarray(syn.terminals)
    assert np.array_equal(np.flatnonzero(ends > 0), starts + lengths - 1)
    # The plan: Poisson over trajectories; the ledger holds exactly its steps, at its
    # epsilon.
    info = rep["finetune"]
    n = info["dataset_size"]
    assert info["unit"] == "trajectory"
    assert info["sampling_rate"] == pytest.approx(cfg.finetune.batch_size / n)
    plan = privorl_j.make_plan(cfg, n)
    ledger = privacy.Ledger.load(tmp_path)
    assert (
        ledger.num_releases
        == plan.steps
        == info["steps"]
        == int(np.ceil(cfg.finetune.epochs * n / cfg.finetune.batch_size))
    )
    assert rep["privacy"]["rdp"]["epsilon"] == pytest.approx(
        plan.epsilon(cfg.privacy.delta).epsilon, rel=1e-12
    )
    assert (
        0.9 * cfg.privacy.epsilon
        <= rep["privacy"]["rdp"]["epsilon"]
        <= cfg.privacy.epsilon
    )
    # The number of trajectories is what the ledger's header counts (delta < 1/N is
    # about them).
    assert json.loads((tmp_path / "ledger.json").read_text())["dataset_size"] == n
    # A fixed noise seed: every report says NOT PRIVATE.
    assert not info["private"] and "NOT PRIVATE" in rep["warning"]
    assert "NOT PRIVATE" in (tmp_path / "report.md").read_text()
    released = json.loads((tmp_path / "report.json").read_text())
    assert not {
        "fidelity",
        "agents_real",
        "audit",
        "real_stitching",
        "trajscore",
    } & set(released)
    assert (
        rep["synthetic"]["stitching"]["num_boundaries"]
        == 2 * cfg.synthesis.num_trajectories
    )
    # The anchors (audit): scored like the release, on as many steps as the holdout.
    audit = rep["audit"]
    hold = privorl_j.flat_transitions(privorl_j.load_data(cfg)[2])
    n_hold = len(hold)
    anchors = audit["anchors"]
    # The default run has no pre-training, hence no pre-training-only anchor.
    assert set(anchors) == (
        {"real_holdout", "pretrain_only"} if full else {"real_holdout"}
    )
    for name, scores in {"release": audit["fidelity"], **anchors}.items():
        assert {
            "marginal",
            "correlation",
            "sliced_wasserstein",
            "free_cell_share",
            "rows_compared",
        } <= set(scores)
        # The holdout's size, or a sampled set's were it smaller (test.yaml: 160 steps).
        n = n_hold if name == "real_holdout" else min(n_hold, len(syn))
        assert scores["rows_compared"] == n, name
    assert anchors["real_holdout"]["free_cell_share"] == pytest.approx(
        evaluation.free_cell_share(
            np.asarray(hold.observations)[:, :2],
            envs.make(cfg.data.sensitive_env)[1].walls,
        )
    )
    md = (tmp_path / "report.md").read_text()
    names = (
        "release / pre-training only / real holdout"
        if full
        else "release / real holdout"
    )
    assert f"sliced Wasserstein to the sensitive steps (audit): {names}" in md
    if not full:
        return
    # Collected in the sensitive maze: every real position lies in its free cells.
    assert anchors["real_holdout"]["free_cell_share"] == 1.0
    # Pre-training alone saw only the public maze: fewer positions in umaze's free
    # cells.
    assert anchors["pretrain_only"]["free_cell_share"] < 1.0
    assert all(-1 <= a["trajscore_f1"] <= 1 for a in anchors.values())
    assert set(rep["agents_synthetic"]) == {"td3bc"}
    ts = rep["audit"][
        "trajscore"
    ]  # audit only: it compares with the sensitive trajectories
    assert (
        -1 <= ts["f1"] <= 1
        and ts["num_synthetic"] == 2 * cfg.synthesis.num_trajectories
    )  # 20 steps = 2 windows of 8


def test_plan_and_items_count_trajectories(files):
    """The DP data the loop gets: one unit per sensitive trajectory, its fragments as
    items."""
    cfg = _cfg(*FAST, *files)
    _, sensitive, holdout = privorl_j.load_data(cfg)
    assert (
        len(sensitive) + len(holdout) == 20
        and len(holdout) == cfg.data.holdout_trajectories
    )
    plan = privorl_j.make_plan(cfg, len(sensitive))
    assert plan.dataset_size == 16 and plan.sampling_rate == pytest.approx(8 / 16)
    assert plan.steps == 2 and plan.private  # ceil(1 epoch / q)
    frags = data.trajectories_to_fragments(sensitive, horizon=8, max_fragments=8)
    np.testing.assert_array_equal(
        frags.fragment_mask.sum(1), -(-np.asarray(sensitive.lengths) // 8)
    )


@pytest.mark.slow  # two tiny runs, ~50 s CPU each (compilation)
def test_the_anchors_leave_the_release_unchanged(tmp_path, files):
    """Issue 23: the anchors are audit-only. They sample the pre-trained model with
    keys of their own, so a run with ``eval.anchors=false`` releases the same
    trajectories, spends the same budget and reports the same plan."""
    runs = {}
    for anchors in (True, False):
        cfg = _cfg(
            "privacy.noise_seed=3",
            "eval.train_real_agents=false",
            f"eval.anchors={str(anchors).lower()}",
            *FAST,
            *files,
        )
        runs[anchors] = (privorl_j.run(cfg, tmp_path / str(anchors)), cfg)
    with_a, without = (
        data.load_hdf5(tmp_path / str(a) / "synthetic.hdf5") for a in (True, False)
    )
    for field in dataclasses.fields(data.Transitions):
        name = field.name
        assert np.array_equal(getattr(with_a, name), getattr(without, name)), name
    (rep_a, _), (rep_b, _) = runs[True], runs[False]

    def spent(rep):  # the ledger's chain head hashes its entries' times: left out
        return {k: v for k, v in rep["privacy"].items() if k != "chain_head"}

    assert spent(rep_a) == spent(rep_b)
    assert rep_a["finetune"] == rep_b["finetune"]
    events = [
        [
            (r.what, r.event, r.count, r.params)
            for r in privacy.Ledger.load(tmp_path / str(a)).releases
        ]
        for a in (True, False)
    ]
    assert events[0] == events[1] and events[0]
    assert "anchors" in rep_a["audit"] and "anchors" not in rep_b["audit"]


@pytest.mark.slow
def test_default_run_draws_a_secret_and_is_private(tmp_path):
    rep = privorl_j.run(_cfg(*FAST), tmp_path)
    assert rep["finetune"]["private"] and "warning" not in rep
    assert "NOT PRIVATE" not in (tmp_path / "report.md").read_text()
    assert_secret_not_published(tmp_path)


@pytest.mark.slow
def test_interrupted_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    # 2 pre-training chunks, then 4 DP steps (q = 8 / 16, 2 epochs) checkpointed every
    # 2.
    overrides = (
        "eval.agents=[]",
        "eval.trajscore=false",
        "pretrain.steps=20",
        "finetune.epochs=2",
        "privacy.noise_seed=5",
    )
    # Crash after 2 pre-training chunks, the DP secret, the DP checkpoint of step 2 of
    # 4.
    full, _ = assert_resume_is_exact(
        privorl_j.run, lambda: _cfg(*overrides), tmp_path, monkeypatch, crash_after=4
    )
    assert full["finetune"]["steps"] == 4


@pytest.mark.slow  # about 60 s CPU (compiling the DP step and the sampler)
def test_dp_transformer_kind_through_the_cli(tmp_path, files):
    """The DP-Transformer baseline is another model.kind of the same pipeline: same
    plan, ledger,
    release and D4RL output with timeouts, run here through the `privrl synth
    trajectories` CLI."""
    from typer.testing import CliRunner

    from privrl_jax.cli.main import app

    overrides = ["model.kind=dp_transformer", "privacy.noise_seed=3", *FAST, *files]
    args = [
        "synth",
        "trajectories",
        "--out",
        str(tmp_path),
        "--config",
        str(TEST_CONFIG),
    ]
    for o in overrides:
        args += ["--set", o]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    cfg = _cfg(*overrides)
    assert (
        data.read_hdf5_metadata(tmp_path / "synthetic.hdf5")["generator"]
        == "DP-Transformer"
    )
    syn = data.load_hdf5(tmp_path / "synthetic.hdf5")
    starts, lengths = data.episode_boundaries(syn)
    assert len(lengths) == cfg.synthesis.num_trajectories
    assert np.all(lengths == cfg.synthesis.episode_length)
    assert np.array_equal(
        np.flatnonzero(np.asarray(syn.timeouts) > 0), starts + lengths - 1
    )
    rep = json.loads((tmp_path / "report.json").read_text())
    plan = privorl_j.make_plan(cfg, rep["finetune"]["dataset_size"])
    assert rep["finetune"]["unit"] == "trajectory" and not rep["finetune"]["private"]
    assert (
        privacy.Ledger.load(tmp_path).num_releases
        == plan.steps
        == rep["finetune"]["steps"]
    )
    assert rep["privacy"]["rdp"]["epsilon"] == pytest.approx(
        plan.epsilon(cfg.privacy.delta).epsilon, rel=1e-12
    )
    assert "NOT PRIVATE" in (tmp_path / "report.md").read_text()


def test_rerun_with_other_config_is_refused(tmp_path):
    assert_rerun_refused(privorl_j.run, _cfg(), tmp_path)


@pytest.mark.parametrize(
    "override, match",
    [
        ("privacy.epsilon=0", "privacy.epsilon"),
        ("data.horizon=0", "data.horizon"),
        ("finetune.clip_method=fast", "clip_method"),
        ("synthesis.finetune_ema=polyak", "warmup"),
        ("model.embed_dim=15", "divisible"),
        ("model.kind=gpt", "dp_transformer"),
        ("finetune.nonsense=1", "unknown config key"),
        ("finetune.epochs=0", r"finetune.epochs must be a number in \(0, 100,000\]"),
        ("finetune.epochs=-3", r"finetune.epochs must be a number in \(0, 100,000\]"),
        (
            "synthesis.num_trajectories=1000000000",
            r"synthesis.num_trajectories must be an integer in \[1, 100,000,000\]; "
            "got 1000000000",
        ),
        (
            "synthesis.num_trajectories=1000000 synthesis.episode_length=1000",
            r"num_trajectories x synthesis.episode_length asks for \d.*e\+\d+ released "
            r"rows",
        ),
        (
            "synthesis.ema_decay=1.5",
            r"synthesis.ema_decay must be a number in \[0, 1\)",
        ),
        ("model.fourier_dim=3", "model.fourier_dim must be even"),
        ("data.max_fragments=0", r"data.max_fragments must be an integer in \[1,"),
    ],
)
def test_bad_config_values(override, match):
    with pytest.raises(ValueError, match=match):
        _cfg(*override.split())


def test_stitching_gaps_hand_example():
    # One trajectory of 4 steps, H = 2: gaps s1 - s'0 = 0, s2 - s'1 = 3 (the stitch), s3
    # - s'2 = 1.
    obs = np.array([[0.0], [1.0], [5.0], [7.0]], np.float32)
    nxt = np.array([[1.0], [2.0], [6.0], [8.0]], np.float32)
    t = data.Transitions(
        observations=obs,
        actions=np.zeros((4, 1)),
        rewards=np.zeros(4),
        next_observations=nxt,
        terminals=np.zeros(4),
        timeouts=np.array([0, 0, 0, 1.0]),
    )
    gaps = evaluation.stitching_gaps(t, 2)
    assert gaps["at_fragment_boundaries"] == pytest.approx(3.0)
    assert gaps["inside_fragments"] == pytest.approx(0.5)


def test_cli_lists_the_command():
    from typer.testing import CliRunner

    from privrl_jax.cli.main import app

    res = CliRunner().invoke(app, ["synth", "trajectories", "--help"])
    assert res.exit_code == 0 and "PrivORL-j" in res.output
