"""The one DP run loop: it runs exactly what its plan accounts, and resumes without
spending twice."""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import privacy
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._dp_loop import DPSecret, LoopStats, run_dp_loop
from privrl_jax.privacy._aggregation import add_noise
from privrl_jax.privacy._clipping import clipped_grad

DIM = 6


def _loss(w, x):  # the gradient of one item is x itself
    return jnp.sum(w * x)


def _zero_loss(w, x):
    return 0.0 * jnp.sum(w)


def _sgd(clip, lr=1.0):
    return privacy.DPMethod(
        clip, params=lambda s: s["w"], update=lambda s, g: {"w": s["w"] - lr * g}
    )


def _ledger(path, n, eps=1e6):
    return privacy.Ledger.open(
        path, dataset_id="toy", dataset_size=n, target_epsilon=eps, target_delta=1e-6
    )


def _run(
    tmp,
    plan,
    data,
    *,
    loss=_loss,
    secret=None,
    stats=None,
    ledger=None,
    every=5,
    method=None,
):
    return run_dp_loop(
        plan,
        method or _sgd(plan.clipped_grad(loss)),
        {"w": jnp.zeros(data.shape[-1])},
        data,
        ckpt=Checkpoints(tmp / "ckpt"),
        ledger=ledger or _ledger(tmp, plan.dataset_size),
        what="toy step",
        secret=secret or DPSecret.from_seed(0),
        loss_key=jax.random.key(1),
        checkpoint_every=every,
        stats=stats,
    )


def _data(n, items=1, seed=0):
    return np.asarray(jax.random.normal(jax.random.key(seed), (n, items, DIM))) * 3


