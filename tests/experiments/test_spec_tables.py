"""Experiment files: the grid, the overrides each cell gets, the tables built from rows,
and the stored rows reproducing the legacy published tables."""

import json
import math
from pathlib import Path

import pytest
import scipy.stats

from privrl_jax import experiments
from privrl_jax.experiments import _tables
from privrl_jax.experiments._runner import resolve
from privrl_jax.experiments._spec import cell_key, parse
from privrl_jax.experiments._tables import build_table

ROOT = Path(__file__).resolve().parents[2]

SPEC = {
    "name": "toy",
    "method": "pool",
    "title": "toy",
    "pipeline": "pool",
    "config": "pool/test",
    "overrides": {"env.num_episodes": 300},
    "axes": {
        "method": {"A": {"pool.method": "pool"}, "B": {"pool.method": "grid"}},
        "rho": {"privacy.rho": "{rho}"},
        "seed": {"seed": "{seed}", "privacy.noise_seed": "{seed} + 1000"},
    },
    "grid": [
        {"method": ["A"], "rho": [".inf"], "seed": {"range": [0, 2]}},
        {"method": ["A", "B"], "rho": [1.0], "seed": [0, 1]},
        {"method": ["A"], "rho": [1.0], "seed": [1]},  # a duplicate, dropped
    ],
}


def test_grid_is_the_union_of_its_blocks_without_duplicates():
    exp = parse(SPEC)
    cells = exp.cells()
    assert len(cells) == 6
    assert cells[0] == {"method": "A", "rho": ".inf", "seed": 0}
    assert cells[-1] == {"method": "B", "rho": 1.0, "seed": 1}


def test_overrides_come_from_the_file_then_each_axis():
    exp = parse(SPEC)
    got = exp.overrides_for({"method": "B", "rho": math.inf, "seed": 3})
    assert got == [
        "env.num_episodes=300",
        "pool.method=grid",
        "privacy.rho=.inf",
        "seed=3",
        "privacy.noise_seed=1003",
    ]
    with pytest.raises(ValueError, match="no value 'C'"):
        exp.overrides_for({"method": "C", "rho": 1.0, "seed": 0})


def test_parse_refuses_unknown_keys_and_only_parses_axis_values():
    with pytest.raises(ValueError, match="unknown keys"):
        parse({**SPEC, "sweep": 1})
    assert experiments.parse_only(["rho=1", "rho=.inf", "method=A"]) == {
        "rho": [1, math.inf],
        "method": ["A"],
    }


def _rows(values):
    return [
        {
            "cell": {"method": m, "rho": r, "seed": s},
            "key": f"{m}{r}{s}",
            "metrics": {"gap": v},
        }
        for (m, r), vs in values.items()
        for s, v in enumerate(vs)
    ]


def test_wide_table_summaries_and_welch_tests_with_holm():
    vals = {
        ("P", 1.0): [0.1, 0.2, 0.15],
        ("P", 10.0): [0.05, 0.07, 0.06],
        ("Q", 1.0): [0.5, 0.4, 0.6],
        ("Q", 10.0): [0.3, 0.5, 0.2],
        ("N", math.inf): [0.01, 0.02, 0.03],
    }
    spec = {
        "id": "gap", "layout": "wide", "rows": ["method"], "columns": "rho",
        "metric": "gap", "label": "{method}", "column_label": "rho={rho:g}",
        "constant_rows": ["N"],
        "tests": [{"kind": "welch", "metric": "gap", "axis": "method",
                   "baseline": "P", "within": ["rho"], "correction": "holm",
                   "family": "P vs Q at 2 rho"}],
    }  # fmt: skip
    table = build_table(spec, _rows(vals))
    q1 = next(g for g in table["groups"] if g["cell"] == {"method": "Q", "rho": 1.0})
    assert q1["metrics"]["gap"]["mean"] == pytest.approx(0.5)
    assert q1["metrics"]["gap"]["std"] == pytest.approx(0.1)
    tests = table["tests"]
    assert [t["within"]["rho"] for t in tests] == [1.0, 10.0]
    raw = [
        scipy.stats.ttest_ind(vals[("Q", r)], vals[("P", r)], equal_var=False).pvalue
        for r in (1.0, 10.0)
    ]
    assert [t["p"] for t in tests] == pytest.approx(raw, rel=1e-10)
    lo, hi = sorted(raw)
    want = {lo: 2 * lo, hi: max(2 * lo, hi)}
    assert [t["p_adjusted"] for t in tests] == pytest.approx([want[p] for p in raw])
    md = experiments._tables.table_markdown(spec, table)  # noqa: SLF001
    assert md[2] == "| method | rho=1 | rho=10 |"
    # The constant row fills every column.
    assert "| N | 0.020 ± 0.010 [±0.025] | 0.020 ± 0.010 [±0.025] |" in md


