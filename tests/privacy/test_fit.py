"""The public DP loop (privacy.fit): the README's flax model, resume after a kill,
in-memory runs,
and the refusals (a noisy optimizer, a foreign clip norm, a sigma = 0 plan is not
private)."""

import dataclasses
import json
import re
import warnings
from pathlib import Path

import dp_accounting
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from privrl_jax import privacy
from privrl_jax.privacy._aggregation import dpsgd
from privrl_jax.privacy._clipping import clipped_grad

README = (
    Path(__file__).resolve().parents[2] / "docs" / "dp_loop.md"
)  # its DP loop example
N, STEPS, EVERY = 256, 12, 4


def _plan(sigma=1.1):
    sampler = privacy.PoissonSampler(
        dataset_size=N, sampling_rate=0.1, microbatch_size=16
    )
    return privacy.DPPlan(
        sampler=sampler, l2_clip_norm=1.0, steps=STEPS, noise_multiplier=sigma
    )


def _problem():
    x = np.random.default_rng(0).normal(size=(N, 4)).astype(np.float32)
    y = x @ np.arange(1, 5, dtype=np.float32)
    model = nn.Dense(1)
    loss = lambda p, item: (model.apply(p, item[0])[0] - item[1]) ** 2  # noqa: E731
    return model, loss, (x[:, None], y[:, None]), model.init(jax.random.key(0), x[0])


def _recorder(run_dir, plan):
    ledger = privacy.Ledger.open(
        run_dir,
        dataset_id="toy",
        dataset_size=N,
        target_epsilon=50.0,
        target_delta=1e-5,
    )
    return privacy.RunRecorder(
        privacy.Checkpoints(run_dir / "ckpt"),
        ledger,
        what="step",
        checkpoint_every=EVERY,
    )


def _entries(run_dir):
    return [
        (r.what, r.count, r.event, r.params)
        for r in privacy.Ledger.load(run_dir).releases
    ]


class _Kill(RuntimeError):
    pass


class _KillAt:
    """A callback that kills the run after ``step`` (as SIGKILL would, between two
    commits)."""

    def __init__(self, step):
        self.step = step

    def on_step(self, info):
        if info["step"] == self.step:
            raise _Kill

    def close(self):
        pass


def test_readme_public_loop_example(tmp_path):
    code = re.search(
        r"## The public DP loop\n\n.*?```python\n(.*?)```", README.read_text(), re.S
    ).group(1)
    code = code.replace('"runs/dp-readme', f'"{tmp_path}/dp-readme').replace(
        "print(", "out = ("
    )
    code = code.replace("steps=300", "steps=30")  # the README's run, 10x shorter
    ns: dict = {}
    exec(compile(code, "README", "exec"), ns)  # noqa: S102
    eps, private = ns["out"]
    assert private is True
    assert eps == pytest.approx(ns["plan"].epsilon(1e-6).epsilon, rel=1e-9)
    assert privacy.Ledger.load(tmp_path / "dp-readme").num_releases == 30


def test_killed_and_rerun_equals_an_uninterrupted_run(tmp_path):
    _, loss, data, params = _problem()
    plan = _plan()
    secret = privacy.DPSecret.from_seed(4)
    method, state = privacy.gradient_method(plan, loss, optax.adam(1e-2), params)
    full = privacy.fit(
        plan,
        method,
        data,
        state,
        secret=secret,
        recorder=_recorder(tmp_path / "a", plan),
    )
    kill_at = int(
        np.random.default_rng(11).integers(EVERY + 1, STEPS)
    )  # a random step, mid-stretch
    with pytest.raises(_Kill):
        privacy.fit(
            plan,
            method,
            data,
            state,
            secret=secret,
            recorder=_recorder(tmp_path / "b", plan),
            callbacks=[_KillAt(kill_at)],
        )
    # The rerun is handed another secret: the one in the checkpoint must win.
    again = privacy.fit(
        plan,
        method,
        data,
        state,
        secret=privacy.DPSecret.fresh(),
        recorder=_recorder(tmp_path / "b", plan),
    )
    for a, b in zip(
        jax.tree_util.tree_leaves(full.state), jax.tree_util.tree_leaves(again.state)
    ):
        np.testing.assert_array_equal(a, b)
    assert _entries(tmp_path / "a") == _entries(tmp_path / "b")
    assert privacy.Ledger.load(tmp_path / "b").epsilon().epsilon == pytest.approx(
        plan.epsilon(1e-5).epsilon, rel=1e-9
    )


