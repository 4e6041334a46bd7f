"""PATE-GAN for transitions, with a data-independent accounting of the noisy votes.

Reference: J. Jordon, J. Yoon, M. van der Schaar, "PATE-GAN: Generating synthetic data
with differential privacy guarantees", ICLR 2019,
https://openreview.net/forum?id=S1zk9iRqF7. The vote mechanism is GNMax (Papernot et
al. 2018, "Scalable private learning with PATE", https://arxiv.org/abs/1802.08908).

The algorithm (the paper's Algorithm 1, one *round* here):

1. **Teachers.** The sensitive rows are split into ``k`` disjoint partitions; teacher
   ``i`` is a discriminator trained (without noise) to tell partition ``i``'s rows from
   generator samples. A row is in exactly one partition: its partition is a function of
   the row's identifier and a fixed public key (:func:`partition_ids`), never of its
   values, and a teacher reads only its own partition (a batch of teacher ``i`` is
   drawn from partition ``i`` with teacher ``i``'s own key and size).
2. **Votes.** ``B`` fresh generator samples are each labelled by the teachers: the
   count of teachers voting "real" (logit > 0) plus Gaussian noise, thresholded at
   ``k / 2`` (:func:`noisy_vote_counts`, :func:`vote_labels`).
3. **Student and generator.** The student discriminator is trained on the ``B``
   samples and their labels only; the generator is trained against the student only
   (:func:`student_generator_step`, whose arguments hold no sensitive row).

Privacy (the unit: one transition, add/remove-one). As in PATE (Papernot et al. 2017,
https://arxiv.org/abs/1610.05755) the partitions of the other rows must stay as they
were: a row's identifier is its index in the sensitive data as given, and a
neighbouring dataset adds or removes one row while the others keep their identifiers
(hence their partitions; :func:`partition_ids`). The only quantities computed
from the sensitive rows that leave the teachers are the vote counts. Adding or removing
one row changes one partition, hence one teacher, hence each vote count by at most 1:
the L2 sensitivity of one count is 1 (:data:`VOTE_SENSITIVITY`). Each labelled sample
is one Gaussian query ``count + N(0, sigma^2)``, recorded as
``GaussianDpEvent(sigma)`` (our ``GaussianMechanism`` of sensitivity 1); the queries
are composed adaptively (the generator that draws round ``t``'s samples, and the
teachers' fake rows, are post-processing of earlier noisy counts), so a run of ``R``
rounds of ``B`` queries is ``SelfComposedDpEvent(GaussianDpEvent(sigma), R * B)``,
which dp-accounting composes exactly (RDP) or tightly (PLD). Student, generator,
labels and the release are post-processing. The teachers' parameters are never
released.

What we do NOT use: the original paper's data-dependent moments-accountant analysis of
the votes (its privacy cost per query depends on how unanimous the teachers are).
Ganev et al. (2024), "Understanding the Privacy Risks of PATE-GAN implementations",
report that published PATE-GAN implementations get the privacy analysis and its
implementation wrong; moreover a data-dependent epsilon is itself a function of the data
that may not be published without a further (smooth-sensitivity) mechanism, which the
original does not specify. Implementing that analysis exactly is not attempted here:
every query is accounted at its worst case (data-independent), so the epsilon the
ledger reports is a bound that holds for every dataset. The price: sigma grows as
sqrt(number of queries), so the query budget (rounds x batch) must be small and the
teacher count large enough that ``k / 2`` stands out of the noise.

Noise: a Gaussian on the "real" count rather than the paper's Laplace on both class
counts (GNMax rather than LNMax). With two classes the argmax of the noisy histogram
(c + z1, k - c + z2) is the threshold of c + (z1 - z2) / 2 at k / 2, so one Gaussian on
the count c is the whole mechanism.

Constants the paper leaves open or that we chose: MLP generator and discriminators
(ReLU, two hidden layers of 256), latent N(0, I) of dim 32, Adam (1e-4, b1 = 0.5),
non-saturating generator loss. The data are PrivORL-n's encoded transitions normalised
with the public normaliser.

What runs where: all training and the noise are JAX (one jitted scan per chunk of
rounds); the partitions' layout is host-side NumPy.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from privrl_jax.privacy import GaussianMechanism
from privrl_jax.synth._curiosity import MLP

# One row changes one teacher's vote: the count of "real" votes moves by at most 1.
VOTE_SENSITIVITY = 1.0

Params = Any


@dataclasses.dataclass(frozen=True, kw_only=True)
class PateGanConfig:
    """PATE-GAN's architecture and per-round sizes.

    Attributes:
      num_teachers: k, the number of disjoint partitions / teacher discriminators.
      latent_dim: dimension of the generator's N(0, I) input.
      generator_features: hidden widths of the generator MLP.
      discriminator_features: hidden widths of the discriminator MLPs (teachers and
        student).
      learning_rate: Adam step size of every network.
      teacher_steps: teacher updates per round.
      teacher_batch_size: real rows (from its own partition) and fake rows per teacher
        update.
      queries_per_round: B, the generator samples labelled by the noisy vote in each
        round: B Gaussian queries.
      student_steps: student updates per round, each on the round's B labelled samples.
      generator_batch_size: latent draws per generator update.
      generator_steps: generator updates per round against the student (post-
        processing: they cost no queries).
      soft_labels: label a sample with its noisy vote share clip((c + z) / k, 0, 1)
        instead of the paper's hard majority 1[c + z > k / 2]. Post-processing of the
        same released count, so the same privacy; a graded target the student can
        follow when no sample wins a majority (a hard-label student then learns a
        constant "fake" and gives the generator no gradient).
    """

    num_teachers: int = 10
    latent_dim: int = 32
    generator_features: tuple[int, ...] = (256, 256)
    discriminator_features: tuple[int, ...] = (256, 256)
    learning_rate: float = 1e-4
    teacher_steps: int = 1
    teacher_batch_size: int = 64
    queries_per_round: int = 64
    student_steps: int = 1
    generator_batch_size: int = 64
    generator_steps: int = 1
    soft_labels: bool = False

    def __post_init__(self):
        for name in (
            "num_teachers",
            "latent_dim",
            "teacher_steps",
            "teacher_batch_size",
            "queries_per_round",
            "student_steps",
            "generator_batch_size",
            "generator_steps",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1; got {value!r}.")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0; got {self.learning_rate}.")


class GanNets(NamedTuple):
    """The two networks' apply functions and the shared optimiser (static)."""

    generator: MLP
    discriminator: MLP
    tx: optax.GradientTransformation