LEGACY = [
    ("pool_gap_vs_rho", "pool_exp1.json", "gap"),
    ("pool_fair", "pool_fair.json", "gap"),
    ("privorl_n_fidelity_vs_eps", "privorl_n_eps_sweep.json", "fidelity"),
    ("marginal_baselines", "marginal_baselines.json", "fidelity"),
    ("marginal_baselines", "marginal_baselines_aim.json", "fidelity_aim"),
    ("marginal_baselines", "marginal_baselines_delta.json", "fidelity_delta"),
    ("marginal_baselines", "marginal_baselines_aim_delta.json", "fidelity_aim_delta"),
    (
        "marginal_baselines",
        "marginal_baselines_privsyn_delta.json",
        "fidelity_privsyn_delta",
    ),
    ("privorl_j_fidelity_vs_eps", "privorl_j_eps_sweep.json", "fidelity"),
]


def _legacy_cells(name, legacy):
    if name == "pool_fair":
        for m in legacy["methods"].values():
            knobs = ", ".join(f"{k}={v:g}" for k, v in m["chosen"].items())
            for c in m["rows"]:
                yield (f"{m['method_label']} ({knobs})", c["rho"]), "gap", c
    elif name == "pool_gap_vs_rho":
        for method, cells in legacy["gaps"].items():
            for c in cells:
                rho = math.inf if c["rho"] is None else c["rho"]
                yield (method, rho), "gap", c
    else:
        for label, metrics in legacy["table"].items():
            for m, s in metrics.items():
                yield label, m, s


@pytest.mark.parametrize(("name", "file", "table_id"), LEGACY)
def test_stored_rows_regenerate_the_published_table(name, file, table_id):
    """`privrl experiment table NAME` on the stored rows gives the legacy script's
    numbers: bit for bit, except two anchor statistics in each PrivORL table, which
    the legacy scripts summed over seeds in the reverse order (equal to 1e-15)."""
    exp = experiments.load_experiment(name)
    rows = experiments.read_rows(ROOT / "results", name)
    spec = next(t for t in exp.tables if t["id"] == table_id)
    table = build_table(spec, rows)
    legacy = json.loads((ROOT / "benchmarks" / "results" / file).read_text())
    if name == "pool_fair":
        for label, m in legacy["methods"].items():
            m["method_label"] = label
    if name in ("pool_gap_vs_rho", "pool_fair"):
        ours = {(g["cell"]["method"], g["cell"]["rho"]): g for g in table["groups"]}
    else:
        ours = {g["label"]: g for g in table["groups"]}
    checked = inexact = 0
    for key, metric, want in _legacy_cells(name, legacy):
        got = ours[key]["metrics"][metric]
        for k in ("mean", "std", "ci95"):
            checked += 1
            if got[k] != want[k]:
                inexact += 1
                assert got[k] == pytest.approx(want[k], rel=1e-14, abs=1e-16)
    n_metrics = len(spec.get("metrics", [None]))
    assert checked == len(ours) * n_metrics * 3
    assert inexact == (2 if name.startswith("privorl_") else 0)


def test_steps_table_regenerates_the_legacy_paired_differences():
    exp = experiments.load_experiment("privorl_j_fidelity_vs_eps")
    rows = experiments.read_rows(ROOT / "results", exp.name)
    spec = next(t for t in exp.tables if t["id"] == "steps")
    table = build_table(spec, rows)
    legacy = json.loads(
        (ROOT / "benchmarks" / "results" / "privorl_j_eps_sweep.json").read_text()
    )["paired_differences"]
    ours = {g["label"]: g["metrics"] for g in table["groups"]}
    assert list(ours) == list(legacy) == ["0.5->1", "1->2", "2->5", "5->10", "10->inf"]
    for step, metrics in legacy.items():
        for m, want in metrics.items():
            assert ours[step][m] == want  # n, mean, std, ci95, rose: bit for bit