def test_in_memory_run_writes_nothing_and_spends_the_plans_epsilon(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    _, loss, data, params = _problem()
    plan = _plan()
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.1), params)
    rec = privacy.InMemoryRecorder(delta=1e-5)
    log = tmp_path / "log" / "fit.jsonl"
    res = privacy.fit(
        plan,
        method,
        data,
        state,
        recorder=rec,
        callbacks=[privacy.JsonLinesLogger(log, every_step=True)],
    )
    assert res.private and not res.secret.fixed
    assert rec.epsilon_spent() == pytest.approx(plan.epsilon(1e-5).epsilon, rel=1e-12)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["fit.jsonl", "log"]
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["step"] for x in lines] == list(range(1, STEPS + 1))
    # Public quantities only: no loss, no gradient norm, nothing computed on the private
    # data.
    assert {k for x in lines for k in x} == {
        "step",
        "total",
        "elapsed_s",
        "epsilon_spent",
    }


def test_fit_equals_a_naive_dp_sgd_reference():
    """Same secret -> same batches and noise: a hand-written loop over the plan's
    primitives."""
    _, loss, data, params = _problem()
    plan = _plan()
    secret = privacy.DPSecret.from_seed(2)
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.05), params)
    got = privacy.fit(plan, method, data, state, secret=secret).state.params
    x, y = (jnp.asarray(d) for d in data)
    per_unit = jax.vmap(
        jax.grad(lambda p, xi, yi: loss(p, (xi[0], yi[0]))), (None, 0, 0)
    )

    @jax.jit
    def step(
        p, xs, ys, mask, t
    ):  # one DP-SGD step written out: per-unit clip, sum, noise, SGD
        g = per_unit(p, xs, ys)
        norms = jnp.sqrt(
            sum(
                jnp.sum(v.reshape(len(mask), -1) ** 2, 1)
                for v in jax.tree_util.tree_leaves(g)
            )
        )
        scale = jnp.where(mask, jnp.minimum(1.0, 1.0 / jnp.maximum(norms, 1e-12)), 0.0)
        total = jax.tree_util.tree_map(lambda v: jnp.tensordot(scale, v, 1), g)
        noisy = plan.privatize(total, jax.random.fold_in(secret.noise_key, t))
        return jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, p, noisy)

    p = params
    for t in range(STEPS):
        batch = plan.sample(secret.sampling_seed, t)
        idx, mask = batch.indices.ravel(), batch.mask.ravel()
        p = step(p, x[idx], y[idx], jnp.asarray(mask), t)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(p)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize(
    "noisy",
    [
        lambda: dpsgd(
            optax.adam(1e-3),
            noise_multiplier=1.0,
            l2_clip_norm=1.0,
            expected_batch_size=25.6,
            key=jax.random.key(0),
        ),
        lambda: optax.chain(optax.add_noise(0.1, 0.55, 0), optax.sgd(0.1)),
    ],
)
def test_an_optimizer_that_adds_its_own_noise_is_refused(noisy):
    _, loss, _, params = _problem()
    with pytest.raises(ValueError, match="adds its own noise"):
        privacy.gradient_method(_plan(), loss, noisy(), params)


def test_a_clipped_function_with_another_clip_norm_is_refused():
    _, loss, data, params = _problem()
    plan = _plan()
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.1), params)
    foreign = method._replace(clipped=clipped_grad(loss, l2_clip_norm=2.0))
    with pytest.raises(ValueError, match="clips to"):
        privacy.fit(plan, foreign, data, state)