def make_nets(cfg: PateGanConfig, dim: int) -> GanNets:
    """Builds the generator, the discriminator and the shared Adam optimiser.

    Args:
      cfg: the hidden widths and the learning rate (Adam with b1 = 0.5).
      dim: d, width of a row.

    Returns:
      `GanNets`: generator (latent -> [d]), discriminator ([d] -> one logit), Adam.
    """
    return GanNets(
        MLP(features=tuple(cfg.generator_features), out_dim=dim),
        MLP(features=tuple(cfg.discriminator_features), out_dim=1),
        optax.adam(cfg.learning_rate, b1=0.5),
    )


class PateGanState(NamedTuple):
    """Parameters and optimiser states of the generator, the student and the teachers.

    ``teachers`` / ``teacher_opt`` are stacked over the k teachers (leading axis).
    """

    generator: Params
    generator_opt: Any
    student: Params
    student_opt: Any
    teachers: Params
    teacher_opt: Any


# --------------------------------------------------------------------------- partitions
def partition_ids(key: jax.Array, row_ids: jax.Array, num_teachers: int) -> jax.Array:
    """The partition of each row: uniform on {0..k-1} from ``fold_in(key, row_id)``.

    A function of the row's identifier and a public key only (never of its values), so
    a row's partition does not depend on the other rows: adding or removing one row
    leaves every other row's partition as it was.

    Args:
      key: a fixed public key.
      row_ids: int [N] identifiers of the rows (e.g. their index in the dataset).
      num_teachers: The number of teachers k.

    Returns:
      int32 [N] partition of each row.
    """
    row_ids = jnp.asarray(row_ids)
    return jax.vmap(
        lambda i: jax.random.randint(jax.random.fold_in(key, i), (), 0, num_teachers)
    )(row_ids).astype(jnp.int32)


