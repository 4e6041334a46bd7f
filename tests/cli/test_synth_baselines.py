"""`privrl synth transitions --model pgm|mst` reaches the marginal pipeline with its
config."""

from typer.testing import CliRunner

from privrl_jax.cli.main import app
from privrl_jax.pipelines import marginal


def test_model_option_selects_the_baseline_pipeline(monkeypatch, tmp_path):
    seen = {}

    def fake(cfg, out):
        seen["cfg"], seen["out"] = cfg, out
        return {}

    monkeypatch.setattr(marginal, "run", fake)
    monkeypatch.setattr(marginal, "render_markdown", lambda report: "")
    monkeypatch.chdir(tmp_path)
    for model, config in (("pgm", "pgm_umaze"), ("aim", "aim_umaze"), ("mst", "test")):
        result = CliRunner().invoke(
            app,
            [
                "synth",
                "transitions",
                "--model",
                model,
                "--config",
                config,
                "--set",
                "privacy.epsilon=1",
                "--out",
                f"runs/{model}",
            ],
        )
        assert result.exit_code == 0, result.output
        assert (
            seen["cfg"].model.name,
            seen["cfg"].privacy.epsilon,
            str(seen["out"]),
        ) == (model, 1.0, f"runs/{model}")
    assert seen["cfg"].data.sensitive_size == 600  # the shipped marginal/test config
    # Without --config: the shipped umaze config that bins s' - s on its one-step bound.
    result = CliRunner().invoke(
        app, ["synth", "transitions", "--model", "mst", "--out", "runs/mst_default"]
    )
    assert result.exit_code == 0, result.output
    assert seen["cfg"].model.name == "mst"
    assert seen["cfg"].model.next_obs_delta_bound == (0.053, 0.053, 0.252, 0.252)
    bad = CliRunner().invoke(
        app, ["synth", "transitions", "--model", "gan", "--out", "runs/g"]
    )
    assert (
        bad.exit_code != 0
        and "--model must be privorl_n, pgm, mst, aim, privsyn, pategan or"
        in bad.output
    )


def test_model_option_selects_the_pategan_pipeline(monkeypatch, tmp_path):
    from privrl_jax.pipelines import pategan

    seen = {}

    def fake(cfg, out):
        seen["cfg"] = cfg
        return {}

    monkeypatch.setattr(pategan, "run", fake)
    monkeypatch.setattr(pategan, "render_markdown", lambda report: "")
    monkeypatch.chdir(tmp_path)
    for model, config, rounds in (
        ("pategan", None, 250),  # without --config: pategan/umaze
        ("pategan_pretrained", None, 250),  # pategan/umaze_pretrained
        ("pategan_pretrained", "test", 20),  # --model sets the variant of any config
    ):
        args = ["synth", "transitions", "--model", model, "--out", f"runs/{model}"]
        result = CliRunner().invoke(
            app, [*args, *(["--config", config] if config else [])]
        )
        assert result.exit_code == 0, result.output
        assert (seen["cfg"].model.name, seen["cfg"].model.rounds) == (model, rounds)
