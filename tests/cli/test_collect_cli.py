"""`privrl data collect`: validate, then write; an existing file is never replaced
without --overwrite; stream count adapted to the episode length."""

import json
import os

import numpy as np
import pytest
from typer.testing import CliRunner

from privrl_jax import data, envs
from privrl_jax.cli.main import app


@pytest.fixture
def collected(monkeypatch):
    """`envs.collect_dataset` replaced by a fast fake that records its arguments."""
    calls = []

    def fake(key, env_name, size, *, num_envs, on_chunk=None, **kwargs):
        calls.append({"env": env_name, "size": size, "num_envs": num_envs})
        z = np.zeros((size, 4), np.float32)
        return data.Transitions(
            observations=z,
            actions=z[:, :2],
            rewards=z[:, 0],
            next_observations=z,
            terminals=z[:, 0],
            timeouts=z[:, 0],
        )

    monkeypatch.setattr(envs, "collect_dataset", fake)
    return calls


def collect(*args: str):
    return CliRunner().invoke(app, ["data", "collect", *args])


def assert_error(result, *fragments):
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    for f in fragments:
        assert f in result.stderr, (f, result.stderr)


def test_existing_file_is_kept_without_overwrite(tmp_path, collected):
    out = tmp_path / "d.hdf5"
    out.write_bytes(b"earlier results")
    result = collect("--size", "600", "--out", str(out))
    assert_error(result, str(out), "exists", "--overwrite")
    assert out.read_bytes() == b"earlier results" and not collected  # nothing spent
    assert os.listdir(tmp_path) == ["d.hdf5"]
    result = collect("--size", "600", "--out", str(out), "--overwrite")
    assert result.exit_code == 0, result.output
    assert len(data.load_hdf5(out)) == 600


def test_out_is_a_directory(tmp_path, collected):
    assert_error(collect("--out", str(tmp_path)), "is a directory", "give a file path")
    assert not collected and os.listdir(tmp_path) == []


def test_out_under_a_file_is_refused_before_any_work(tmp_path, collected):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "sub" / "d.hdf5"
    assert_error(collect("--out", str(out)), "is a file, not a directory")
    assert not collected and os.listdir(tmp_path) == ["file"]


def test_read_only_directory_is_refused_before_any_work(
    tmp_path, collected, monkeypatch
):
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:  # root writes anywhere: stand in for a read-only mount
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, m: real(p, m) and str(p) != str(ro))
    else:
        ro.chmod(0o555)
    result = collect("--out", str(ro / "new" / "d.hdf5"))
    ro.chmod(0o755)
    assert_error(result, "not writable", str(ro))
    assert not collected and os.listdir(ro) == []


def test_unknown_env_writes_nothing(tmp_path, collected):
    out = tmp_path / "d.hdf5"
    assert_error(collect("--env", "maze2d-tiny", "--out", str(out)), "maze2d")
    assert not collected and not out.exists()


def test_small_size_lowers_the_number_of_streams(tmp_path, collected):
    out = tmp_path / "d.hdf5"
    # umaze episodes last 300 steps: 5000 transitions give 16 whole streams, not
    # the default 1000 streams of 5 steps.
    result = collect("--size", "5000", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert "note: num_envs lowered from 1000 to 16" in result.stderr
    assert collected == [{"env": "maze2d-umaze-v1", "size": 5000, "num_envs": 16}]
    assert data.read_hdf5_metadata(out)["num_envs"] == 16
    assert json.loads(result.stdout)["num_envs"] == 16
    # Fewer transitions than one episode: one stream.
    result = collect("--size", "100", "--out", str(tmp_path / "e.hdf5"))
    assert result.exit_code == 0 and collected[-1]["num_envs"] == 1


def test_stale_temp_files_of_the_target_are_removed(tmp_path, collected):
    out = tmp_path / "d.hdf5"
    stale = tmp_path / ".tmp-d.hdf5-k1ll3d.hdf5"
    stale.write_bytes(b"")
    result = collect("--size", "300", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert sorted(os.listdir(tmp_path)) == ["d.hdf5"]


def test_json_is_a_flag(tmp_path, collected):
    result = collect("--size", "300", "--out", str(tmp_path / "d.hdf5"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "path": str(tmp_path / "d.hdf5"),
        "env": "maze2d-umaze-v1",
        "size": 300,
        "num_envs": 1,
        "seed": 0,
    }
    info = CliRunner().invoke(app, ["data", "info", str(tmp_path / "d.hdf5"), "--json"])
    assert info.exit_code == 0 and json.loads(info.stdout)["transitions"] == 300


def test_a_size_that_could_never_be_written_is_refused_at_once(tmp_path, collected):
    result = collect("--size", "100000000000000", "--out", str(tmp_path / "huge.hdf5"))
    assert result.exit_code == 2, result.output
    assert "lower --size" in result.output and "Traceback" not in result.output
    assert not collected and not list(tmp_path.iterdir())
