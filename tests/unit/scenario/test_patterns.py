"""Synchronous jobs' steps: every permutation crosses leaves and is a permutation, each
step draws its own from the seed, and a shifted all-to-all covers every pair once."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu.scenario.patterns import (
    cross_leaf_permutation,
    permutation_steps,
    shifted_all_to_all,
    step_ideal_s,
)


@settings(deadline=None)  # a draw may take many tries: its time is no verdict
@given(st.sampled_from([(2, 4), (4, 4), (4, 8), (8, 8), (3, 2)]), st.integers(0, 2**31))
def test_a_cross_leaf_permutation_sends_every_host_to_another_leaf_once(shape, seed):
    leaves, per = shape
    leaf_of = [h // per for h in range(leaves * per)]
    dst = cross_leaf_permutation(leaf_of, random.Random(seed))
    assert sorted(dst) == list(range(len(leaf_of)))  # each host written to once
    assert all(leaf_of[h] != leaf_of[d] for h, d in enumerate(dst))


def test_each_step_draws_its_own_permutation_and_a_seed_draws_the_same_again():
    leaf_of = [h // 4 for h in range(16)]
    a = permutation_steps(leaf_of, 100, 20, seed=7)
    assert a == permutation_steps(leaf_of, 100, 20, seed=7)
    assert a != permutation_steps(leaf_of, 100, 20, seed=8)
    assert len({tuple(d for _s, d, _n in step) for step in a}) > 15  # not one draw, 20 times
    # uniform enough: over many steps, every cross-leaf pair is drawn
    many = permutation_steps(leaf_of, 1, 400, seed=1)
    pairs = Counter((s, d) for step in many for s, d, _n in step)
    assert len(pairs) == 16 * 12


def test_a_leaf_of_more_than_half_the_hosts_cannot_be_crossed():
    with pytest.raises(ValueError, match="more than half"):
        cross_leaf_permutation([0, 0, 0, 1], random.Random(1))


def test_a_shifted_all_to_all_writes_every_pair_once_one_write_a_host_a_step():
    steps = shifted_all_to_all(8, 5)
    assert len(steps) == 7
    assert sorted((s, d) for st_ in steps for s, d, _n in st_) == [
        (a, b) for a in range(8) for b in range(8) if a != b]
    for st_ in steps:
        assert sorted(s for s, _d, _n in st_) == sorted(d for _s, d, _n in st_) == list(range(8))


def test_a_steps_ideal_is_its_busiest_hosts_bytes_at_line_rate():
    assert step_ideal_s([(0, 1, 100), (2, 1, 100), (1, 0, 50)], 100.0) == 2.0  # h1 receives 200
    assert step_ideal_s([], 100.0) == 0.0
