"""TensorBoard and W&B callbacks: public quantities only, written where they should be,
without a network. Each test skips without its extra."""

import struct

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from privrl_jax import privacy
from privrl_jax.privacy._loggers import public_audit_scalars, public_step_scalars

N, STEPS = 64, 6


def _run(callbacks):
    x = np.random.default_rng(0).normal(size=(N, 1, 3)).astype(np.float32)
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=N, sampling_rate=0.25, microbatch_size=32
        ),
        l2_clip_norm=1.0,
        steps=STEPS,
        noise_multiplier=1.1,
    )
    loss = lambda p, item: jnp.sum((p["w"] * item) ** 2)  # noqa: E731
    method, state = privacy.gradient_method(
        plan, loss, optax.sgd(0.1), {"w": jnp.ones(3)}
    )
    rec = privacy.InMemoryRecorder(delta=1e-5)
    privacy.fit(plan, method, x, state, recorder=rec, callbacks=callbacks)
    return plan


def test_allow_lists_drop_everything_else():
    info = {"step": 3, "total": 10, "elapsed_s": 0.5, "epsilon_spent": 1.2, "loss": 9}
    assert public_step_scalars(info) == {
        "privacy/total": 10.0,
        "privacy/elapsed_s": 0.5,
        "privacy/epsilon_spent": 1.2,
    }
    row = {"epsilon_accounted": 2.0, "epsilon_demonstrated": 0.3, "scores": [1, 2]}
    assert public_audit_scalars(row) == {
        "audit/epsilon_accounted": 2.0,
        "audit/epsilon_demonstrated": 0.3,
    }


def _read_events(path):
    """(tag, step, value) of every scalar in a TFRecord event file (the TFRecord
    framing: u64 length, u32 crc, payload, u32 crc; the payload an Event proto)."""
    from tensorboardX.proto import event_pb2

    out, data, i = [], path.read_bytes(), 0
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i : i + 8])
        event = event_pb2.Event.FromString(data[i + 12 : i + 12 + n])
        i += 12 + n + 4
        for v in event.summary.value:
            out.append((v.tag, event.step, v.simple_value))
    return out


def test_tensorboard_logs_public_scalars_at_commits(tmp_path):
    pytest.importorskip("tensorboardX")
    logger = privacy.TensorBoardLogger(tmp_path / "tb")
    plan = _run([logger])
    logger.log_audit({"epsilon_demonstrated": 0.25, "epsilon_ceiling": 3.91})
    logger.finish()
    (events,) = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    rows = _read_events(events)
    tags = {t for t, _, _ in rows}
    assert tags == {
        "privacy/total",
        "privacy/elapsed_s",
        "privacy/epsilon_spent",
        "audit/epsilon_demonstrated",
        "audit/epsilon_ceiling",
    }
    eps = [(s, v) for t, s, v in rows if t == "privacy/epsilon_spent"]
    # the in-memory recorder commits at the end: the plan's epsilon at the last step
    assert eps[-1][0] == STEPS
    np.testing.assert_allclose(eps[-1][1], plan.epsilon(1e-5).epsilon, rtol=1e-6)


def test_wandb_offline_logs_public_scalars(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    logger = privacy.WandbLogger(mode="offline", dir=str(tmp_path), project="t")
    logged = []
    real_log = logger.run.log
    logger.run.log = lambda data, step=None: (
        logged.append((step, data)),
        real_log(data, step=step),
    )
    plan = _run([logger])
    logger.log_audit({"epsilon_demonstrated": 0.25, "epsilon_accounted": 1.0})
    assert dict(logger.run.summary)["audit/epsilon_demonstrated"] == 0.25
    logger.finish()
    assert {k for _, d in logged for k in d} == {
        "privacy/total",
        "privacy/elapsed_s",
        "privacy/epsilon_spent",
    }
    assert logged[-1][0] == STEPS
    np.testing.assert_allclose(
        logged[-1][1]["privacy/epsilon_spent"], plan.epsilon(1e-5).epsilon, rtol=1e-6
    )
    # the offline run file holds what was logged (to `wandb sync` later)
    (run_file,) = list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
    raw = run_file.read_bytes()
    assert b"privacy/epsilon_spent" in raw and b"audit/epsilon_demonstrated" in raw
