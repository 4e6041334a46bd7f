"""The many-run audit of a private selection (AIM's exponential mechanism): the
worst-case pair's closed form, a correct mechanism audited just under its epsilon, a
leaky one caught, and the ledger's exponential-mechanism groups audited."""

import math

import dp_accounting
import numpy as np
import pytest

from privrl_jax import pipelines, privacy
from privrl_jax.privacy import audit
from privrl_jax.privacy._audit_selection import worst_case_score_pair


def _pair_closed_form(eps: float, k: int) -> float:
    a = eps / 2
    return math.log(math.exp(a) * (1 + (k - 1) * math.exp(a)) / (math.exp(a) + k - 1))


@pytest.mark.parametrize("eps,k", [(0.03, 78), (1.0, 100), (2.0, 10), (8.0, 2)])
def test_the_worst_case_pairs_epsilon_is_its_closed_form_and_below_epsilon(eps, k):
    em = privacy.ExponentialMechanism(epsilon=eps, sensitivity=22.0)
    s, t = worst_case_score_pair(k, 22.0)
    assert np.all(np.abs(s - t) == 22.0)  # every score moves by the sensitivity
    got = audit.selection_epsilon(em, s, t)
    # The mechanism's logits are float32 (what it draws from), hence rel 1e-6.
    assert got == pytest.approx(_pair_closed_form(eps, k), rel=1e-6)
    assert got < eps
    # For a small epsilon the pair reaches eps (1 - 1/K) to first order.
    if eps < 0.1:
        assert got == pytest.approx(eps * (1 - 1 / k), rel=eps)


class _MissingHalf(privacy.ExponentialMechanism):
    """A known bug: logits eps * score / Delta, twice the claimed epsilon."""

    def logits(self, scores):
        return 2.0 * super().logits(scores)


def _margin(p: float, q: float, n: int) -> float:
    # Five binomial standard deviations of log p + log q: the Clopper-Pearson intervals
    # (about 2.24 sd each side at 95%) plus the draw's own deviation.
    return 5 * (math.sqrt((1 - p) / (n * p)) + math.sqrt((1 - q) / (n * q)))


def _event_probabilities(em, s, t):
    import scipy.special

    p = scipy.special.softmax(np.asarray(em.logits(s), np.float64))[0]
    q = scipy.special.softmax(np.asarray(em.logits(t), np.float64))[0]
    return p, q


def test_a_correct_exponential_mechanism_is_audited_just_under_its_epsilon():
    em = privacy.ExponentialMechanism(epsilon=2.0, sensitivity=3.0)
    s, t = worst_case_score_pair(10, 3.0)
    n = 50_000
    res = audit.audit_selection(em, s, t, trials=n, seed=0)
    p, q = _event_probabilities(em, s, t)
    assert res.epsilon_of_pair == pytest.approx(_pair_closed_form(2.0, 10), rel=1e-6)
    assert res.epsilon_demonstrated <= res.epsilon_of_pair < em.epsilon
    assert res.epsilon_demonstrated >= res.epsilon_of_pair - _margin(p, q, n)
    assert not res.violation
    # The counts are those of the softmax law.
    assert abs(res.hits / n - p) <= 5 * math.sqrt(p * (1 - p) / n)
    assert abs(res.neighbour_hits / n - q) <= 5 * math.sqrt(q * (1 - q) / n)


def test_a_mechanism_with_twice_its_epsilon_is_caught():
    bad = _MissingHalf(epsilon=2.0, sensitivity=3.0)
    s, t = worst_case_score_pair(10, 3.0)
    n = 50_000
    res = audit.audit_selection(bad, s, t, trials=n, seed=0)
    p, q = _event_probabilities(bad, s, t)
    assert res.epsilon_of_pair == pytest.approx(_pair_closed_form(4.0, 10), rel=1e-6)
    assert res.epsilon_demonstrated >= res.epsilon_of_pair - _margin(p, q, n)
    assert res.epsilon_demonstrated > bad.epsilon and res.violation


def test_the_audit_refuses_mismatched_pairs_and_events():
    em = privacy.ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    with pytest.raises(ValueError, match="same length"):
        audit.audit_selection(em, np.zeros(3), np.zeros(4), trials=10)
    with pytest.raises(ValueError, match="event"):
        audit.audit_selection(em, np.zeros(3), np.zeros(3), event=3, trials=10)
    with pytest.raises(ValueError, match="num_candidates"):
        worst_case_score_pair(1, 1.0)


def test_the_ledgers_exponential_mechanism_groups_are_audited(tmp_path):
    em = privacy.ExponentialMechanism(epsilon=1.5, sensitivity=22.0)
    ledger = privacy.Ledger.open(
        tmp_path,
        dataset_id="x",
        dataset_size=10,
        target_epsilon=50.0,
        target_delta=1e-6,
    )
    for _ in range(3):
        ledger.record(em.event(), what="selection", params=em.describe())
    (row,) = audit.audit_ledger(ledger, selection_trials=50_000, seed=1)
    assert row["audited"] and row["count"] == 3
    composed = dp_accounting.SelfComposedDpEvent(em.event(), 3)
    assert row["epsilon_accounted"] == pytest.approx(
        privacy.compute_epsilon(composed, 1e-6).epsilon, rel=1e-12
    )
    assert row["epsilon_accounted_per_selection"] == 1.5
    sel = row["selection_audit"]
    assert sel["delta"] == 1e-6 and sel["trials"] == 50_000
    # 100 candidates at the recorded sensitivity; the bound is under one selection's
    # epsilon and sees most of it.
    s, t = worst_case_score_pair(100, 22.0)
    p, q = _event_probabilities(em, s, t)
    assert sel["epsilon_of_pair"] == pytest.approx(
        _pair_closed_form(1.5, 100), rel=1e-6
    )
    assert (
        sel["epsilon_of_pair"] - _margin(p, q, 50_000)
        <= row["epsilon_demonstrated"]
        <= sel["epsilon_of_pair"]
    )
    assert row["violation"] is False
    # The report's line says what was audited: one selection, not m canaries.
    (line,) = pipelines.audit_lines({"canaries": 1000, "rows": [row]})
    assert line.startswith("3 x selection: epsilon accounted ")
    assert "(1.5 a selection)" in line and "for one selection" in line
    assert "50,000 draws a side" in line and "canaries" not in line


def test_a_replace_one_selection_is_audited_too(tmp_path):
    """No canary is added, so the relation does not stop the selection audit."""
    em = privacy.ExponentialMechanism(
        epsilon=1.0,
        sensitivity=2.0,
        neighboring=privacy.Neighboring.REPLACE_ONE,
    )
    ledger = privacy.Ledger.open(
        tmp_path, dataset_id="x", dataset_size=10, target_epsilon=5.0, target_delta=1e-6
    )
    ledger.record(em.event(), what="selection", params=em.describe())
    (row,) = audit.audit_ledger(ledger, selection_trials=20_000, seed=2)
    assert row["audited"] and not row["violation"]
    assert 0 < row["epsilon_demonstrated"] <= row["selection_audit"]["epsilon_of_pair"]