def partition_rows(
    rows: np.ndarray, parts: np.ndarray, num_teachers: int
) -> tuple[np.ndarray, np.ndarray]:
    """Groups rows by partition, padded to the largest partition; order kept.

    ``cap`` is the largest partition's size (at least 1); padding rows are zeros and
    are never drawn (a teacher draws indices below its own count).

    Args:
      rows: [N, d] sensitive rows.
      parts: int [N] partition of each row in {0..k-1} (:func:`partition_ids`).
      num_teachers: The number of teachers k.

    Returns:
      ``(padded, counts)``: float32 [k, cap, d] rows by partition and int32 [k]
      partition sizes.

    Raises:
      ValueError: ``rows`` not [N, d], ``parts`` not [N], or a partition id outside
        {0..k-1} (its row would silently belong to no teacher).
    """
    rows, parts = np.asarray(rows, np.float32), np.asarray(parts)
    if rows.ndim != 2 or parts.shape != rows.shape[:1]:
        raise ValueError(
            f"expected rows [N, d] and parts [N]; got {rows.shape} and {parts.shape}."
        )
    if parts.size and (
        not np.issubdtype(parts.dtype, np.integer)
        or parts.min() < 0
        or parts.max() >= num_teachers
    ):
        raise ValueError(
            f"partition ids must be integers in [0, {num_teachers}) "
            f"(num_teachers = {num_teachers}); got {parts.dtype} ids in "
            f"[{parts.min()}, {parts.max()}]. Build them with partition_ids."
        )
    counts = np.bincount(parts, minlength=num_teachers).astype(np.int32)
    cap = max(1, int(counts.max(initial=0)))
    padded = np.zeros((num_teachers, cap, rows.shape[1]), np.float32)
    for i in range(num_teachers):
        block = rows[parts == i]
        padded[i, : len(block)] = block
    return padded, counts


# -------------------------------------------------------------------------------- votes
def vote_mechanism(noise_multiplier: float) -> GaussianMechanism | None:
    """The Gaussian mechanism of one vote count (sensitivity 1).

    Args:
      noise_multiplier: sigma, the noise std of each count.

    Returns:
      The mechanism, or None for sigma = 0 (exact counts, not private).
    """
    if noise_multiplier == 0:
        return None
    return GaussianMechanism(
        l2_sensitivity=VOTE_SENSITIVITY, noise_multiplier=noise_multiplier
    )


def teacher_logits(nets: GanNets, teachers: Params, x: jax.Array) -> jax.Array:
    """Every teacher's logit on every sample: [k, B] for ``x`` [B, dim]."""
    return jax.vmap(lambda p: nets.discriminator.apply(p, x)[:, 0])(teachers)


def vote_counts(nets: GanNets, teachers: Params, x: jax.Array) -> jax.Array:
    """Number of teachers voting "real" (logit > 0) on each sample: float32 [B]."""
    return jnp.sum(teacher_logits(nets, teachers, x) > 0, axis=0).astype(jnp.float32)


def noisy_vote_counts(
    key: jax.Array, counts: jax.Array, noise_multiplier: jax.typing.ArrayLike
) -> jax.Array:
    """``counts + N(0, sigma^2)`` per sample: B Gaussian queries of sensitivity 1.

    The draw is :meth:`GaussianMechanism.release`'s (the same noise as every other
    release of the library; std = sigma * 1). ``noise_multiplier`` may be traced (0:
    exact counts, not private).
    """
    mech = GaussianMechanism(l2_sensitivity=VOTE_SENSITIVITY, noise_multiplier=1.0)
    unit = mech.release(key, jnp.zeros_like(counts))  # N(0, 1): std 1 * sensitivity 1
    return counts + jnp.asarray(noise_multiplier, counts.dtype) * unit


