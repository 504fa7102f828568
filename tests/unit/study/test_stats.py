"""The study's statistics (study/stats.py): a fit that tells a uniform hash from a biased
one, bins merged as Pearson's rule asks, and the busiest link's expectation exact."""

from __future__ import annotations

import itertools
import random

import pytest

from mrcemu.study.stats import MIN_EXPECTED, binomial_fit, expected_max_load


def hashed_loads(rng: random.Random, n: int, links: int, weights: list[float],
                 leaves: int) -> list[int]:
    """Link 0's load at each of `leaves` leaves, each hashing `n` flows by `weights`."""
    return [sum(1 for _ in range(n) if rng.choices(range(links), weights)[0] == 0)
            for _ in range(leaves)]


def test_a_uniform_hash_fits_its_binomial():
    loads = hashed_loads(random.Random(3), 8, 8, [1] * 8, 4000)
    fit = binomial_fit(loads, 8, 1 / 8)
    assert fit.p_value is not None and fit.p_value > 0.01
    assert fit.observations == 4000 and abs(fit.mean - 1.0) < 0.1


def test_a_hash_that_favours_one_spine_is_caught():
    # link 0 takes 0.2 of the flows where a uniform hash gives it 0.125
    loads = hashed_loads(random.Random(3), 8, 8, [0.2] + [0.8 / 7] * 7, 4000)
    fit = binomial_fit(loads, 8, 1 / 8)
    assert fit.p_value is not None and fit.p_value < 1e-6


def test_bins_are_merged_until_each_expects_enough_and_keep_every_observation():
    loads = hashed_loads(random.Random(5), 16, 4, [1] * 4, 300)
    fit = binomial_fit(loads, 16, 1 / 4)
    assert all(b.expected >= MIN_EXPECTED for b in fit.bins)
    assert sum(b.observed for b in fit.bins) == 300
    assert fit.bins[0].lo == 0 and fit.bins[-1].hi == 16
    assert all(a.hi + 1 == b.lo for a, b in zip(fit.bins, fit.bins[1:], strict=False))
    assert fit.dof == len(fit.bins) - 1


def test_loads_outside_the_binomial_are_refused():
    with pytest.raises(ValueError, match="outside 0..4"):
        binomial_fit([1, 5], 4, 0.25)
    with pytest.raises(ValueError, match="no loads"):
        binomial_fit([], 4, 0.25)


@pytest.mark.parametrize(("n", "links"), [(4, 2), (3, 3), (5, 4), (6, 3), (1, 4), (0, 2)])
def test_the_busiest_links_expectation_is_exact(n, links):
    ways = list(itertools.product(range(links), repeat=n))
    brute = sum(max((w.count(k) for k in range(links)), default=0) for w in ways) / len(ways)
    assert expected_max_load(n, links) == pytest.approx(brute, abs=1e-9)
