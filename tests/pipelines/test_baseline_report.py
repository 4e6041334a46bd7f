"""The baselines' report.md (marginal and PATE-GAN, one renderer): the fidelity rows
hold the release's scores beside the real holdout's, in a fixed order, only for the
scores the audit has; each baseline adds its own rows before the agents'."""

import pytest

from privrl_jax.pipelines import marginal, pategan


def _report(model: str, **finetune) -> dict:
    return {
        "privacy": {
            "budget": {"epsilon": 1.0, "delta": 1e-5},
            "rdp": {"epsilon": 0.98},
            "pld": {"epsilon": 0.91},
        },
        "finetune": {
            "model": model,
            "steps": 3,
            "noise_multiplier": 2.5,
            "sampling_rate": 1.0,
            **finetune,
        },
        "agents_synthetic": {"td3bc": {"score_mean": 12.34}},
        "audit": {
            "agents_real": {"td3bc": {"score_mean": 56.78}},
            "fidelity": {"correlation": 0.8123, "marginal": 0.9, "free_cell_share": 1},
            "anchors": {
                "real_holdout": {
                    "correlation": 0.85,
                    "marginal": 0.95,
                    "free_cell_share": 0.99949,
                }
            },
        },
        "wall_time_s": 41.6,
    }


FIDELITY = [
    "| marginal score (1 - mean KS) (audit): release / real holdout | 0.900 / 0.950 |",
    "| correlation score (audit): release / real holdout | 0.812 / 0.850 |",
    "| share of positions in the sensitive maze's free cells (audit): release / real "
    "holdout | 1.000 / 0.999 |",
]


def test_marginal_report_rows_in_order():
    md = marginal.render_markdown(_report("pgm")).splitlines()
    assert md[0] == "# PGM (mbi) report"
    i = md.index(FIDELITY[0])
    assert md[i : i + 3] == FIDELITY  # scored ones only, in the shared order
    assert not any("sliced Wasserstein" in line for line in md)
    agents = "| td3bc normalised score (one agent seed): synthetic / real (audit) |"
    assert md[i - 1] == f"{agents} 12.3 / 56.8 |"
    assert "| DP steps, noise multiplier, q | 3, 2.500, 1.0000 |" in md
    assert md[-1] == "Wall time: 42 s."


@pytest.mark.parametrize("model", ["pategan", "pategan_pretrained"])
def test_pategan_report_is_the_marginal_layout_plus_its_teacher_row(model):
    extra = {"num_teachers": 6, "rounds": 20, "queries_per_round": 8}
    report = _report(model, **extra)
    md = pategan.render_markdown(report).splitlines()
    base = marginal.render_markdown(_report("pgm")).splitlines()
    assert md[0] == f"# {pategan.GENERATORS[model]} report"
    teachers = "| teachers, vote queries (rounds x per round) | 6, 3 (20 x 8) |"
    i = md.index(teachers)
    assert md[1:i] + md[i + 1 :] == base[1:]  # the same layout, one row added
    assert md[i - 1].startswith("| DP steps, noise multiplier, q |")