def vote_labels(
    noisy_counts: jax.Array, num_teachers: int, *, soft: bool = False
) -> jax.Array:
    """The student's labels, post-processing of the released counts.

    Args:
      noisy_counts: [B] released "real" counts.
      num_teachers: The number of teachers k.
      soft: return the noisy share clipped to [0, 1] instead of the majority.

    Returns:
      float32 [B]: 1 where the noisy count exceeds k / 2 (else 0), or with ``soft``
      clip(count / k, 0, 1).
    """
    if soft:
        return jnp.clip(noisy_counts / num_teachers, 0.0, 1.0)
    return (noisy_counts > num_teachers / 2).astype(jnp.float32)


# ------------------------------------------------------------------------------ updates
def _bce_real(logits: jax.Array) -> jax.Array:
    return jax.nn.softplus(-logits)  # -log sigmoid(l)


def _bce_fake(logits: jax.Array) -> jax.Array:
    return jax.nn.softplus(logits)  # -log (1 - sigmoid(l))


def generate(
    nets: GanNets, generator: Params, key: jax.Array, num: int, latent_dim: int
) -> jax.Array:
    """Draws generator samples from N(0, I) latents.

    Args:
      nets: the networks.
      generator: the generator's parameters.
      key: PRNG key of the latents.
      num: samples to draw.
      latent_dim: dimension of the latent.

    Returns:
      [num, d] samples (normalised encoded transitions).
    """
    z = jax.random.normal(key, (num, latent_dim))
    return nets.generator.apply(generator, z)


def _adam_step(tx, params, opt, grads):
    updates, opt = tx.update(grads, opt, params)
    return optax.apply_updates(params, updates), opt


def discriminator_step(
    nets: GanNets,
    params: Params,
    opt: Any,
    real: jax.Array,
    real_mask: jax.Array,
    fake: jax.Array,
) -> tuple[Params, Any, jax.Array]:
    """One BCE step of a discriminator on real (label 1) and fake (label 0) rows.

    Args:
      nets: the networks (the discriminator and the optimiser).
      params: the discriminator's parameters.
      opt: its optimiser state.
      real: [b, d] rows labelled 1.
      real_mask: [b]; rows where it is 0 are ignored.
      fake: [b, d] rows labelled 0.

    Returns:
      ``(params, opt, loss)`` after the step; ``loss`` is the loss before it.
    """

    def loss_fn(p):
        lr = nets.discriminator.apply(p, real)[:, 0]
        lf = nets.discriminator.apply(p, fake)[:, 0]
        w = real_mask.astype(lr.dtype)
        real_term = jnp.sum(w * _bce_real(lr)) / jnp.maximum(jnp.sum(w), 1.0)
        return real_term + jnp.mean(_bce_fake(lf))

    loss, grads = jax.value_and_grad(loss_fn)(params)
    params, opt = _adam_step(nets.tx, params, opt, grads)
    return params, opt, loss


def teacher_step(
    nets: GanNets,
    cfg: PateGanConfig,
    teachers: Params,
    teacher_opt: Any,
    generator: Params,
    partitions: jax.Array,
    counts: jax.Array,
    key: jax.Array,
) -> tuple[Params, Any, jax.Array]:
    """One update of every teacher on its own partition against fresh fakes.

    Teacher ``i``'s batch: ``teacher_batch_size`` indices uniform below ``counts[i]``
    from ``fold_in(key, i)`` into ``partitions[i]`` (an empty partition trains on
    fakes only). A teacher's update reads no other partition.
    """
    k = cfg.num_teachers
    fake = generate(
        nets,
        generator,
        jax.random.fold_in(key, k),
        cfg.teacher_batch_size,
        cfg.latent_dim,
    )

    def one(p, o, rows, n, i):
        u = jax.random.uniform(jax.random.fold_in(key, i), (cfg.teacher_batch_size,))
        idx = jnp.minimum(jnp.floor(u * n).astype(jnp.int32), jnp.maximum(n - 1, 0))
        mask = jnp.broadcast_to(n > 0, idx.shape)
        return discriminator_step(nets, p, o, rows[idx], mask, fake)

    return jax.vmap(one)(teachers, teacher_opt, partitions, counts, jnp.arange(k))


