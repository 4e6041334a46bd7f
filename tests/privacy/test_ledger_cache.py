"""The ledger's accounting caches change no bit of its epsilon,
and survive no reload."""

import dp_accounting
import pytest

from privrl_jax import privacy
from privrl_jax.privacy import _accounting

DELTA = 1e-5
# Cheap events (wide noise, tiny capacity): each PLD builds in well under a second.
TRUNC = dp_accounting.TruncatedSubsampledGaussianDpEvent(
    dataset_size=10,
    sampling_probability=0.1,
    truncated_batch_size=1,
    noise_multiplier=8.0,
)
POISSON = dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(8.0))
GAUSS = dp_accounting.GaussianDpEvent(20.0)


def _uncached(event):
    # dp-accounting's own accountant, built fresh: what the ledger computed before.
    return float(
        _accounting.make_accountant(
            "pld", dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
        )
        .compose(event)
        .get_epsilon(DELTA)
    )


def _ledger(tmp_path):
    return privacy.Ledger.open(
        tmp_path,
        dataset_id="toy",
        dataset_size=1000,
        target_epsilon=1e3,
        target_delta=DELTA,
    )


def test_the_cached_epsilon_is_bit_identical_along_a_chain(tmp_path):
    ledger = _ledger(tmp_path)
    chain = [(TRUNC, 3), (TRUNC, 2), (POISSON, 4), (GAUSS, 1)]
    for event, count in chain:
        # The budget check of the next entry, then the epsilon after recording it.
        after = ledger.check(event, count, accountant="pld")
        assert after == _uncached(ledger.event([(event, count)]))
        ledger.record(event, what="toy", count=count)
        assert ledger.epsilon("pld").epsilon == _uncached(ledger.event())
    # The truncated step's PLD was built once for the whole chain, the Poisson one once.
    assert ledger._pld_cache.builds == 2
    # Asking again is a lookup, with the same report.
    assert ledger.epsilon("pld") == ledger.epsilon("pld")
    # A reloaded ledger starts with empty caches and recomputes the same bits.
    loaded = privacy.Ledger.load(tmp_path)
    assert loaded._pld_cache.builds == 0 and not loaded._epsilons
    assert loaded.epsilon("pld").epsilon == ledger.epsilon("pld").epsilon
    assert loaded._pld_cache.builds == 2


def test_a_changed_chain_misses_the_cache(tmp_path):
    # The cache is keyed on content: the same ledger object whose entries change (as an
    # in-memory edit would) gets the new chain's epsilon, never the old one's.
    ledger = _ledger(tmp_path)
    ledger.record(TRUNC, what="toy", count=4)
    before = ledger.epsilon("pld").epsilon
    ledger.record(TRUNC, what="toy", count=1)
    assert ledger.epsilon("pld").epsilon > before
    ledger.releases.pop()
    assert ledger.epsilon("pld").epsilon == before


def test_the_cache_is_bounded():
    cache = _accounting.PLDCache(max_entries=2)
    for key in "abc":
        cache.get(key, lambda k=key: k)
    assert cache.builds == 3 and cache.get("a", lambda: "rebuilt") == "rebuilt"
    with pytest.raises(ValueError, match="max_entries"):
        _accounting.PLDCache(max_entries=0)