def test_a_sigma_zero_plan_is_labelled_not_private(tmp_path):
    _, loss, data, params = _problem()
    plan = _plan(sigma=0.0)
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.1), params)
    res = privacy.fit(plan, method, data, state, recorder=_recorder(tmp_path, plan))
    assert res.private is False and not plan.private
    ledger = privacy.Ledger.load(tmp_path)
    # Every step that ran is recorded, one entry per commit, like a private run's: an
    # audit of the ledger reruns all STEPS of them, not one.
    assert [r.count for r in ledger.releases] == [EVERY] * (STEPS // EVERY)
    non_private = privacy.event_to_dict(dp_accounting.NonPrivateDpEvent())
    assert all(r.event == non_private for r in ledger.releases)
    assert all(r.params == plan.describe() for r in ledger.releases)
    assert ledger.groups()[0]["count"] == STEPS
    assert ledger.epsilon().epsilon == float("inf")


def test_a_sigma_zero_run_killed_and_resumed_records_each_step_once(tmp_path):
    _, loss, data, params = _problem()
    plan = _plan(sigma=0.0)
    _killed_at(tmp_path, plan, EVERY + 2, loss, data, params)
    assert [e[1] for e in _entries(tmp_path)] == [EVERY]  # the one commit
    method, state = privacy.gradient_method(plan, loss, optax.adam(1e-2), params)
    privacy.fit(plan, method, data, state, recorder=_recorder(tmp_path, plan))
    assert sum(e[1] for e in _entries(tmp_path)) == STEPS


def test_a_sigma_zero_ledger_of_one_event_catches_up_on_resume(tmp_path, monkeypatch):
    # Ledgers written before non-private steps were recorded as they ran hold one
    # NonPrivateDpEvent for the whole run; a resume records the steps the checkpoint
    # is past, then the rest as they commit.
    _, loss, data, params = _problem()
    plan = _plan(sigma=0.0)
    _recorder(tmp_path, plan).ledger.record(
        dp_accounting.NonPrivateDpEvent(), what="step", params=plan.describe()
    )
    with monkeypatch.context() as m:
        m.setattr(privacy.RunRecorder, "record", lambda self, plan, step: None)
        _killed_at(tmp_path, plan, EVERY + 2, loss, data, params)
    assert [e[1] for e in _entries(tmp_path)] == [1]
    method, state = privacy.gradient_method(plan, loss, optax.adam(1e-2), params)
    privacy.fit(plan, method, data, state, recorder=_recorder(tmp_path, plan))
    counts = [e[1] for e in _entries(tmp_path)]
    assert counts == [1, EVERY - 1, EVERY, EVERY] and sum(counts) == STEPS


# ----------------------------------------------- issue 47: hardening of the Python API


def _killed_at(run_dir, plan, step, loss, data, params):
    method, state = privacy.gradient_method(plan, loss, optax.adam(1e-2), params)
    with pytest.raises(_Kill):
        privacy.fit(
            plan,
            method,
            data,
            state,
            secret=privacy.DPSecret.from_seed(4),
            recorder=_recorder(run_dir, plan),
            callbacks=[_KillAt(step)],
        )


@pytest.mark.parametrize(
    ("other", "says"),
    [
        (dict(steps=STEPS // 2), f"steps {STEPS} -> {STEPS // 2}"),
        (dict(sigma=0.9), "noise_multipliers [1.1] -> [0.9]"),
    ],
)
def test_a_resume_under_another_plan_is_refused_naming_what_differs(
    tmp_path, other, says
):
    _, loss, data, params = _problem()
    _killed_at(tmp_path, _plan(), EVERY + 2, loss, data, params)
    before = _entries(tmp_path)
    assert sum(e[1] for e in before) == EVERY  # one commit was recorded
    steps = other.get("steps", STEPS)
    plan = dataclasses.replace(_plan(other.get("sigma", 1.1)), steps=steps)
    method, state = privacy.gradient_method(plan, loss, optax.adam(1e-2), params)
    with pytest.raises(privacy.LedgerError, match="another plan") as err:
        privacy.fit(plan, method, data, state, recorder=_recorder(tmp_path, plan))
    assert says in str(err.value) and "\n" not in str(err.value)
    assert _entries(tmp_path) == before  # nothing spent


def test_a_finished_run_rerun_with_another_plan_is_refused(tmp_path):
    _, loss, data, params = _problem()
    plan = _plan()
    method, state = privacy.gradient_method(plan, loss, optax.adam(1e-2), params)
    done = privacy.fit(plan, method, data, state, recorder=_recorder(tmp_path, plan))
    # The same plan hands back the finished state, spending nothing (and the budget
    # check of 0 more steps is no 0-fold event: no NaN warning from dp-accounting).
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        again = privacy.fit(
            plan, method, data, state, recorder=_recorder(tmp_path, plan)
        )
    for a, b in zip(
        jax.tree_util.tree_leaves(done.state), jax.tree_util.tree_leaves(again.state)
    ):
        np.testing.assert_array_equal(a, b)
    shorter = dataclasses.replace(plan, steps=STEPS // 2)
    with pytest.raises(privacy.LedgerError, match=f"steps {STEPS} -> {STEPS // 2}"):
        privacy.fit(shorter, method, data, state, recorder=_recorder(tmp_path, shorter))
    assert privacy.Ledger.load(tmp_path).num_releases == STEPS


def test_a_ledger_of_another_dataset_size_than_the_plan_is_refused(tmp_path):
    _, loss, data, params = _problem()
    plan = _plan()
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.1), params)
    ledger = privacy.Ledger.open(
        tmp_path,
        dataset_id="toy",
        dataset_size=10 * N,
        target_epsilon=50.0,
        target_delta=1e-5,
    )
    recorder = privacy.RunRecorder(
        privacy.Checkpoints(tmp_path / "ckpt"), ledger, what="step"
    )
    with pytest.raises(privacy.LedgerError, match=f"dataset_size={10 * N}.*N = {N}"):
        privacy.fit(plan, method, data, state, recorder=recorder)
    assert privacy.Ledger.load(tmp_path).num_releases == 0


@pytest.mark.parametrize("shape", [(1,), (3,)])
def test_a_per_item_loss_that_is_not_a_scalar_is_named(shape):
    model, _, data, params = _problem()

    def loss(p, item):
        return jnp.broadcast_to((model.apply(p, item[0]) - item[1]) ** 2, shape)

    plan = _plan()
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.1), params)
    with pytest.raises(
        ValueError,
        match=re.escape(f"per_item_loss must return a scalar; got shape {shape}"),
    ):
        privacy.fit(plan, method, data, state)


