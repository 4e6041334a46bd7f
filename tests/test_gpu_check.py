"""benchmarks/gpu_check.py at its tiny size: the tables it writes and the counts that do
not depend on the machine (issue 25, item 5; the GPU numbers need a GPU)."""

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def gpu_check():
    sys.path.insert(0, str(BENCH))
    try:
        import gpu_check  # noqa: PLC0415

        yield gpu_check
    finally:
        sys.path.remove(str(BENCH))


def _check_common(res, out):
    saved = json.loads((out / "gpu_check_tiny.json").read_text())
    md = (out / "gpu_check_tiny.md").read_text()
    assert saved["tiny"] is True and "provenance" in saved
    assert "**tiny**" in md
    return saved, md


def test_tiny_sweep_part(gpu_check, tmp_path):
    res = gpu_check.main(["--tiny", "--parts", "sweep", "--out", str(tmp_path)])
    saved, md = _check_common(res, tmp_path)
    sweep = saved["sweep"]
    # Six epsilons (sigmas) of GPOPE: at most one executable (none when an earlier test
    # in this worker already compiled the same program), six different results.
    assert sweep["gpope_compiles"] <= 1 and sweep["gpope_distinct_results"] == 6
    # The fit sweep over six sigmas: the per-unit gradients and the release (std
    # traced) at most once each.
    assert len(sweep["fit_sigmas"]) == 6
    assert sweep["fit_gradient_compiles"] <= 1
    assert sweep["fit_release_compiles"] <= 1
    assert "| ope.gpope, 6 epsilons" in md
    assert "Ghost DP step" not in md  # parts not run are not rendered


@pytest.mark.slow  # ~90 s of compiles on 2 loaded cores: every part at tiny size
def test_tiny_all_parts(gpu_check, tmp_path):
    res = gpu_check.main(["--tiny", "--out", str(tmp_path)])
    saved, md = _check_common(res, tmp_path)
    (row,) = saved["dp_step"]
    # Both steps train the same model: Dense 3->8 (32), one block LayerNorm + Dense 8->8
    # (16 + 72), LayerNorm + Dense 8->3 (16 + 27). The ratio's value is the machine's.
    assert row["same_params"] and row["num_params"] == 32 + 16 + 72 + 16 + 27
    assert row["ghost_over_nonprivate_throughput"] > 0
    # The NumPy loop is ope.gpope at sigma = 0 (float64 vs float32).
    assert saved["gpope"]["checks"]["poisson"]["max_abs_diff_sigma0"] < 1e-5
    # The step time is a difference of two run lengths: at tiny size compile noise can
    # make it any sign, so only its model is checked (dp_loop_speed's tiny denoiser).
    assert saved["privorl_n"]["config"] == "tiny" and "PrivORL-n" in md
    assert saved["privorl_n"]["num_params"] > 0
