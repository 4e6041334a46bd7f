"""Quoted numbers in the docs' prose: refilled from the stored rows of a toy experiment
(``pool_gap_vs_rho``'s file, method m in {a, b}, 3 seeds: a's values 1.0, 1.5, 2.5)."""

from pathlib import Path

import pytest

from privrl_jax.experiments import _prose
from privrl_jax.experiments._runner import write_rows

E = "pool_gap_vs_rho/gap gap"


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    # The shipped experiment's table over our own rows (its grid is rho x method x
    # seed); a's mean 5/3, std 0.7638 (ddof = 1); b's mean 0.1.
    values = {"POOL": (1.0, 1.5, 2.5), "IP": (0.1, 0.1, 0.1)}
    rows = [
        {
            "cell": {"method": m, "rho": 1.0, "seed": s},
            "key": f"method={m}|rho=1.0|seed={s}",
            "metrics": {"gap": v},
        }
        for m, vs in values.items()
        for s, v in enumerate(vs)
    ]
    monkeypatch.setattr(_prose, "grid_order", lambda exp, rows: rows)
    write_rows(tmp_path, "pool_gap_vs_rho", rows)
    return tmp_path


def _link(num, spec, href="results/pool.md"):
    return f'[{num}]({href} "{spec}")'


def test_a_quoted_number_is_refilled_at_the_decimals_it_was_written_with(results):
    text = (
        f"gap {_link('9.99', E + ' {method: POOL, rho: 1}')} "
        f"(std {_link('0', E + ':std {method: POOL, rho: 1.0}', href='results/x.md')})"
        f" and {_link('-3.0000', E + ' {method: IP}')}; [2.5](results/pool.md) alone."
    )
    assert _prose.fill_numbers(text, results) == (
        f"gap {_link('1.67', E + ' {method: POOL, rho: 1}')} "
        f"(std {_link('1', E + ':std {method: POOL, rho: 1.0}')})"
        f" and {_link('0.1000', E + ' {method: IP}')}; [2.5](results/pool.md) alone."
    )
    assert len(_prose.quoted_numbers(text)) == 3


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (E + " {method: OP}", "matches 0 rows"),
        ("pool_gap_vs_rho/gap gap {rho: 1}", "matches 2 rows"),
        ("pool_gap_vs_rho/nope gap {method: IP}", "no table 'nope'"),
        ("pool_gap_vs_rho/gap regret {method: IP}", "no metric 'regret'"),
    ],
)
def test_a_quote_that_names_no_single_row_is_refused(results, spec, says):
    with pytest.raises(ValueError, match=says) as err:
        _prose.fill_numbers(f"x {_link('1.0', spec)}", results, where="doc.md")
    assert str(err.value).startswith("doc.md: quoted number")


def test_fill_docs_rewrites_only_the_files_that_drifted(results, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    good = f"a {_link('1.67', E + ' {method: POOL}')}\n"
    (docs / "good.md").write_text(good)
    (docs / "stale.md").write_text(good.replace("1.67", "1.50"))
    (docs / "plain.md").write_text("no quotes: 1.50\n")
    assert _prose.fill_docs(results, docs) == [docs / "stale.md"]
    assert (docs / "stale.md").read_text() == good
