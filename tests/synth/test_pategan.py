"""PATE-GAN's privacy-relevant pieces: the vote noise has the std its event assumes,
one row moves each vote count by at most 1, the student and the generator learn only
from generator samples and the released counts, pre-training reads public rows only.

Tiny networks and fixed keys; statistical bounds are 6 standard errors. The multi-round
sensitivity test and the pre-training test are slow (the pipeline test checks the
pre-trained variant's inputs too); the first-round test checks the same sensitivity in
the default suite.
"""

import functools
import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import synth
from privrl_jax.synth._pategan import (
    noisy_vote_counts,
    pategan_round,
    round_keys,
    student_generator_step,
    teacher_step,
    vote_counts,
    vote_labels,
)

DIM = 3
CFG = synth.PateGanConfig(
    num_teachers=4,
    latent_dim=4,
    generator_features=(16,),
    discriminator_features=(16,),
    teacher_batch_size=16,
    teacher_steps=2,
    queries_per_round=4096,  # many queries a round: the noise test measures them
    learning_rate=1e-2,  # large: a few steps move the teachers visibly
)
NETS = synth.make_nets(CFG, DIM)


def _rows(n, seed=0):
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32) + 1.0


@functools.partial(jax.jit, static_argnums=(0, 1))
def _round(nets, cfg, state, parts, counts, key, noise_key, r, sigma):
    return pategan_round(nets, cfg, state, parts, counts, key, noise_key, r, sigma)


def test_vote_noise_has_the_std_its_event_assumes():
    sigma = 2.5
    mech = synth.vote_mechanism(sigma)
    assert mech.l2_sensitivity == synth.VOTE_SENSITIVITY == 1.0
    assert mech.event() == dp_accounting.GaussianDpEvent(sigma)
    assert mech.noise_std == sigma and synth.vote_mechanism(0.0) is None
    n = 200_000
    counts = jnp.full((n,), 3.0)
    noise = np.asarray(
        noisy_vote_counts(jax.random.key(11), counts, sigma) - counts, np.float64
    )
    assert abs(noise.mean()) < 6 * sigma / math.sqrt(n)
    assert abs(noise.std() / sigma - 1) < 6 / math.sqrt(2 * n)
    # sigma = 0 releases the exact counts (a run labelled not private).
    assert np.array_equal(noisy_vote_counts(jax.random.key(1), counts, 0.0), counts)


def test_the_round_releases_counts_with_that_noise():
    """The noise *in a round* (released counts minus the teachers' true counts on the
    queried samples) has std sigma: the round does not rescale or reuse it."""
    rows = _rows(80)
    parts, counts = synth.partition_rows(
        rows, np.asarray(synth.partition_ids(jax.random.key(0), jnp.arange(80), 4)), 4
    )
    state = synth.init_pategan(jax.random.key(1), NETS, CFG, DIM)
    sigma, noises = 1.7, []
    for r in range(3):
        new, m = _round(
            NETS,
            CFG,
            state,
            parts,
            counts,
            jax.random.key(2),
            jax.random.key(3),
            r,
            sigma,
        )
        true = vote_counts(NETS, new.teachers, m["queried"])
        noises.append(np.asarray(m["noisy_counts"] - true, np.float64))
    noise = np.concatenate(noises)
    n = noise.size
    assert abs(noise.mean()) < 6 * sigma / math.sqrt(n)
    assert abs(noise.std() / sigma - 1) < 6 / math.sqrt(2 * n)
    # Each round draws its own noise (fold_in of the round index): no reuse.
    assert abs(np.corrcoef(noises[0], noises[1])[0, 1]) < 6 / math.sqrt(
        CFG.queries_per_round
    )


def test_partitions_are_disjoint_and_fixed_per_row():
    ids = jnp.arange(500)
    p = np.asarray(synth.partition_ids(jax.random.key(4), ids, 7))
    assert p.min() >= 0 and p.max() < 7 and len(set(p)) == 7
    # Removing row 123 (the others keep their identifiers) moves no other row.
    keep = np.delete(np.arange(500), 123)
    assert np.array_equal(
        np.asarray(synth.partition_ids(jax.random.key(4), jnp.asarray(keep), 7)),
        p[keep],
    )
    rows = _rows(500)
    padded, counts = synth.partition_rows(rows, p, 7)
    assert counts.sum() == 500
    # Every row is in exactly one partition, its own, and in its original order.
    for i in range(7):
        np.testing.assert_array_equal(padded[i, : counts[i]], rows[p == i])
    # An id outside {0..k-1} would leave its row in no partition: refused.
    for bad in (np.where(p == 6, 7, p), np.where(p == 0, -1, p), p.astype(float)):
        with pytest.raises(ValueError, match="partition ids must be integers"):
            synth.partition_rows(rows, bad, 7)


