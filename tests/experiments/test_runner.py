"""The runner: one run directory per resolved config, finished cells reused, changed
ones rerun, rows stored as JSON lines (POOL's tiny test config: seconds)."""

import dataclasses
import hashlib
import json
import types

import pytest
import yaml

from privrl_jax import experiments
from privrl_jax.pipelines import pool, to_dict

SPEC = {
    "name": "toy_pool",
    "method": "pool",
    "title": "toy",
    "pipeline": "pool",
    "config": "pool/test",
    "overrides": {"privacy.noise_seed": 7},
    "axes": {"seed": {"seed": "{seed}"}, "rho": {"privacy.rho": "{rho}"}},
    "grid": [{"seed": [0, 1], "rho": [1.0]}],
    "evaluate": {"gap": "report.evaluation.gap"},
    "tables": [
        {"id": "gap", "layout": "long", "rows": ["rho"], "metrics": {"gap": "gap"},
         "label": "rho={rho:g}"}
    ],
}  # fmt: skip


def _write(tmp_path, spec):
    path = tmp_path / "toy_pool.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


@dataclasses.dataclass(frozen=True)
class _Cfg:
    seed: int = 0
    scale: float = 1.0


def _fake_pipeline(calls):
    def load(config, overrides):
        values = dict(o.split("=", 1) for o in overrides)
        return _Cfg(int(values["seed"]), float(values.get("scale", 1.0)))

    def run(cfg, run_dir):
        calls.append(cfg)
        run_dir.mkdir(parents=True)
        report = {"value": cfg.seed * cfg.scale, "nested": [{"x": cfg.seed}]}
        (run_dir / "report.json").write_text(json.dumps(report))
        return report

    return types.SimpleNamespace(load=load, run=run)


