"""`privrl privacy ...` prints dp-accounting's numbers and clear errors."""

import json

import dp_accounting
from typer.testing import CliRunner

from privrl_jax.cli.main import app
from privrl_jax.privacy import Ledger
from privrl_jax.privacy._accounting import dpsgd_epsilon

runner = CliRunner()


def test_epsilon_json_matches_library():
    res = runner.invoke(
        app,
        [
            "privacy",
            "epsilon",
            "--noise-multiplier",
            "1.1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "500",
            "--delta",
            "1e-5",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["epsilon"] == dpsgd_epsilon(1.1, 0.01, 500, 1e-5).epsilon
    assert (
        out["accountant"] == "rdp"
        and out["noise_multiplier"] == 1.1
        and out["delta"] == 1e-5
    )


def test_calibrate_json_lands_on_target():
    res = runner.invoke(
        app,
        [
            "privacy",
            "calibrate",
            "--target-epsilon",
            "2",
            "--delta",
            "1e-5",
            "--sampling-rate",
            "0.01",
            "--steps",
            "500",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert 1.95 <= out["epsilon"] <= 2.0
    assert (
        out["epsilon"]
        == dpsgd_epsilon(out["noise_multiplier"], 0.01, 500, 1e-5).epsilon
    )


def test_bad_delta_is_a_clear_error():
    res = runner.invoke(
        app,
        [
            "privacy",
            "epsilon",
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "5",
            "--delta",
            "1.5",
        ],
    )
    assert res.exit_code == 2
    assert "delta must be a number in (0, 1)" in res.output


def test_report_reads_a_ledger(tmp_path):
    led = Ledger.open(
        tmp_path,
        dataset_id="d",
        dataset_size=1000,
        target_epsilon=5.0,
        target_delta=1e-5,
    )
    step = dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(2.0))
    led.record(step, what="dpsgd step", count=20)
    res = runner.invoke(app, ["privacy", "report", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["num_releases"] == 20
    assert out["rdp"]["epsilon"] == led.epsilon("rdp").epsilon
    text = runner.invoke(app, ["privacy", "report", str(tmp_path)])
    assert "20 x dpsgd step" in text.output and "spent (PLD)" in text.output


def test_report_on_missing_run_dir(tmp_path):
    res = runner.invoke(app, ["privacy", "report", str(tmp_path / "nope")])
    assert res.exit_code == 2
    assert "no ledger" in res.output


def test_uniform_one_epsilon_and_calibration_use_the_replace_one_sigma():
    res = runner.invoke(
        app,
        [
            "privacy",
            "epsilon",
            "--noise-multiplier",
            "1",
            "--sampling",
            "uniform_one",
            "--dataset-size",
            "1000",
            "--steps",
            "10000",
            "--delta",
            "1e-5",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert (
        out["epsilon"]
        == dpsgd_epsilon(
            1.0, 1e-3, 10_000, 1e-5, sampling="uniform_one", dataset_size=1000
        ).epsilon
    )
    assert out["neighboring"] == "REPLACE_ONE" and out["noise_stds"] == [
        2.0
    ]  # per unit clip norm
    res = runner.invoke(
        app,
        [
            "privacy",
            "calibrate",
            "--target-epsilon",
            "1",
            "--sampling",
            "uniform_one",
            "--dataset-size",
            "1000",
            "--steps",
            "10000",
            "--delta",
            "1e-5",
            "--json",
        ],
    )
    out = json.loads(res.output)
    assert 0.97 <= out["epsilon"] <= 1.0
    assert out["noise_stds"] == [2 * out["noise_multiplier"]]


def test_missing_sampling_arguments_are_one_line_errors():
    for args in (["--sampling", "uniform_one"], []):
        res = runner.invoke(
            app,
            [
                "privacy",
                "epsilon",
                "--noise-multiplier",
                "1",
                "--steps",
                "10",
                "--delta",
                "1e-5",
                *args,
            ],
        )
        assert res.exit_code == 2
        assert (
            res.output.strip().startswith("error:")
            and len(res.output.strip().splitlines()) == 1
        )


def test_calibrate_with_an_unsupported_accountant_is_the_same_one_line_error_as_epsilon():  # noqa: E501
    common = [
        "--sampling",
        "uniform_one",
        "--dataset-size",
        "1000",
        "--steps",
        "100",
        "--delta",
        "1e-5",
        "--accountant",
        "pld",
    ]
    eps = runner.invoke(app, ["privacy", "epsilon", "--noise-multiplier", "1", *common])
    cal = runner.invoke(app, ["privacy", "calibrate", "--target-epsilon", "3", *common])
    for res in (eps, cal):
        assert res.exit_code == 2, res.output
        assert (
            "does not support GaussianDpEvent under REPLACE_ONE; use accountant='rdp'"
            in res.output
        )
        assert (
            "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
        )
