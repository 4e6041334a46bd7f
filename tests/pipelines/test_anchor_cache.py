"""The cached real-data agent anchor (`pipelines._synth.anchor_cache`): read only for
the rows and the protocol it was trained on, trained live otherwise; and the
quickstart's "What DP costs" table."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from privrl_jax import data
from privrl_jax.pipelines import privorl_n
from privrl_jax.pipelines.privorl_n import audit as audit_mod
from privrl_jax.pipelines.privorl_n.report import cost_table

QUICKSTART_CACHE = "privorl_n/quickstart_real_agents"


def _rows(n: int = 5, seed: int = 0) -> data.Transitions:
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.normal(size=(n, *s)).astype(np.float32)
    return data.Transitions(
        observations=f(4),
        actions=f(2),
        rewards=f(),
        next_observations=f(4),
        terminals=np.zeros(n, np.float32),
        timeouts=np.zeros(n, np.float32),
    )


def _agents(score: float) -> dict:
    return {
        "td3bc": {
            "per_seed": [{"score_mean": score, "curve": [{"step": 30}]}],
            "score_mean": score,
            "score_std": None,
        }
    }


def _cfg(tmp_path, *extra: str):
    return privorl_n.load(
        "privorl_n/test",
        [f"eval.real_agents_cache={tmp_path / 'cache.json'}", *extra],
    )


def test_data_fingerprint_is_sums_and_sums_of_squares():
    rows = _rows()
    fp = privorl_n.data_fingerprint(rows)
    obs = np.asarray(rows.observations, np.float64)
    assert fp["rows"] == 5.0
    assert fp["observations.sum"] == pytest.approx(obs.sum(), rel=1e-12)
    assert fp["observations.sumsq"] == pytest.approx((obs**2).sum(), rel=1e-12)
    assert fp["terminals.sum"] == 0.0
    assert len(fp) == 1 + 2 * 6


def test_a_matching_cache_is_read_and_labelled(tmp_path):
    cfg, rows = _cfg(tmp_path), _rows()
    privorl_n.write_real_agents_cache(
        tmp_path / "cache.json", cfg, rows, _agents(41.5), {"host": "h"}
    )
    got, why = privorl_n.cached_real_agents(cfg, rows)
    assert why == ""
    assert got["td3bc"]["score_mean"] == 41.5
    assert got["td3bc"]["cached"] == {"file": "cache.json", "provenance": {"host": "h"}}
    # Written atomically: no temporary file is left.
    assert [p.name for p in tmp_path.iterdir()] == ["cache.json"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (["eval.agent_updates=40"], "eval"),
        (["eval.agents=[iql]"], "agent_configs/eval"),
        (["eval.eval_episodes=3"], "eval"),
        (["seed=1"], "seed"),
        (["data.sensitive_size=700"], "data"),
    ],
)
def test_another_protocol_is_not_read_and_says_what_changed(tmp_path, change, named):
    rows = _rows()
    privorl_n.write_real_agents_cache(
        tmp_path / "cache.json", _cfg(tmp_path), rows, _agents(41.5), {}
    )
    got, why = privorl_n.cached_real_agents(_cfg(tmp_path, *change), rows)
    assert got is None
    assert f"made for another {named}: training them live" in why


def test_other_rows_are_not_read(tmp_path):
    cfg, rows = _cfg(tmp_path), _rows()
    privorl_n.write_real_agents_cache(
        tmp_path / "cache.json", cfg, rows, _agents(1), {}
    )
    moved = rows.replace(rewards=rows.rewards + np.float32(1e-3))
    got, why = privorl_n.cached_real_agents(cfg, moved)
    assert got is None and "the sensitive rows differ" in why
    # A last-bit difference (another CPU's rounding) is the same data.
    ulp = rows.replace(observations=np.nextafter(rows.observations, np.float32(np.inf)))
    assert privorl_n.cached_real_agents(cfg, ulp)[1] == ""


def test_no_cache_configured_or_no_file(tmp_path):
    rows = _rows()
    assert privorl_n.cached_real_agents(privorl_n.load("privorl_n/test"), rows) == (
        None,
        "",
    )
    got, why = privorl_n.cached_real_agents(_cfg(tmp_path), rows)
    assert got is None and why.startswith("no real-data agent cache at ")


def test_the_audit_trains_live_only_when_the_cache_does_not_match(
    tmp_path, monkeypatch, capsys
):
    cfg, rows = _cfg(tmp_path), _rows()
    privorl_n.write_real_agents_cache(
        tmp_path / "cache.json", cfg, rows, _agents(41.5), {}
    )
    calls = []

    def fake_train(c, ds, key):
        calls.append(key)
        return _agents(-1.0)

    monkeypatch.setattr(audit_mod, "agent_scores", fake_train)
    key = jax.random.key(cfg.seed)
    assert privorl_n.real_agent_scores(cfg, rows, key)["td3bc"]["score_mean"] == 41.5
    assert calls == []
    other = _cfg(tmp_path, "eval.eval_episodes=3")
    assert privorl_n.real_agent_scores(other, rows, key)["td3bc"]["score_mean"] == -1
    # Live, with the key the cache is made with (the run's key folded with 400).
    assert (
        jax.random.key_data(calls[0])
        == jax.random.key_data(jax.random.fold_in(key, 400))
    ).all()
    assert "made for another eval: training them live" in capsys.readouterr().err


def test_the_shipped_quickstart_cache_matches_the_quickstart_protocol():
    """Fails when the quickstart's data or agent protocol changes without rerunning
    benchmarks/quickstart_real_anchor.py (the quickstart would train live)."""
    cfg = privorl_n.load("privorl_n/quickstart")
    assert cfg.eval.real_agents_cache == QUICKSTART_CACHE
    stored = json.loads(privorl_n.resolve_cache_path(QUICKSTART_CACHE).read_text())
    assert stored["key"] == json.loads(json.dumps(privorl_n.real_agents_key(cfg)))
    res = stored["agents_real"]["iql"]
    assert res["per_seed"][0]["curve"][-1]["step"] == cfg.eval.agent_updates
    assert stored["fingerprint"]["rows"] == cfg.data.sensitive_size


def test_anchor_agent_updates_must_fit_the_chunks():
    with pytest.raises(
        ValueError, match="eval.anchor_agent_updates must be a multiple"
    ):
        privorl_n.load("privorl_n/test", ["eval.anchor_agent_updates=15"])
    with pytest.raises(ValueError, match="at least eval.final_evals chunks"):
        privorl_n.load("privorl_n/test", ["eval.anchor_agent_updates=10"])


def _report(real: dict) -> dict:
    curve = lambda n: [{"step": n}]
    return {
        "privacy": {"rdp": {"epsilon": 9.995}},
        "agents_synthetic": {
            "iql": {"score_mean": 48.46, "per_seed": [{"curve": curve(30000)}]}
        },
        "epsilon_audit": {"lines": ["977 x DP-SGD step: epsilon accounted 9.995"]},
        "audit": {
            "fidelity": {"free_cell_share": 0.936, "sliced_wasserstein": 0.2},
            "agents_real": real,
            "anchors": {
                "real_holdout": {"free_cell_share": 1.0, "sliced_wasserstein": 0.03},
                "pretrain_only": {"free_cell_share": 0.091, "sliced_wasserstein": 0.6},
                "agents_pretrain_only": {
                    "iql": {"score_mean": -21.7, "per_seed": [{"curve": curve(10000)}]}
                },
            },
        },
    }


def test_the_cost_table_puts_the_release_between_its_anchors():
    real = {
        "iql": {
            "score_mean": 41.5,
            "score_std": 5.5,
            "per_seed": [{"curve": [{"step": 30000}]}] * 2,
            "cached": {"file": "x.json"},
        }
    }
    rows = cost_table(_report(real))
    assert rows[3] == (
        "| | pre-training only (epsilon = 0) | release (epsilon = 9.99) | "
        "real data (no privacy) |"
    )
    assert rows[5] == (
        "| iql normalised score | -21.7 (10k updates) | 48.5 (30k updates) | "
        "41.5 ± 5.5 (30k updates, 2 seeds, cached) |"
    )
    assert rows[6] == (
        "| share of positions in the sensitive maze's free cells | 0.091 | 0.936 | "
        "1.000 |"
    )
    assert rows[7].endswith("| 0.600 | 0.200 | 0.030 |")
    assert rows[-1] == "Epsilon audit: 977 x DP-SGD step: epsilon accounted 9.995."
    assert "not trained |" in cost_table(_report({}))[5]
    assert cost_table({"audit": {"fidelity": {}}}) == []


@pytest.mark.slow
def test_the_quickstart_rows_match_the_cached_fingerprint():
    """The collector still gives the rows the cache was trained on (~30 s of
    collection): otherwise every quickstart would train the anchor live."""
    cfg = privorl_n.load("privorl_n/quickstart")
    _, sensitive, _ = privorl_n.load_data(cfg)
    got, why = privorl_n.cached_real_agents(cfg, sensitive)
    assert why == ""
    assert got["iql"]["per_seed"][0]["score_mean"] == got["iql"]["score_mean"]
