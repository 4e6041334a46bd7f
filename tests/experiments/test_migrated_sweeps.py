"""Experiment files that replace legacy sweeps whose results stored summaries only
(POOL experiments 2 and 3, GPOPE's step sizes): their cells run the legacy settings,
checked against the legacy result files (nothing runs here)."""

import json
from pathlib import Path

import pytest

from privrl_jax import experiments, pipelines
from privrl_jax.experiments._runner import resolve
from privrl_jax.pipelines import pool
from privrl_jax.pipelines.pool.task import build_task

ROOT = Path(__file__).resolve().parents[2]
LEGACY = ROOT / "benchmarks" / "results"


def _resolved(cfg) -> dict:
    d = pipelines.to_dict(cfg)
    d.pop("seed")
    d["privacy"].pop("noise_seed")
    d["eval"].pop("eval_episodes")
    return d


def test_pool_sweeps_cells_are_the_legacy_sweeps_settings():
    """Each setting of pool_sweeps' grid resolves to the config of a row of the legacy
    sweeps (benchmarks/pool_experiments.py --only 2: pool/default, pool.zones=paper,
    POOL at rho = 10, the row's overrides and episodes), and the grid holds each legacy
    setting in the paper's ranges (H 5-40, |lambda| 0.5-1.0 at radius sqrt 2 and tied
    to |lambda|, w + d 2-16, M 50-800 with 40 M episodes and 5-200 at 2000)."""
    exp = experiments.load_experiment("pool_sweeps")
    cells = [c for c in exp.cells() if c["seed"] == 0]
    ours = {json.dumps(_resolved(resolve(exp, c)[0]), sort_keys=True): c for c in cells}
    both = "pool_exp2_lambda_lambda_fixed_zones_M_M_fixed_data.json"
    files = [
        ("pool_exp2_H.json", "H"),
        (both, "lambda_fixed_zones"),
        (both, "lambda"),
        (both, "M_fixed_data"),
        ("pool_exp2_wd.json", "w+d"),
        ("pool_exp2_M.json", "M"),
    ]
    matched = set()
    for file, sweep in files:
        for row in json.loads((LEGACY / file).read_text())["sweeps"][sweep]:
            over = row["setting"].split(", ")
            if "env.boundary=1.5" in over:  # outside the paper's |lambda| range
                continue
            cfg = pool.load(
                "pool/default",
                [
                    "pool.zones=paper",
                    "pool.method=pool",
                    "privacy.rho=10.0",
                    f"env.num_episodes={row['episodes']}",
                    *over,
                ],
            )
            key = json.dumps(_resolved(cfg), sort_keys=True)
            assert key in ours, (file, row["setting"])
            matched.add(key)
    # 1 default + 4 H + 6 |lambda| at radius sqrt 2 (0.9 is its own) + 5 tied + 4 w
    # + 5 M at 40 M episodes + 4 M at 2000 (50 is the 40 M sweep's, 10 the default).
    assert len(matched) == len(ours) == 29


def test_pool_zones_vs_grid_cells_have_the_legacy_cell_counts():
    """Zones: (w + d + 1) M cells; grid: M^(w + d); as the legacy experiment 3 built."""
    exp = experiments.load_experiment("pool_zones_vs_grid")
    legacy = json.loads((LEGACY / "pool_exp3.json").read_text())["rows"]
    want = {(r["w+d"], r["M"], r["kind"]): r["cells"] for r in legacy}
    cells = [c for c in exp.cells() if c["seed"] == 0]
    assert len(cells) == 10
    for c in cells:
        cfg = resolve(exp, c)[0]
        got = int(build_task(cfg).geom.num_cells)
        assert got == want[(2 * c["w"], c["M"], c["method"])], c


def test_gpope_step_sizes_rows_use_the_legacy_noise_multiplier():
    """The pipeline calibrates sigma for the same plan as the legacy curves (Poisson
    q = 0.05, 20000 steps, epsilon = 1, delta = 1e-5, RDP): the same number."""
    legacy = json.loads((LEGACY / "gpope_steps.json").read_text())["setting"]
    rows = experiments.read_rows(ROOT / "results", "gpope_step_sizes")
    assert len(rows) == 30
    for r in rows:
        assert r["metrics"]["sigma"] == pytest.approx(
            legacy["noise_multiplier"], rel=1e-9
        )