def test_listed_steps_pair_values_and_anchors_within_each_seed():
    # Seed 1 sits 10 above seed 0; the anchor ("pre") is on each seed's first row only.
    rows = [
        {
            "cell": {"seed": s, "epsilon": e},
            "metrics": {
                "release.a": 10.0 * s + v,
                "pre.a": (-5.0 - s) if i == 0 else None,
            },
        }
        for s in (0, 1)
        for i, (e, v) in enumerate(((1.0, 1.0), (math.inf, 4.0 + s)))
    ]
    spec = {
        "id": "t",
        "layout": "steps",
        "axis": "epsilon",
        "prefix": "release",
        "anchors": {"pre": "pre"},
        "steps": [["pre", 1.0], [1.0, math.inf], ["pre", "missing"]],
        "value_label": "eps = {value:g}",
        "metrics": {"a": "a"},
    }
    groups = build_table(spec, rows)["groups"]
    assert [g["label"] for g in groups] == ["pre -> eps = 1", "eps = 1 -> eps = inf"]
    first = groups[0]["metrics"]["a"]  # 1 - (-5) = 6 and 11 - (-6) = 17
    assert first["n"] == 2 and first["mean"] == pytest.approx(11.5)
    second = groups[1]["metrics"]["a"]  # +3 and +4
    assert second["mean"] == pytest.approx(3.5) and second["rose"] == 2
    assert second["std"] == pytest.approx(math.sqrt(0.5))


_CELLS = [f"{m}{a}" for m in ("umaze", "medium", "large") for a in ("", "_td3bc")]


def test_table1_regenerates_the_legacy_summary_and_its_paired_tests():
    """privorl_table1's stored rows give every table line of the legacy
    table1_summary.md and the main table of privorl_n_eps_sweep_agents.md verbatim, and
    its 72 paired tests the differences the six
    legacy per-cell tables printed (bit for bit; p to 1e-12, scipy's ttest_rel there)
    and so their printed p; over all 72, Bonferroni passes one."""
    exp = experiments.load_experiment("privorl_table1")
    rows = experiments.read_rows(ROOT / "results", exp.name)
    md = (ROOT / "results" / exp.name / "tables.md").read_text().splitlines()
    legacy = (ROOT / "benchmarks" / "results" / "table1_summary.md").read_text()
    lines = [x for x in legacy.splitlines() if x.startswith(("|", "PrivORL-n's mean"))]
    assert len(lines) == 22 and not [x for x in lines if x not in md]
    # And the PrivORL-n agent sweep's table (umaze, IQL, 5 seeds, eps 1 / 10 / inf).
    legacy = (
        ROOT / "benchmarks" / "results" / "privorl_n_eps_sweep_agents.md"
    ).read_text()
    lines = [x for x in legacy.splitlines() if x.startswith("|")][:7]
    assert lines[2].startswith("| pre-training only") and not [
        x for x in lines if x not in md
    ]
    # Tables XII and XIV's main tables (the size and the accountant variants).
    for name, n in (("privorl_synth_size.md", 8), ("privorl_pld_agents.md", 6)):
        legacy = (ROOT / "benchmarks" / "results" / name).read_text().splitlines()
        start = next(i for i, x in enumerate(legacy) if x.startswith("| row |"))
        lines = legacy[start : start + n]
        assert not [x for x in lines if x not in md], name
    # Every other table line of the legacy pages but their per-seed listings and
    # Table XIV's sigma table (privorl_accountants): the per-cell score, pair and
    # reward tables, the sweeps' main, agent-score pair (with their anchors) and
    # fidelity-step tables, XII / XIV's pairs.
    res = ROOT / "benchmarks" / "results"
    want = {
        **{f"table1_agents_{c}.md": 46 for c in _CELLS},
        "privorl_n_eps_sweep_agents.md": 21,
        **{
            f"privorl_n_eps_sweep_{s}.md": 17
            for s in ("agents_medium", "agents_large", "td3bc")
        },
        **{f"privorl_n_eps_sweep_td3bc_{m}.md": 17 for m in ("medium", "large")},
        "privorl_synth_size.md": 16,
        "privorl_pld_agents.md": 11,
    }
    for name, n in want.items():
        lines = [x for x in (res / name).read_text().splitlines() if x.startswith("|")]
        assert sum(x in md for x in lines) == n, name
    spec = next(t for t in exp.tables if t["id"] == "summary")
    tests = build_table(spec, _tables.grid_order(exp, rows))["tests"]
    assert len(tests) == 72
    checked = 0
    for maze in ("umaze", "medium", "large"):
        for agent, tag in (("IQL", ""), ("TD3+BC", "_td3bc")):
            path = ROOT / "benchmarks" / "results" / f"table1_agents_{maze}{tag}.json"
            pairs = json.loads(path.read_text())["pairs_vs_privorl_n"]
            for t in tests:
                w = t["within"]
                if (w["maze"], w["agent"]) != (maze, agent):
                    continue
                e = f"{w['epsilon']:g}"
                want = pairs[f"PrivORL-n eps = {e} (sweep) -> {t['value']} eps = {e}"]
                assert t["diff"] == want["mean"]
                # The legacy p came from scipy.stats.ttest_rel: the same to rounding.
                assert t["p"] == pytest.approx(want["p"], rel=1e-12)
                checked += 1
    assert checked == 72
    assert sum(t["p_adjusted"] < 0.05 for t in tests) == 1
    # Within each legacy (maze, agent) table of 12 tests it was 3: another family.
    assert sum(t["p"] * 12 < 0.05 for t in tests) == 3