def student_generator_step(
    nets: GanNets,
    cfg: PateGanConfig,
    student: Params,
    student_opt: Any,
    generator: Params,
    generator_opt: Any,
    queried: jax.Array,
    labels: jax.Array,
    key: jax.Array,
) -> tuple[Params, Any, Params, Any, dict[str, jax.Array]]:
    """Updates the student on the labelled samples, then the generator against it.

    ``student_steps`` student updates, then ``generator_steps`` generator updates. The
    arguments are everything the student and the generator learn from: the generator's
    own samples, their released noisy-vote labels and a public key. No sensitive row is
    an argument.

    Args:
      nets: the networks.
      cfg: the step counts and sizes.
      student: the student's parameters.
      student_opt: its optimiser state.
      generator: the generator's parameters.
      generator_opt: its optimiser state.
      queried: [B, d] the generator's samples of this round.
      labels: [B] their labels (:func:`vote_labels`).
      key: public PRNG key of the generator's latents.

    Returns:
      ``(student, student_opt, generator, generator_opt, metrics)``; ``metrics`` holds
      the last ``student_loss`` and ``generator_loss``.
    """

    def s_loss(p):
        logits = nets.discriminator.apply(p, queried)[:, 0]
        return jnp.mean(labels * _bce_real(logits) + (1 - labels) * _bce_fake(logits))

    def s_body(carry, _):
        p, o = carry
        loss, g = jax.value_and_grad(s_loss)(p)
        p, o = _adam_step(nets.tx, p, o, g)
        return (p, o), loss

    (student, student_opt), s_losses = jax.lax.scan(
        s_body, (student, student_opt), None, length=cfg.student_steps
    )

    def g_loss(g, k):
        x = generate(nets, g, k, cfg.generator_batch_size, cfg.latent_dim)
        return jnp.mean(_bce_real(nets.discriminator.apply(student, x)[:, 0]))

    def g_body(carry, i):
        g, o = carry
        loss, grads = jax.value_and_grad(g_loss)(g, jax.random.fold_in(key, i))
        g, o = _adam_step(nets.tx, g, o, grads)
        return (g, o), loss

    (generator, generator_opt), g_losses = jax.lax.scan(
        g_body, (generator, generator_opt), jnp.arange(cfg.generator_steps)
    )
    metrics = {"student_loss": s_losses[-1], "generator_loss": g_losses[-1]}
    return student, student_opt, generator, generator_opt, metrics


def round_keys(key: jax.Array, round_index: jax.typing.ArrayLike):
    """The public (teacher, query, generator) keys of a round, addressed by its index.

    Args:
      key: the run's public key.
      round_index: the round's index (may be traced).

    Returns:
      Three PRNG keys.
    """
    k = jax.random.fold_in(key, round_index)
    return jax.random.fold_in(k, 0), jax.random.fold_in(k, 1), jax.random.fold_in(k, 2)


