"""Lost-sales inventory (POOL Sec. 2.1): rewards in [0, 1], censoring, Definition 2."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax.envs._inventory import (
    InventoryControl,
    base_stock_policy,
    collect_inventory_data,
    inventory_stage,
    make_inventory_params,
    observable,
)


def test_cost_to_reward_by_hand_and_range():
    p = make_inventory_params(
        1, 3, order_cost=0.3, holding_cost=0.2, lost_sales_cost=1.0, demand_max=1.0
    )
    # y = 0.5, sales 0.5, lost 0.3, s' = 0: cost 0.3*0.3 + 1.0*0.3 = 0.39 of 1.5.
    out = inventory_stage(jnp.array([0.2]), jnp.array([0.3]), jnp.array([0.8]), p)
    assert float(out.cost) == pytest.approx(0.39, abs=1e-6)
    assert float(out.reward) == pytest.approx(1 - 0.39 / 1.5, abs=1e-6)
    # Nothing ordered, nothing held, nothing lost: reward 1; the costliest corner
    # that can happen (order 1 with a full store, demand 0) stays above 0.
    assert (
        float(inventory_stage(jnp.zeros(1), jnp.zeros(1), jnp.zeros(1), p).reward) == 1
    )
    worst = inventory_stage(jnp.ones(1), jnp.ones(1), jnp.zeros(1), p)
    assert float(worst.reward) == pytest.approx(1 - 0.5 / 1.5, abs=1e-6)
    # Random pairs and demands of every distribution: rewards in [0, 1].
    for dist in ("uniform", "exponential", "truncnormal"):
        q = make_inventory_params(3, 2, demand=dist, demand_mean=0.6, demand_scale=0.5)
        k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
        s, a = jax.random.uniform(k1, (4096, 3)), jax.random.uniform(k2, (4096, 3))
        d = q.demand_max * jax.random.uniform(k3, (4096, 3))
        r = jax.vmap(lambda s, a, d, q=q: inventory_stage(s, a, d, q).reward)(s, a, d)
        assert float(r.min()) >= 0.0 and float(r.max()) <= 1.0
        assert float(r.max() - r.min()) > 0.3  # the map is not degenerate


def test_lost_sales_censor_the_demand():
    p = make_inventory_params(1, 3)
    s, a = jnp.array([0.2]), jnp.array([0.3])  # post-order level y = 0.5
    hi1 = inventory_stage(s, a, jnp.array([0.8]), p)
    hi2 = inventory_stage(s, a, jnp.array([0.95]), p)
    # Two demands above y leave the same record: sales = y, s' = 0, stockout.
    assert float(hi1.sales[0]) == float(hi2.sales[0]) == pytest.approx(0.5)
    assert float(hi1.next_level[0]) == float(hi2.next_level[0]) == 0.0
    assert bool(hi1.stockout[0]) and bool(hi2.stockout[0])
    # ... while the true lost sales (never recorded) differ: demand is censored.
    assert float(hi2.lost_sales[0] - hi1.lost_sales[0]) == pytest.approx(0.15, abs=1e-6)
    # Below y the demand is seen exactly.
    lo = inventory_stage(s, a, jnp.array([0.3]), p)
    assert float(lo.sales[0]) == pytest.approx(0.3) and not bool(lo.stockout[0])
    assert float(lo.next_level[0]) == pytest.approx(0.2)
    # The store holds at most 1: ordering past it is paid for but lost.
    full = inventory_stage(jnp.array([0.8]), jnp.array([0.6]), jnp.array([0.0]), p)
    assert float(full.next_level[0]) == pytest.approx(1.0)


def test_offline_data_keeps_feedback_only_below_the_boundary():
    p = make_inventory_params(2, 4, boundary=0.6)
    pol = base_stock_policy(jnp.array([0.5, 0.5]), 0.3)
    data = collect_inventory_data(jax.random.key(1), p, pol, 256)
    assert data.observations.shape == (256, 4, 2) and data.feedback.shape == (256, 4)
    b = np.concatenate([data.observations, data.actions], -1)
    np.testing.assert_array_equal(np.asarray(data.feedback), np.all(b < 0.6, -1))
    fb = np.asarray(data.feedback)
    assert 0.1 < fb.mean() < 0.9  # both sides of the boundary occur
    assert np.all(np.asarray(data.rewards)[~fb] == 0)
    assert np.all(np.asarray(data.next_observations)[~fb] == 0)
    assert np.all(np.asarray(data.sales)[~fb] == 0)
    # Where there is feedback, next state = current level of the following stage.
    both = fb[:, :-1]
    np.testing.assert_allclose(
        np.asarray(data.next_observations)[:, :-1][both],
        np.asarray(data.observations)[:, 1:][both],
        atol=1e-6,
    )
    # A boundary above 1 is full feedback.
    full = collect_inventory_data(
        jax.random.key(1), make_inventory_params(2, 4, boundary=1.5), pol, 256
    )  # same shapes: no recompile
    assert bool(full.feedback.all())


def test_gymnax_step_reports_censoring_and_resets_after_h():
    env = InventoryControl(2, 3)
    p = env.default_params
    obs, state = env.reset(jax.random.key(0), p)
    assert obs.shape == (2,) and float(obs.max()) <= p.init_high
    action = jnp.array([0.0, 0.9])
    for t in range(3):
        lam = p.boundary[t]
        expect_obs = bool(observable(state.level, action, lam))
        obs, state, r, done, info = env.step(jax.random.key(t + 1), state, action, p)
        assert bool(info["observable"]) == expect_obs
        assert 0.0 <= float(r) <= 1.0
        np.testing.assert_allclose(
            info["sales"],
            jnp.minimum(info["sales"] + info["final_observation"], info["demand"]),
            atol=1e-6,
        )
    assert bool(done) and bool(info["truncated"]) and int(state.time) == 0


def test_empirical_demand_draws_the_weekday_of_the_stage():
    from privrl_jax.envs._inventory import sample_demand

    series = np.tile(
        np.arange(7, dtype=np.float32)[:, None] / 10, (3, 1)
    )  # day d: d/10
    series[7:14] += 0.001  # week 2 differs a little
    p = make_inventory_params(1, 9, demand_series=series)
    assert p.demand == "empirical" and p.demand_table.shape == (7, 3, 1)
    for h in range(9):
        d = jax.vmap(lambda k, h=h: sample_demand(k, p, h))(
            jax.random.split(jax.random.key(h), 64)
        )
        np.testing.assert_allclose(np.asarray(d)[:, 0], (h % 7) / 10, atol=1.5e-3)
    with pytest.raises(ValueError, match="demand_series of shape"):
        make_inventory_params(2, 3, demand_series=series)


def test_synthetic_demand_is_deterministic_with_weekly_seasonality():
    from privrl_jax.data._demand import WEEKLY_PROFILE, synthetic_demand

    a, b = synthetic_demand(364, 2, seed=0), synthetic_demand(364, 2, seed=0)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a.mean(0), 0.4, rtol=1e-5)
    by_day = a[:, 0].reshape(-1, 7).mean(0)
    assert np.argmax(by_day) == int(np.argmax(WEEKLY_PROFILE))  # Saturday peak
    assert np.argmin(by_day) == int(np.argmin(WEEKLY_PROFILE))
    assert (
        np.argmax(a[:, 1].reshape(-1, 7).mean(0))
        == (int(np.argmax(WEEKLY_PROFILE)) + 1) % 7
    )


def test_rossmann_loader_reads_the_format_and_rejects_bad_files(tmp_path):
    import datetime

    from privrl_jax.data import load_rossmann

    rows = [
        "Store,DayOfWeek,Date,Sales,Customers,Open,Promo,StateHoliday,SchoolHoliday"
    ]
    start = datetime.date(2015, 1, 4)  # a Sunday: the loader starts on the Monday after
    for i in range(22):
        day = start + datetime.timedelta(days=i)
        for store, base in ((1, 100.0), (2, 300.0)):
            open_ = 0 if (store == 1 and i == 10) else 1
            sales = 0 if open_ == 0 else base * (1 + day.weekday() / 10)
            rows.append(
                f"{store},{day.isoweekday()},{day.isoformat()},{sales},1,{open_},0,0,0"
            )
    f = tmp_path / "train.csv"
    f.write_text(
        "\n".join(rows[:1] + rows[1:][::-1]) + "\n"
    )  # Kaggle's file is newest-first
    s = load_rossmann(f, (1, 2), target_mean=0.4)
    assert s.shape == (20, 2)  # 21 days from Monday, minus day 10 (store 1 closed)
    np.testing.assert_allclose(s.mean(0), 0.4, rtol=1e-5)
    np.testing.assert_allclose(s[1] / s[0], [1.1 / 1.0] * 2, rtol=1e-5)  # Tue / Mon
    bad = tmp_path / "bad.csv"
    bad.write_text("Store,Date\n1,2015-01-01\n")
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['Sales'\]"):
        load_rossmann(bad)
    bad.write_text("Store,Date,Sales\n1,yesterday,5\n")
    with pytest.raises(ValueError, match="line 2 is not a Rossmann row"):
        load_rossmann(bad)
    with pytest.raises(ValueError, match="no rows for store"):
        load_rossmann(f, (7,))
    with pytest.raises(ValueError, match="no Rossmann CSV"):
        load_rossmann(tmp_path / "missing.csv")


def test_synthetic_rossmann_csv_follows_its_documented_process(tmp_path):
    import csv
    import datetime

    from privrl_jax.data._demand import (
        ROSSMANN_HEADER,
        load_rossmann,
        write_synthetic_rossmann_csv,
    )

    f = write_synthetic_rossmann_csv(tmp_path / "train.csv", 2, num_days=364, seed=3)
    with f.open() as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == ROSSMANN_HEADER and len(rows) == 2 * 364
    assert rows[0]["Date"] > rows[-1]["Date"]  # newest first, as Kaggle's file
    for r in rows:
        day = datetime.date.fromisoformat(r["Date"])
        assert int(r["DayOfWeek"]) == day.isoweekday()
        closed = day.weekday() == 6 or r["StateHoliday"] != "0"
        assert (r["Open"] == "0") == closed and (float(r["Sales"]) == 0) == closed
        if (day.month, day.day) in ((12, 25), (5, 1)):
            assert r["StateHoliday"] in "ac" and r["Open"] == "0"
    # Promo days sell more than the same store's non-promo weekdays (gain 1.2 - 1.4).
    for store in ("1", "2"):
        mid = [
            r
            for r in rows
            if r["Store"] == store
            and r["Open"] == "1"
            and datetime.date.fromisoformat(r["Date"]).weekday() in (1, 2, 3)
            and r["SchoolHoliday"] == "0"
            and r["Date"][5:7] not in ("12",)
        ]
        promo = np.mean([float(r["Sales"]) for r in mid if r["Promo"] == "1"])
        plain = np.mean([float(r["Sales"]) for r in mid if r["Promo"] == "0"])
        assert 1.1 < promo / plain < 1.5
    # The loader reads it: closed days dropped, columns scaled to mean 0.4.
    s = load_rossmann(f, (1, 2))
    open_days = sum(1 for r in rows if r["Store"] == "1" and r["Open"] == "1")
    assert s.shape[1] == 2 and s.shape[0] <= open_days
    np.testing.assert_allclose(s.mean(0), 0.4, rtol=1e-5)