SAMPLERS = {
    "poisson": privacy.PoissonSampler(
        dataset_size=200, sampling_rate=0.05, microbatch_size=4
    ),
    "truncated": privacy.PoissonSampler(
        dataset_size=200, sampling_rate=0.05, microbatch_size=4, capacity=8
    ),
    "uniform_one": privacy.UniformOneSampler(dataset_size=200),
    "full_batch": privacy.FullBatchSampler(dataset_size=200, microbatch_size=50),
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_the_ledger_records_the_event_of_what_ran(tmp_path, name):
    sampler = SAMPLERS[name]
    steps = 40
    plan = privacy.DPPlan(
        sampler=sampler, l2_clip_norm=1.0, steps=steps, noise_multiplier=1.2
    )
    stats = LoopStats()
    _run(tmp_path, plan, _data(200), stats=stats, every=7)
    ledger = privacy.Ledger.load(tmp_path)
    # One noise draw and one ledger release per step, and the recorded event is the
    # plan's.
    assert stats.noise_draws == stats.steps == ledger.num_releases == steps
    assert {r.what for r in ledger.releases} == {"toy step"}
    assert all(
        r.event == privacy.event_to_dict(plan.step_event()) for r in ledger.releases
    )
    sizes = np.array(stats.sampled_units)
    if (
        name == "poisson"
    ):  # sum over steps ~ Binomial(N T, q): within 6 standard deviations
        n, q = 200 * steps, 0.05
        assert abs(sizes.sum() - n * q) <= 6 * math.sqrt(n * q * (1 - q))
        assert (
            len(set(sizes.tolist())) > 3
        )  # sizes vary: Poisson, not a fixed-size batch
    elif name == "truncated":
        assert sizes.max() <= 8
    elif name == "uniform_one":
        assert (sizes == 1).all()
    else:
        assert (sizes == 200).all()
    # The ledger composes the plan's steps, so its epsilon is the plan's.
    assert ledger.event() == dp_accounting.ComposedDpEvent(
        [dp_accounting.SelfComposedDpEvent(plan.step_event(), steps)]
    )
    if name != "truncated":  # PLD of the truncated sampler: ~15 s a call
        assert ledger.epsilon().epsilon == pytest.approx(
            plan.epsilon(1e-6).epsilon, rel=1e-9
        )


@pytest.mark.parametrize("name, factor", [("full_batch", 1.0), ("uniform_one", 2.0)])
def test_noise_on_zero_gradients_has_the_plans_std(tmp_path, name, factor):
    # One step of SGD with lr 1 from 0 on a zero loss: the parameters are -noise /
    # expected batch.
    d = 300_000
    plan = privacy.DPPlan(
        sampler=SAMPLERS[name], l2_clip_norm=0.5, steps=1, noise_multiplier=2.0
    )
    data = np.zeros((200, 1, d), np.float32)
    state, _ = _run(tmp_path, plan, data, loss=_zero_loss)
    std = float(jnp.std(state["w"])) * plan.expected_batch_size
    assert abs(std / (factor * 2.0 * 0.5) - 1) < 6 / math.sqrt(2 * d)


def test_loop_equals_a_naive_reference(tmp_path):
    plan = privacy.DPPlan(
        sampler=SAMPLERS["poisson"], l2_clip_norm=1.0, steps=12, noise_multiplier=0.8
    )
    data = _data(200, items=3)
    item_mask = np.ones((200, 3), bool)
    item_mask[::3, 2] = False  # some units have fewer items
    secret = DPSecret.from_seed(5)
    state, _ = run_dp_loop(
        plan,
        _sgd(plan.clipped_grad(_loss), 0.1),
        {"w": jnp.zeros(DIM)},
        data,
        item_mask=jnp.asarray(item_mask),
        ckpt=Checkpoints(tmp_path / "ckpt"),
        ledger=_ledger(tmp_path, 200),
        what="toy step",
        secret=secret,
        loss_key=jax.random.key(1),
        checkpoint_every=5,
    )
    w = np.zeros(DIM)
    for t in range(12):
        batch = plan.sample(secret.sampling_seed, t)
        total = np.zeros(DIM)
        for u in batch.indices[batch.mask]:
            g = (data[u] * item_mask[u][:, None]).sum(
                0
            )  # the unit's gradient: sum of its items
            total += g * min(1.0, 1.0 / np.linalg.norm(g))
        noise = add_noise(
            jnp.zeros(DIM), jax.random.fold_in(secret.noise_key, t), plan.noise_stds[0]
        )
        w = w - 0.1 * (total + np.asarray(noise)) / plan.expected_batch_size
    np.testing.assert_allclose(np.asarray(state["w"]), w, rtol=1e-5, atol=1e-6)


class _Crash(Exception):
    pass


def test_resume_after_a_crash_gives_the_same_state_and_ledger(tmp_path, monkeypatch):
    plan = privacy.DPPlan(
        sampler=SAMPLERS["poisson"], l2_clip_norm=1.0, steps=23, noise_multiplier=1.0
    )
    data = _data(200)
    full, _ = _run(tmp_path / "full", plan, data, secret=DPSecret.fresh())
    secret = DPSecret.fresh()
    ref, _ = _run(tmp_path / "ref", plan, data, secret=secret)

    # Crash 1: inside step 12 (after the checkpoints of steps 5 and 10).
    calls = {"n": 0}

    def update(s, g):
        return {"w": s["w"] - g}

    def crashing_public_rows(state, acc, t):
        if t == 12 and calls["n"] == 0:
            calls["n"] += 1
            raise _Crash
        return state, acc

    prog = privacy.DPMethod(
        plan.clipped_grad(_loss), lambda s: s["w"], update, crashing_public_rows
    )
    with pytest.raises(_Crash):
        _run(tmp_path / "b", plan, data, secret=secret, method=prog)
    assert privacy.Ledger.load(tmp_path / "b").num_releases == 10
    # Crash 2: between the ledger record of step 15 and its checkpoint (the ledger is
    # ahead).
    real_save = Checkpoints.save

    def save_then_crash(self, step, tree):
        if step == 15:
            raise _Crash
        real_save(self, step, tree)

    monkeypatch.setattr(Checkpoints, "save", save_then_crash)
    with pytest.raises(_Crash):
        _run(
            tmp_path / "b", plan, data, secret=DPSecret.fresh(), method=prog
        )  # secret comes from the checkpoint
    assert privacy.Ledger.load(tmp_path / "b").num_releases == 15
    monkeypatch.setattr(Checkpoints, "save", real_save)
    resumed, got = _run(
        tmp_path / "b", plan, data, secret=DPSecret.fresh(), method=prog
    )
    np.testing.assert_array_equal(np.asarray(resumed["w"]), np.asarray(ref["w"]))
    np.testing.assert_array_equal(got.words, secret.words)
    assert not np.array_equal(
        np.asarray(full["w"]), np.asarray(ref["w"])
    )  # fresh secrets differ
    ledger = privacy.Ledger.load(tmp_path / "b")
    assert ledger.num_releases == 23  # the replayed steps 11-15 were not counted twice
    assert ledger.epsilon().epsilon == pytest.approx(
        privacy.Ledger.load(tmp_path / "ref").epsilon().epsilon
    )


def test_budget_is_checked_before_any_release(tmp_path):
    plan = privacy.DPPlan(
        sampler=SAMPLERS["poisson"], l2_clip_norm=1.0, steps=50, noise_multiplier=0.5
    )
    ledger = _ledger(tmp_path, 200, eps=0.5)
    with pytest.raises(privacy.BudgetExceededError):
        _run(tmp_path, plan, _data(200), ledger=ledger)
    assert privacy.Ledger.load(tmp_path).num_releases == 0
    assert Checkpoints(tmp_path / "ckpt").latest() is None


def test_a_checkpoint_ahead_of_the_ledger_is_refused(tmp_path):
    plan = privacy.DPPlan(
        sampler=SAMPLERS["poisson"], l2_clip_norm=1.0, steps=10, noise_multiplier=1.0
    )
    _run(tmp_path / "a", plan, _data(200))
    # Reuse the checkpoints with an empty ledger: the spend of the first 10 steps would
    # be lost.
    with pytest.raises(privacy.LedgerError, match="privacy spend is unknown"):
        _run(tmp_path / "a", plan, _data(200), ledger=_ledger(tmp_path / "other", 200))


def test_a_non_private_plan_is_recorded_as_such(tmp_path):
    plan = privacy.DPPlan(
        sampler=SAMPLERS["poisson"], l2_clip_norm=1.0, steps=5
    ).calibrate(math.inf, 1e-6)
    _run(tmp_path, plan, _data(200), ledger=_ledger(tmp_path, 200, eps=math.inf))
    ledger = privacy.Ledger.load(tmp_path)
    assert [r.event["type"] for r in ledger.releases] == ["NonPrivateDpEvent"]
    assert [r.count for r in ledger.releases] == [5]  # the 5 steps that ran, not one
    assert ledger.epsilon().epsilon == math.inf


def test_a_foreign_clip_norm_is_refused(tmp_path):
    plan = privacy.DPPlan(
        sampler=SAMPLERS["poisson"], l2_clip_norm=1.0, steps=5, noise_multiplier=1.0
    )
    with pytest.raises(ValueError, match="clips to"):
        run_dp_loop(
            plan,
            _sgd(clipped_grad(_loss, l2_clip_norm=2.0)),
            {"w": jnp.zeros(DIM)},
            _data(200),
            ckpt=Checkpoints(tmp_path / "c"),
            ledger=_ledger(tmp_path, 200),
            what="toy",
            secret=DPSecret.from_seed(0),
            loss_key=jax.random.key(0),
        )


def test_secrets():
    a, b = DPSecret.fresh(), DPSecret.fresh()
    assert not a.fixed and not np.array_equal(a.words, b.words)
    assert a.sampling_seed != b.sampling_seed and a.sampling_seed.bit_length() > 128
    c, d = DPSecret.from_seed(3), DPSecret.from_seed(3)
    assert c.fixed and np.array_equal(c.words, d.words)
    back = DPSecret.from_tree(c.to_tree())
    assert back.fixed and np.array_equal(back.words, c.words)
    assert np.array_equal(
        jax.random.key_data(back.noise_key), jax.random.key_data(c.noise_key)
    )


def test_divergence_stops_at_the_first_checkpoint_with_the_spend_recorded(tmp_path):
    from privrl_jax.pipelines._dp_loop import DivergenceError

    plan = privacy.DPPlan(
        sampler=SAMPLERS["poisson"], l2_clip_norm=1.0, steps=20, noise_multiplier=1.0
    )
    exploding = _sgd(plan.clipped_grad(_loss), lr=1e9)
    for _ in range(
        2
    ):  # the rerun replays from the last good checkpoint and spends nothing new
        with pytest.raises(
            DivergenceError, match=r"steps 1\.\.5.*lower the learning rate"
        ):
            _run(tmp_path, plan, _data(200), method=exploding)
        assert privacy.Ledger.load(tmp_path).num_releases == 5
        assert (
            Checkpoints(tmp_path / "ckpt").latest() == 0
        )  # the diverged state was not saved


def test_a_truncated_ledger_is_refused_on_resume(tmp_path):
    plan = privacy.DPPlan(
        sampler=SAMPLERS["poisson"], l2_clip_norm=1.0, steps=10, noise_multiplier=1.0
    )
    _run(tmp_path, plan, _data(200), every=4)
    ledger = privacy.Ledger.load(tmp_path)
    assert [r.count for r in ledger.releases] == [4, 4, 2]
    ledger.releases = ledger.releases[:2]  # a truncation that keeps a valid chain
    ledger.save()
    longer = privacy.DPPlan(
        sampler=SAMPLERS["poisson"], l2_clip_norm=1.0, steps=12, noise_multiplier=1.0
    )
    with pytest.raises(privacy.LedgerError, match="truncated or replaced"):
        _run(tmp_path, longer, _data(200), ledger=privacy.Ledger.load(tmp_path))