@pytest.mark.parametrize(
    "noisy",
    [
        lambda: optax.contrib.dpsgd(0.1, 1.0, 1.0, 0),
        lambda: optax.chain(
            optax.contrib.differentially_private_aggregate(1.0, 1.0, 0),
            optax.sgd(0.1),
        ),
    ],
)
def test_optax_contrib_dp_optimizers_are_refused(noisy):
    _, loss, _, params = _problem()
    with pytest.raises(ValueError, match="adds its own noise.*optax.contrib.dpsgd"):
        privacy.gradient_method(_plan(), loss, noisy(), params)


def test_the_budget_error_of_the_python_api_names_python_parameters(tmp_path):
    _, loss, data, params = _problem()
    plan = dataclasses.replace(_plan(), steps=20_000)
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.1), params)
    with pytest.raises(privacy.BudgetExceededError) as err:
        privacy.fit(plan, method, data, state, recorder=_recorder(tmp_path, plan))
    msg = str(err.value)
    assert "DPPlan(steps=...)" in msg and "noise_multiplier" in msg
    assert "finetune." not in msg and "privacy.epsilon" not in msg


def test_a_one_process_dataset_size_mismatch_names_the_fix():
    _, loss, (x, y), params = _problem()
    plan = _plan()
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.1), params)
    with pytest.raises(ValueError) as err:
        privacy.fit(plan, method, (x[:200], y[:200]), state)
    msg = str(err.value)
    assert f"N = {N}" in msg and "dataset_size" in msg and "process" not in msg


class _Seen:
    def __init__(self):
        self.infos = []

    def on_step(self, info):
        self.infos.append(dict(info))

    def close(self):
        pass


def test_non_finite_units_are_counted_and_said_once(tmp_path):
    model, loss, (x, y), params = _problem()
    bad = np.zeros(N, bool)
    bad[[3, 50, 77, 200]] = True
    x = x.copy()
    x[bad] = np.nan
    plan = _plan()
    secret = privacy.DPSecret.from_seed(7)
    # The count the loop must report: the sampled units (over every step) that are bad.
    batches = [plan.sample(secret.sampling_seed, t) for t in range(STEPS)]
    want = sum(int(bad[b.indices[b.mask]].sum()) for b in batches)
    assert want > 0
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.1), params)
    seen = _Seen()
    with pytest.warns(
        RuntimeWarning, match=r"sampled unit\(s\) in steps 1\.\."
    ) as caught:
        res = privacy.fit(
            plan,
            method,
            (x, y),
            state,
            secret=secret,
            recorder=_recorder(tmp_path, plan),
            callbacks=[seen],
        )
    assert len([w for w in caught if "non-finite" in str(w.message)]) == 1
    assert res.nonfinite_units == want
    commits = [i for i in seen.infos if "nonfinite_units" in i]
    assert [i["step"] for i in commits] == list(range(EVERY, STEPS + 1, EVERY))
    assert commits[-1]["nonfinite_units"] == want
    # The parameters stay finite: the bad units added zero.
    assert all(np.isfinite(v).all() for v in jax.tree_util.tree_leaves(res.state))
    # A clean run reports 0 and warns nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        clean = privacy.fit(plan, method, _problem()[2], state, secret=secret)
    assert clean.nonfinite_units == 0