def test_runner_logic_with_a_fake_pipeline(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(
        experiments._runner,  # noqa: SLF001
        "pipeline_module",
        lambda exp, cell=None: _fake_pipeline(calls),
    )
    spec = {
        **SPEC,
        "overrides": {"scale": 2.0},
        "axes": {"seed": {"seed": "{seed}"}},
        "grid": [{"seed": [0, 1, 2]}],
        "evaluate": {"v": "report.value", "x": "report.nested.0.x"},
    }
    ref = _write(tmp_path, spec)
    res, runs = tmp_path / "res", tmp_path / "runs"
    rows = experiments.run_experiment(
        ref, results_dir=res, runs_dir=runs, only={"seed": [1, 2]}, echo=print
    )
    assert [r["metrics"] for r in rows] == [{"v": 2.0, "x": 1}, {"v": 4.0, "x": 2}]
    assert len(calls) == 2
    digest = hashlib.sha256(
        json.dumps({"seed": 1, "scale": 2.0}, sort_keys=True).encode()
    ).hexdigest()[:12]
    assert (runs / "toy_pool" / digest / "row.json").exists()
    # Relative to the runs root: the rows read the same from any checkout.
    assert rows[0]["run_dir"] == f"toy_pool/{digest}"
    assert (
        json.loads((runs / rows[0]["run_dir"] / "row.json").read_text())["run_dir"]
        == f"toy_pool/{digest}"
    )
    # An added metric is read from the stored outputs: nothing reruns.
    spec["evaluate"]["twice"] = "report.value"
    ref = _write(tmp_path, spec)
    rows = experiments.run_experiment(ref, results_dir=res, runs_dir=runs, echo=print)
    assert len(calls) == 3  # only seed 0 ran
    assert [r["metrics"]["twice"] for r in rows] == [2.0, 4.0, 0.0]
    assert [r["cell"]["seed"] for r in experiments.read_rows(res, "toy_pool")] == [
        1,
        2,
        0,
    ]
    # An axis added at the config's old value: same config, so reused and re-keyed.
    spec["axes"]["scale"] = {"scale": "{scale}"}
    spec["grid"] = [{"seed": [0, 1, 2], "scale": [2.0]}]
    ref = _write(tmp_path, spec)
    rows = experiments.run_experiment(ref, results_dir=res, runs_dir=runs, echo=print)
    assert len(calls) == 3
    # The old keys of the same runs are gone from the rows file: nothing counted twice.
    assert [r["key"] for r in rows] == [f"scale=2.0|seed={s}" for s in (0, 1, 2)]
    with pytest.raises(ValueError, match="selects none"):
        experiments.run_experiment(
            ref, results_dir=res, runs_dir=runs, only={"seed": [9]}, echo=print
        )


@pytest.mark.slow
def test_cells_run_once_in_hash_keyed_dirs_and_are_reused(tmp_path):
    ref = _write(tmp_path, SPEC)
    res, runs = tmp_path / "results", tmp_path / "runs"
    lines = []
    rows = experiments.run_experiment(
        ref, results_dir=res, runs_dir=runs, only={"seed": [0]}, echo=lines.append
    )
    assert [r["cell"] for r in rows] == [{"seed": 0, "rho": 1.0}]
    cfg = pool.load("pool/test", ["privacy.noise_seed=7", "seed=0", "privacy.rho=1.0"])
    digest = hashlib.sha256(
        json.dumps(to_dict(cfg), sort_keys=True, default=str).encode()
    ).hexdigest()[:12]
    run_dir = runs / "toy_pool" / digest
    report = json.loads((run_dir / "report.json").read_text())
    assert rows[0]["config_hash"] == digest
    assert rows[0]["metrics"]["gap"] == report["evaluation"]["gap"]
    assert "cpu_count" in rows[0]["provenance"] or rows[0]["provenance"]
    assert lines[-1].startswith("[1/1] rho=1.0|seed=0: ran in")

    # Both cells: seed 0 reused (its row unchanged), seed 1 run; rows stored in order.
    lines.clear()
    rows = experiments.run_experiment(
        ref, results_dir=res, runs_dir=runs, echo=lines.append
    )
    assert [r["cell"]["seed"] for r in rows] == [0, 1]
    assert any("seed=0: reused" in x for x in lines)
    stored = experiments.read_rows(res, "toy_pool")
    assert [r["key"] for r in stored] == ["rho=1.0|seed=0", "rho=1.0|seed=1"]
    assert "reused" not in stored[0]

    # A changed config is a new directory, not the finished one.
    changed = _write(tmp_path, {**SPEC, "overrides": {"privacy.noise_seed": 8}})
    lines.clear()
    rows = experiments.run_experiment(
        changed, results_dir=res, runs_dir=runs, only={"seed": [0]}, echo=lines.append
    )
    assert rows[0]["config_hash"] != digest and "ran in" in lines[-1]
    assert len(list((runs / "toy_pool").iterdir())) == 3

    # `table` re-tabulates the stored rows without running.
    exp = experiments.load_experiment(changed)
    tables = experiments.tabulate(exp, stored, res / "toy_pool", plots=False)
    assert tables[0]["groups"][0]["metrics"]["gap"]["n"] == 2
    assert (res / "toy_pool" / "tables.md").read_text().count("| rho=1 | 2 |") == 1


@pytest.mark.slow
def test_two_lanes_give_the_rows_of_one(tmp_path):
    # Seeded noise: a cell's row is a function of its config, whichever lane runs it.
    ref = _write(tmp_path, SPEC)
    one = experiments.run_experiment(
        ref, results_dir=tmp_path / "r1", runs_dir=tmp_path / "u1", echo=print
    )
    two = experiments.run_experiment(
        ref, results_dir=tmp_path / "r2", runs_dir=tmp_path / "u2", jobs=2, echo=print
    )
    key = {r["key"]: r["metrics"] for r in two}
    assert {r["key"]: r["metrics"] for r in one} == key
    assert [r["config_hash"] for r in one] == [
        next(t["config_hash"] for t in two if t["key"] == r["key"]) for r in one
    ]


# ------------------------------------------- hash-neutral fields (Section.HASH_NEUTRAL)
def test_a_hash_neutral_field_is_out_of_the_identity_only_at_its_neutral_value():
    from privrl_jax.pipelines import privorl_n  # noqa: PLC0415

    off = privorl_n.load("privorl_n/quickstart", [])
    on = privorl_n.load("privorl_n/quickstart", ["finetune.adaptive_clip_quantile=0.5"])
    assert to_dict(off)["finetune"]["adaptive_clip_quantile"] is None
    assert "adaptive_clip_quantile" not in to_dict(off, identity=True)["finetune"]
    assert to_dict(on, identity=True)["finetune"]["adaptive_clip_quantile"] == 0.5
    # Nothing else differs between the two views.
    ident = to_dict(off, identity=True)
    ident["finetune"]["adaptive_clip_quantile"] = None
    assert ident == to_dict(off)


def test_rows_stored_before_a_default_off_field_existed_are_current():
    # privorl_n_fidelity_vs_eps's rows were hashed before
    # finetune.adaptive_clip_quantile existed (None: the run before it, bit for bit;
    # see FinetuneConfig.HASH_NEUTRAL).
    from pathlib import Path  # noqa: PLC0415

    from privrl_jax.experiments._runner import resolve  # noqa: PLC0415

    root = Path(__file__).resolve().parents[2]
    exp = experiments.load_experiment("privorl_n_fidelity_vs_eps")
    (row,) = [
        r
        for r in experiments.read_rows(root / "results", exp.name)
        if r["key"] == "epsilon=1.0|seed=0"
    ]
    _, resolved, digest = resolve(exp, row["cell"])
    assert digest == row["config_hash"] == "5122d93b6a95"
    # ... which the whole resolved config (the field included) does not give.
    whole = json.dumps(resolved, sort_keys=True, default=str).encode()
    assert hashlib.sha256(whole).hexdigest()[:12] != digest


def test_every_hash_neutral_value_is_its_fields_default():
    import privrl_jax.pipelines._synth_config  # noqa: F401, PLC0415
    from privrl_jax.pipelines._config import Section  # noqa: PLC0415

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    declared = {c: c.HASH_NEUTRAL for c in subclasses(Section) if c.HASH_NEUTRAL}
    assert declared, "no section declares a hash-neutral field"
    for cls, neutral in declared.items():
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        for name, value in neutral.items():
            assert name in defaults and defaults[name] == value, (cls, name)


def test_a_select_configs_unread_fields_are_out_of_its_identity_only_where_unread():
    # The maze section is read by maze_agent grids only, the sliced Wasserstein keys
    # by that score only: elsewhere they are hash-neutral at their defaults, so rows
    # stored before they existed stay current; where they are read they are hashed.
    from privrl_jax.pipelines import select  # noqa: PLC0415

    chain = to_dict(select.load("select/chain_policies", []), identity=True)
    assert "maze" not in chain
    assert not {"num_projections", "bins"} & set(chain["score"])
    assert "runs_dir" not in chain["candidates"]
    assert "stand_in_at_total_epsilon" not in chain["audit"]
    maze = to_dict(select.load("select/maze_policies", []), identity=True)
    assert maze["maze"] == to_dict(select.load("select/maze_policies", []))["maze"]
    sw = to_dict(
        select.load("select/privorl_n_test", ["score.kind=sliced_wasserstein"]),
        identity=True,
    )
    assert (sw["score"]["num_projections"], sw["score"]["bins"]) == (16, 16)
    moved = to_dict(
        select.load("select/chain_policies", ["score.bins=8"]), identity=True
    )
    assert moved["score"]["bins"] == 8  # off its neutral value: part of the identity


@pytest.mark.parametrize(
    "name", ["selection_epsilon", "policy_selection_chain", "privorl_n_private_tuning"]
)
def test_select_rows_stored_before_later_select_fields_are_current(name):
    from pathlib import Path  # noqa: PLC0415

    root = Path(__file__).resolve().parents[2]
    status = experiments.row_status(name, root / "results")
    assert status["current"] and not status["stale"], status["stale"]