@pytest.mark.parametrize("maze", ["umaze", "medium", "large"])
def test_table1_cells_run_the_legacy_protocol_on_their_maze(maze):
    """Every privorl_table1 cell is what the legacy scripts ran: the baselines' configs
    and overrides (table1_agents_*.json), PrivORL-n's the sweep's (its overrides), the
    maze sensitive and the other two public, in every pipeline's resolved config."""
    from privrl_jax.pipelines import marginal  # noqa: PLC0415

    exp = experiments.load_experiment("privorl_table1")
    res = ROOT / "benchmarks" / "results"
    m = "" if maze == "umaze" else f"_{maze}"
    envs = {
        "umaze": ("maze2d-medium-dense-v1", "maze2d-large-dense-v1"),
        "medium": ("maze2d-umaze-dense-v1", "maze2d-large-dense-v1"),
        "large": ("maze2d-umaze-dense-v1", "maze2d-medium-dense-v1"),
    }[maze]
    names = {
        "pgm": "PGM",
        "privsyn": "PrivSyn",
        "pategan": "PATE-GAN",
        "pategan_pretrained": "PrePATE-GAN",
        "aim": "AIM",
        "mst": "MST",
    }
    for agent, tag, sweep in (("IQL", "", "agents"), ("TD3+BC", "_td3bc", "td3bc")):
        legacy = json.loads((res / f"table1_agents_{maze}{tag}.json").read_text())
        for key, config in legacy["configs"].items():
            cell = {"maze": maze, "agent": agent, "epsilon": 1.0, "seed": 2}
            cell["model"] = names[key]
            ours = exp.overrides_for(cell)
            assert exp.config_for(cell) == config
            assert exp.pipeline_for(cell) == config.split("/")[0]
            want = [*legacy["overrides"], "seed=2", "privacy.noise_seed=1002"]
            assert not [o for o in want if o not in ours], (key, ours)
            cfg = resolve(exp, cell)[0]
            assert (cfg.data.sensitive_env, tuple(cfg.data.public_envs)) == (
                f"maze2d-{maze}-dense-v1",
                envs,
            )
            if exp.pipeline_for(cell) == "marginal":
                # The bins come from the sensitive maze's declared (public) spaces.
                disc = marginal.public_discretisation(cfg, 4, 2)
                assert disc.columns[0].high > 0.0
        sweep_file = res / f"privorl_n_eps_sweep_{sweep}{m}.json"
        stored = json.loads(sweep_file.read_text())
        cell = {"maze": maze, "agent": agent, "epsilon": 10.0, "model": "PrivORL-n"}
        ours = exp.overrides_for(cell | {"seed": 0})
        assert exp.config_for(cell) == stored["config"]
        assert not [o for o in stored["overrides"] if o not in ours], ours