def pategan_round(
    nets: GanNets,
    cfg: PateGanConfig,
    state: PateGanState,
    partitions: jax.Array,
    counts: jax.Array,
    key: jax.Array,
    noise_key: jax.Array,
    round_index: jax.typing.ArrayLike,
    noise_multiplier: jax.typing.ArrayLike,
) -> tuple[PateGanState, dict[str, jax.Array]]:
    """One PATE-GAN round: teachers, B noisy votes, student and generator.

    Args:
      nets: the networks.
      cfg: the sizes.
      state: the current state.
      partitions: [k, cap, d] sensitive rows by partition (:func:`partition_rows`).
      counts: int [k] partition sizes.
      key: public key of the run (fakes, batches); the round uses
        :func:`round_keys` of it.
      noise_key: the secret key of the vote noise; the round's noise is
        ``fold_in(noise_key, round_index)``.
      round_index: the round's index (int, may be traced).
      noise_multiplier: sigma of each vote count.

    Returns:
      (new state, metrics); ``metrics["noisy_counts"]`` [B] is what the round
      releases, ``metrics["queried"]`` [B, d] the samples they label.
    """
    k_teach, k_query, k_gen = round_keys(key, round_index)

    def t_body(carry, i):
        t, o = carry
        t, o, loss = teacher_step(
            nets,
            cfg,
            t,
            o,
            state.generator,
            partitions,
            counts,
            jax.random.fold_in(k_teach, i),
        )
        return (t, o), jnp.mean(loss)

    (teachers, teacher_opt), t_losses = jax.lax.scan(
        t_body, (state.teachers, state.teacher_opt), jnp.arange(cfg.teacher_steps)
    )
    queried = generate(
        nets, state.generator, k_query, cfg.queries_per_round, cfg.latent_dim
    )
    noisy = noisy_vote_counts(
        jax.random.fold_in(noise_key, round_index),
        vote_counts(nets, teachers, queried),
        noise_multiplier,
    )
    labels = vote_labels(noisy, cfg.num_teachers, soft=cfg.soft_labels)
    student, student_opt, generator, generator_opt, m = student_generator_step(
        nets,
        cfg,
        state.student,
        state.student_opt,
        state.generator,
        state.generator_opt,
        queried,
        labels,
        k_gen,
    )
    new = PateGanState(
        generator, generator_opt, student, student_opt, teachers, teacher_opt
    )
    return new, {
        **m,
        "teacher_loss": t_losses[-1],
        "label_mean": jnp.mean(labels),
        "noisy_counts": noisy,
        "queried": queried,
    }


def make_pategan_chunk(nets: GanNets, cfg: PateGanConfig, num_rounds: int):
    """Builds a jitted scan over ``num_rounds`` PATE-GAN rounds.

    Args:
      nets: the networks.
      cfg: the sizes.
      num_rounds: rounds per call; each costs B Gaussian queries.

    Returns:
      ``chunk(state, partitions, counts, key, noise_key, start, sigma) -> (state,
      metrics)``: runs rounds ``start .. start + num_rounds - 1`` (see
      :func:`pategan_round`) and returns the last round's metrics without the
      per-sample arrays.
    """

    @jax.jit
    def chunk(state, partitions, counts, key, noise_key, start, sigma):
        def body(st, r):
            st, m = pategan_round(
                nets, cfg, st, partitions, counts, key, noise_key, r, sigma
            )
            return st, {
                k: v for k, v in m.items() if k not in ("noisy_counts", "queried")
            }

        state, ms = jax.lax.scan(body, state, start + jnp.arange(num_rounds))
        return state, jax.tree_util.tree_map(lambda v: v[-1], ms)

    return chunk


# ---------------------------------------------------------------------- init, pre-train
def init_pategan(
    key: jax.Array,
    nets: GanNets,
    cfg: PateGanConfig,
    dim: int,
    *,
    generator: Params | None = None,
    discriminator: Params | None = None,
) -> PateGanState:
    """Builds a fresh PATE-GAN state.

    Args:
      key: PRNG key of the networks that are initialised at random.
      nets: the networks.
      cfg: the sizes (``num_teachers``, ``latent_dim``).
      dim: d, width of a row.
      generator: public initial generator parameters (e.g. :func:`pretrain_gan`'s),
        or None for a random initialisation.
      discriminator: public initial discriminator parameters copied into the student
        and every teacher, or None for random ones (a different draw each).

    Returns:
      A `PateGanState` with fresh optimiser states.
    """
    return _init(key, nets, cfg, dim, generator, discriminator)


