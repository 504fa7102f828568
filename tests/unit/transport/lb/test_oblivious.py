"""Oblivious spraying: uniform draws from a plane's usable EVs, deaf to feedback."""

from __future__ import annotations

from collections import Counter

from mrcemu.transport.lb import Feedback
from tests.unit.transport.lb.helpers import plane_evs, profile_with


def test_draws_are_uniform_within_a_statistical_bound_and_not_a_permutation():
    prof = profile_with("oblivious", seed=7)
    usable = plane_evs(prof, 3)
    counts: Counter[int] = Counter()
    repeats = 0
    for i in range(2000):
        picks = prof.policy.choose(3, usable, now=i * 1e-3)
        assert len(picks) == len(usable) and set(picks) <= {e.ev for e in usable}
        counts.update(picks)
        repeats += len(set(picks)) < len(picks)
    n, k = 2000 * len(usable), len(usable)
    mean, sd = n / k, (n * (1 / k) * (1 - 1 / k)) ** 0.5
    # five standard deviations of a binomial count: fails about once in 10^6 seeds
    assert all(abs(c - mean) <= 5 * sd for c in counts.values()), counts
    assert len(counts) == k
    # With replacement: most rotations of four draws repeat an EV (1 - 4!/4^4 = 0.91).
    assert repeats > 0.8 * 2000


def test_feedback_changes_nothing():
    a, b = profile_with("oblivious", seed=3), profile_with("oblivious", seed=3)
    usable_a, usable_b = plane_evs(a, 0), plane_evs(b, 0)
    for what in Feedback:
        a.policy.hear(usable_a[0], what, 1.0, 3)
    assert [a.policy.choose(0, usable_a, 2.0) for _ in range(20)] == [
        b.policy.choose(0, usable_b, 2.0) for _ in range(20)]