def test_privorl_j_rows_give_the_legacy_means_and_its_ddof0_std():
    """privorl_j_vs_baselines regenerates privorl_j_results_cpu.md's means to all
    printed digits; the legacy std was the population std (ddof = 0), ours the sample
    std, so theirs is ours times sqrt(2/3) at 3 seeds."""
    exp = experiments.load_experiment("privorl_j_vs_baselines")
    rows = experiments.read_rows(ROOT / "results", exp.name)
    spec = next(t for t in exp.tables if t["id"] == "results")
    ours = {g["label"]: g["metrics"] for g in build_table(spec, rows)["groups"]}
    legacy = ROOT / "benchmarks" / "results" / "privorl_j_results_cpu.md"
    cols = ["trajscore_f1", "gap_boundary", "gap_inside", None, None]
    cols += ["free_cell_share", "marginal", "correlation", "agent_score"]
    checked = 0
    for line in legacy.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 14 or cells[0] not in (
            "PrivORL-j",
            "PrivORL-j-U",
            "DP-Transformer",
        ):
            continue
        got = ours[f"{cells[0]} eps = {cells[1]}"]
        for text, m in zip(cells[5:], cols, strict=True):
            if m is None:
                continue
            mean, std = (float(x) for x in text.split(" ± "))
            assert f"{got[m]['mean']:.3f}" == f"{mean:.3f}"
            assert f"{got[m]['std'] * math.sqrt(2 / 3):.3f}" == f"{std:.3f}"
            checked += 1
    assert checked == 6 * 7


def test_mia_rows_regenerate_the_legacy_summary():
    """privorl_n_mia's two tables hold every line of mia_memorise.md's summary."""
    exp = experiments.load_experiment("privorl_n_mia")
    rows = experiments.read_rows(ROOT / "results", exp.name)
    md = []
    for spec in exp.tables:
        md += _tables.table_markdown(spec, build_table(spec, rows))
    legacy = (ROOT / "benchmarks" / "results" / "mia_memorise.md").read_text()
    lines = [x for x in legacy.splitlines() if x.startswith("| ")]
    summary = lines[
        lines.index("| attack | epsilon | seeds | AUC | TPR @ 10% FPR | TPR @ 1% FPR |")
        + 1 :
    ]
    assert len(summary) == 6 and not [x for x in summary if x not in md]


@pytest.mark.parametrize("layout", ["pairs", "steps"])
def test_a_row_header_over_two_columns_gets_two_separators(layout):
    from privrl_jax.experiments._tables import table_markdown  # noqa: PLC0415

    s = {"mean": 0.5, "ci95": 0.1, "rose": 2, "n": 3, "p": 0.04}
    table = {
        "layout": layout,
        "title": "t",
        "groups": [{"label": "a | b", "metrics": {"m": s}}],
        "tests": [],
    }
    spec = {"id": "t", "row_header": "x | y", "metrics": {"m": "metric"}}
    lines = [line for line in table_markdown(spec, table) if line.startswith("|")]
    # header, separator and the row all have 4 columns: x, y, seeds, metric.
    assert [line.count("|") for line in lines] == [5, 5, 5]


def test_a_grid_block_with_an_extra_axis_keeps_old_keys_and_an_anchor_reads_them():
    # A second block naming an axis the first lacks: the first block's cells keep
    # their keys and overrides; a table grouping by the new axis shows the old cells
    # as an anchor without a prefix (their own metrics), picked by `where: null`.
    spec = {
        **SPEC,
        "axes": {**SPEC["axes"], "runs": {"repetitions.mean": "{runs}"}},
        "grid": [
            {"method": ["A"], "seed": [0, 1]},
            {"method": ["A"], "seed": [0, 1], "runs": [8]},
        ],
    }
    exp = parse(spec)
    cells = exp.cells()
    assert [c.get("runs") for c in cells] == [None, None, 8, 8]
    assert "runs=" not in cell_key(cells[0])
    assert exp.overrides_for(cells[0]) == parse(
        {**SPEC, "grid": [{"method": ["A"], "seed": [0]}]}
    ).overrides_for({"method": "A", "seed": 0})
    assert "repetitions.mean=8" in exp.overrides_for(cells[2])
    rows = [
        {"cell": c, "metrics": {"x": v}}
        for c, v in zip(cells, [1.0, 3.0, 10.0, 20.0], strict=True)
    ]
    table = {
        "id": "t",
        "layout": "long",
        "rows": ["runs"],
        "label": "E[K] = {runs}",
        "anchors_first": [{"label": "E[K] = 2", "where": {"runs": [None]}}],
        "metrics": {"x": "x"},
    }
    groups = build_table(table, rows)["groups"]
    assert [g["label"] for g in groups] == ["E[K] = 2", "E[K] = 8"]
    assert [g["metrics"]["x"]["mean"] for g in groups] == [2.0, 15.0]
    assert [g["metrics"]["x"]["n"] for g in groups] == [2, 2]