@functools.partial(jax.jit, static_argnames=("nets", "cfg", "dim"))
def _init(key, nets, cfg, dim, generator, discriminator) -> PateGanState:
    kg, ks, kt = jax.random.split(key, 3)
    if generator is None:
        generator = nets.generator.init(kg, jnp.zeros((1, cfg.latent_dim)))
    x0 = jnp.zeros((1, dim))
    if discriminator is None:
        student = nets.discriminator.init(ks, x0)
        teachers = jax.vmap(lambda k_: nets.discriminator.init(k_, x0))(
            jax.random.split(kt, cfg.num_teachers)
        )
    else:
        student = discriminator
        teachers = jax.tree_util.tree_map(
            lambda a: jnp.broadcast_to(a, (cfg.num_teachers, *a.shape)), discriminator
        )
    return PateGanState(
        generator,
        nets.tx.init(generator),
        student,
        nets.tx.init(student),
        teachers,
        jax.vmap(nets.tx.init)(teachers),
    )


@functools.partial(jax.jit, static_argnames=("nets", "cfg", "steps"))
def _pretrain(nets, cfg, gen, gen_opt, disc, disc_opt, rows, key, steps):
    b = cfg.teacher_batch_size

    def body(carry, s):
        g, go, d, do = carry
        ks = jax.random.fold_in(key, s)
        idx = jax.random.randint(jax.random.fold_in(ks, 0), (b,), 0, rows.shape[0])
        fake = generate(nets, g, jax.random.fold_in(ks, 1), b, cfg.latent_dim)
        d, do, dl = discriminator_step(nets, d, do, rows[idx], jnp.ones(b), fake)

        def g_loss(gp):
            x = generate(nets, gp, jax.random.fold_in(ks, 2), b, cfg.latent_dim)
            return jnp.mean(_bce_real(nets.discriminator.apply(d, x)[:, 0]))

        gl, grads = jax.value_and_grad(g_loss)(g)
        g, go = _adam_step(nets.tx, g, go, grads)
        return (g, go, d, do), (dl, gl)

    (gen, _, disc, _), (dl, gl) = jax.lax.scan(
        body, (gen, gen_opt, disc, disc_opt), jnp.arange(steps)
    )
    return gen, disc, dl[-1], gl[-1]


def pretrain_gan(
    key: jax.Array,
    nets: GanNets,
    cfg: PateGanConfig,
    public_rows: jax.Array,
    *,
    steps: int,
) -> tuple[Params, Params, dict[str, float]]:
    """Trains a non-private GAN on PUBLIC rows only (PrePATE-GAN's pre-training).

    Args:
      key: public key.
      nets: the networks.
      cfg: the sizes (``teacher_batch_size`` rows a step).
      public_rows: [M, dim] public encoded, normalised transitions: never sensitive
        ones (the result initialises the released model without any noise).
      steps: discriminator + generator updates.

    Returns:
      (generator params, discriminator params, final losses
      ``{"discriminator_loss", "generator_loss"}``).

    Raises:
      ValueError: ``public_rows`` is not [M >= 1, d].
    """
    public_rows = jnp.asarray(public_rows, jnp.float32)
    if public_rows.ndim != 2 or public_rows.shape[0] < 1:
        raise ValueError(f"public_rows must be [M >= 1, d]; got {public_rows.shape}.")
    kg, kd, kr = jax.random.split(key, 3)
    gen = nets.generator.init(kg, jnp.zeros((1, cfg.latent_dim)))
    disc = nets.discriminator.init(kd, jnp.zeros((1, public_rows.shape[1])))
    gen, disc, dl, gl = _pretrain(
        nets,
        cfg,
        gen,
        nets.tx.init(gen),
        disc,
        nets.tx.init(disc),
        public_rows,
        kr,
        steps,
    )
    return gen, disc, {"discriminator_loss": float(dl), "generator_loss": float(gl)}