@pytest.mark.slow  # several rounds and a second compile; the first-round test is fast
def test_one_row_moves_each_vote_count_by_at_most_one():
    """Adaptive composition: given the same released history (here, the generators a
    run on D went through), removing row j changes only row j's teacher, and every vote
    count by at most 1, at every round."""
    n, j, rounds = 120, 37, 3
    rows = _rows(n, seed=1)
    key = jax.random.key(5)
    p = np.asarray(synth.partition_ids(key, jnp.arange(n), CFG.num_teachers))
    keep = np.delete(np.arange(n), j)
    state = synth.init_pategan(jax.random.key(6), NETS, CFG, DIM)
    parts, counts = synth.partition_rows(rows, p, CFG.num_teachers)
    parts2, counts2 = synth.partition_rows(rows[keep], p[keep], CFG.num_teachers)
    step = jax.jit(functools.partial(teacher_step, NETS, CFG))
    t2, o2 = state.teachers, state.teacher_opt
    queries = jax.random.normal(jax.random.key(7), (4000, DIM)) + 1.0
    st = state
    for r in range(rounds):
        gen = st.generator  # the history: D's run
        st, _ = _round(NETS, CFG, st, parts, counts, key, jax.random.key(8), r, 1.0)
        k_teach = round_keys(key, r)[0]
        for i in range(CFG.teacher_steps):
            t2, o2, _ = step(
                t2, o2, gen, parts2, counts2, jax.random.fold_in(k_teach, i)
            )
        for t in range(CFG.num_teachers):
            same = all(
                np.array_equal(x[t], y[t])
                for x, y in zip(
                    jax.tree_util.tree_leaves(st.teachers),
                    jax.tree_util.tree_leaves(t2),
                )
            )
            assert same == (t != p[j]), (r, t)
        diff = np.abs(
            np.asarray(vote_counts(NETS, st.teachers, queries))
            - np.asarray(vote_counts(NETS, t2, queries))
        )
        assert diff.max() <= 1.0
    assert diff.max() == 1.0  # the removed row's teacher did change some votes


def test_first_round_changes_only_the_removed_rows_teacher():
    n, j = 120, 37
    rows = _rows(n, seed=1)
    key = jax.random.key(5)
    p = np.asarray(synth.partition_ids(key, jnp.arange(n), CFG.num_teachers))
    keep = np.delete(np.arange(n), j)
    state = synth.init_pategan(jax.random.key(6), NETS, CFG, DIM)
    out = []
    for idx in (np.arange(n), keep):
        parts, counts = synth.partition_rows(rows[idx], p[idx], CFG.num_teachers)
        out.append(
            _round(NETS, CFG, state, parts, counts, key, jax.random.key(8), 0, 1.0)
        )
    (a, ma), (b, mb) = out
    for i in range(CFG.num_teachers):
        same = all(
            np.array_equal(x[i], y[i])
            for x, y in zip(
                jax.tree_util.tree_leaves(a.teachers),
                jax.tree_util.tree_leaves(b.teachers),
            )
        )
        assert same == (i != p[j]), i
    # The same generator queries the same samples; with the same noise key the released
    # counts differ by the true counts' difference, at most 1.
    np.testing.assert_array_equal(ma["queried"], mb["queried"])
    assert np.abs(np.asarray(ma["noisy_counts"] - mb["noisy_counts"])).max() <= 1 + 1e-5


def test_student_and_generator_learn_only_from_released_counts():
    """Recompute the round's student and generator from (the previous state, the
    public key, the released counts) alone, with no sensitive row: bitwise equal."""
    rows = _rows(100)
    p = np.asarray(synth.partition_ids(jax.random.key(0), jnp.arange(100), 4))
    parts, counts = synth.partition_rows(rows, p, 4)
    state = synth.init_pategan(jax.random.key(1), NETS, CFG, DIM)
    key, r = jax.random.key(2), 3
    new, m = _round(NETS, CFG, state, parts, counts, key, jax.random.key(9), r, 0.5)
    _, k_query, k_gen = round_keys(key, r)
    queried = synth.generate(
        NETS, state.generator, k_query, CFG.queries_per_round, CFG.latent_dim
    )
    np.testing.assert_array_equal(queried, m["queried"])
    labels = vote_labels(m["noisy_counts"], CFG.num_teachers)
    s, so, g, go, _ = jax.jit(functools.partial(student_generator_step, NETS, CFG))(
        state.student,
        state.student_opt,
        state.generator,
        state.generator_opt,
        queried,
        labels,
        k_gen,
    )
    for x, y in zip(
        jax.tree_util.tree_leaves((s, so, g, go)),
        jax.tree_util.tree_leaves(
            (new.student, new.student_opt, new.generator, new.generator_opt)
        ),
    ):
        np.testing.assert_array_equal(x, y)


def test_vote_labels_threshold_at_half_the_teachers():
    noisy = jnp.array([-1.0, 1.9, 2.0, 2.01, 5.0])
    np.testing.assert_array_equal(vote_labels(noisy, 4), [0, 0, 0, 1, 1])
    np.testing.assert_allclose(
        vote_labels(noisy, 4, soft=True), [0, 0.475, 0.5, 0.5025, 1], rtol=1e-6
    )


@pytest.mark.slow  # compiles the pre-training scan
def test_pretrained_init_comes_from_the_given_public_networks():
    public = _rows(64, seed=3)
    g, d, info = synth.pretrain_gan(jax.random.key(0), NETS, CFG, public, steps=20)
    assert set(info) == {"discriminator_loss", "generator_loss"}
    st = synth.init_pategan(
        jax.random.key(1), NETS, CFG, DIM, generator=g, discriminator=d
    )
    for x, y in zip(
        jax.tree_util.tree_leaves(st.generator), jax.tree_util.tree_leaves(g)
    ):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(
        jax.tree_util.tree_leaves(st.teachers), jax.tree_util.tree_leaves(d)
    ):
        assert x.shape == (CFG.num_teachers, *y.shape)
        np.testing.assert_array_equal(x[2], y)
    # Pre-training is a function of the public rows and the key only (deterministic).
    g2, _, _ = synth.pretrain_gan(jax.random.key(0), NETS, CFG, public, steps=20)
    for x, y in zip(jax.tree_util.tree_leaves(g2), jax.tree_util.tree_leaves(g)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("bad", [{"num_teachers": 0}, {"queries_per_round": 1.5}])
def test_config_refuses_bad_sizes(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        synth.PateGanConfig(**bad)