def test_gpope_vs_baselines_eps_cells_are_the_legacy_protocol():
    """gpope_vs_baselines_eps runs each method at the legacy eps table's choices
    (benchmarks/gpope_experiments.py --part eps): GPOPE one-of-m's (h, beta_0, steps,
    decay) and DP-LSL's lambda per calibration at each epsilon, the same chain sizes;
    and the stored GPOPE rows' sigma is the legacy one-of-m sigma."""
    legacy = json.loads((LEGACY / "gpope_eps.json").read_text())
    setting, by_eps = legacy["setting"], {r["epsilon"]: r for r in legacy["rows"]}
    exp = experiments.load_experiment("gpope_vs_baselines_eps")
    cells = exp.cells()
    assert len(cells) == 6 * 5 * 10
    for c in cells:
        cfg = resolve(exp, c)[0]
        row = by_eps[c["epsilon"]]
        assert cfg.epsilon == c["epsilon"] and cfg.tuning == "fixed"
        assert (cfg.num_trajectories, cfg.max_length, cfg.delta) == (
            setting["trajectories"],
            setting["max_length"],
            setting["delta"],
        )
        assert list(cfg.return_bounds) == setting["return_bounds"]
        if c["method"] == "GPOPE":
            u = row["GPOPE uniform-one"]
            assert (cfg.gpope_clip, cfg.gpope_step_size) == (
                (u["l2_clip_norm"],),
                (u["beta0"],),
            )
            assert (cfg.gpope_steps, cfg.gpope_decay_steps) == (
                u["steps"],
                u["decay_steps"],
            )
        elif c["method"].startswith("DP-LSL"):
            assert cfg.lsl_ridge == (row[c["method"]]["lambda"],)
        exact = c["method"].endswith("(exact alpha)")
        assert cfg.calibration == ("exact" if exact else "nrs07")
    rows = experiments.read_rows(ROOT / "results", exp.name)
    gpope = [r for r in rows if r["cell"]["method"] == "GPOPE"]
    assert len(gpope) == 60
    for r in gpope:
        want = by_eps[r["cell"]["epsilon"]]["GPOPE uniform-one"]["noise_multiplier"]
        assert r["metrics"]["sigma"] == pytest.approx(want, rel=1e-9)


def test_gpope_mountain_car_onpolicy_cells_are_the_legacy_protocol():
    """gpope_mountain_car_onpolicy runs the legacy on-policy Mountain Car comparison's
    setting (benchmarks/results/gpope_mountain_car_onpolicy.json): T = 200, m = 1000,
    GPOPE's Poisson (b, N, h, beta_0, decay), the baselines' bounds, LSW ridge and
    DP-LSL's lambda per epsilon, alpha and rho; the stored GPOPE rows' sigma is the
    legacy one at each epsilon."""
    legacy = json.loads((LEGACY / "gpope_mountain_car_onpolicy.json").read_text())
    setting, by_eps = legacy["setting"], {r["epsilon"]: r for r in legacy["rows"]}
    g = setting["gpope"]
    exp = experiments.load_experiment("gpope_mountain_car_onpolicy")
    for c in exp.cells():
        cfg = resolve(exp, c)[0]
        assert (cfg.env, cfg.tuning, cfg.epsilon) == (
            "mountain_car",
            "fixed",
            c["epsilon"],
        )
        assert (cfg.num_trajectories, cfg.max_length, cfg.delta) == (
            setting["trajectories"],
            setting["max_length"],
            setting["delta"],
        )
        assert list(cfg.return_bounds) == setting["return_bounds"]
        assert cfg.lsw_ridge == setting["lsw_ridge"]
        assert (cfg.gpope_sampler, cfg.gpope_batch_size, cfg.gpope_steps) == (
            g["sampler"],
            g["batch_size"],
            g["steps"],
        )
        assert (cfg.gpope_clip, cfg.gpope_step_size, cfg.gpope_decay_steps) == (
            (g["l2_clip_norm"],),
            (g["step_size"],),
            g["decay_steps"],
        )
        rho = "occupancy" if "[occupancy]" in c["method"] else "uniform"
        assert cfg.rho == rho
        if c["method"].startswith("DP-LSL"):
            name = c["method"].split(" [")[0] + f" [{rho}]"
            assert cfg.lsl_ridge == (by_eps[c["epsilon"]][name]["lambda"],)
        exact = "(exact alpha)" in c["method"]
        assert cfg.calibration == ("exact" if exact else "nrs07")
    rows = experiments.read_rows(ROOT / "results", exp.name)
    gpope = [r for r in rows if r["cell"]["method"].startswith("GPOPE")]
    assert len(gpope) == 9
    for r in gpope:
        want = by_eps[r["cell"]["epsilon"]]["GPOPE Poisson (replace-one)"]
        assert r["metrics"]["sigma"] == pytest.approx(
            want["noise_multiplier"], rel=1e-9
        )


def test_gpope_offpolicy_continuous_runs_the_legacy_settings():
    """gpope_offpolicy_continuous runs the shipped configs the legacy off-policy tables
    ran (gpope_offpolicy_{mountain_car,hiv}.json: N, b, h, the step schedule, m), and
    the stored rows' sigma and LSTD floor are the legacy ones (the same public data)."""
    exp = experiments.load_experiment("gpope_offpolicy_continuous")
    rows = experiments.read_rows(ROOT / "results", exp.name)
    for env, stem in (("Mountain Car", "mountain_car"), ("HIV", "hiv")):
        legacy = json.loads((LEGACY / f"gpope_offpolicy_{stem}.json").read_text())[stem]
        refs = {r["m"]: r for r in legacy["references"]}
        by_eps = {r["epsilon"]: r for r in legacy["vs_epsilon"]}
        cells = [c for c in exp.cells() if c["env"] == env]
        assert {c["epsilon"] for c in cells} == set(by_eps)
        for c in cells:
            cfg = resolve(exp, c)[0]
            g = cfg.gpope
            assert (g.steps, g.batch_size, g.l2_clip_norm) == (
                legacy["steps"],
                legacy["batch_size"],
                legacy["l2_clip_norm"],
            )
            assert [g.step_size, g.decay_steps] == legacy["step_size"]
            assert cfg.env.num_trajectories == c["m"] == legacy["m_default"]
        ours = [r for r in rows if r["cell"]["env"] == env]
        assert len(ours) == len(cells)
        for r in ours:
            want = by_eps[r["cell"]["epsilon"]]
            assert r["metrics"]["sigma"] == pytest.approx(
                want["noise_multiplier"], rel=1e-9
            )
            assert r["metrics"]["lstd_mse"] == pytest.approx(
                refs[r["cell"]["m"]]["lstd_mse"], rel=1e-5
            )


def test_gpope_theorem1_rows_are_the_legacy_eps_tables_sigmas():
    """gpope_theorem1's stored rows: Theorem 1's sigma and the RDP-calibrated one-of-m
    sigma at each epsilon are the legacy eps table's (gpope_eps.json, same N, m,
    delta), and the accountant's epsilon at the theorem's sigma is above its target
    exactly where the theorem's sigma is below the calibrated one."""
    legacy = json.loads((LEGACY / "gpope_eps.json").read_text())
    by_eps = {r["epsilon"]: r["theorem1"] for r in legacy["rows"]}
    rows = experiments.read_rows(ROOT / "results", "gpope_theorem1")
    assert sorted(r["cell"]["epsilon"] for r in rows) == sorted(by_eps)
    for r in rows:
        t1, m = by_eps[r["cell"]["epsilon"]], r["metrics"]
        assert m["theorem1_sigma"] == pytest.approx(t1["noise_multiplier"], rel=1e-9)
        assert m["accountant_sigma"] == pytest.approx(
            t1["calibrated_uniform_noise_multiplier"], rel=1e-9
        )
        below = m["theorem1_sigma"] < m["accountant_sigma"]
        assert (m["epsilon_ratio"] > 1.0) == below
