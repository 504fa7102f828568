"""The failure model: P_hit's exact cases and its value against the closed form."""

from __future__ import annotations

import random

import pytest

from mrcemu.atscale.clos import Clos
from mrcemu.atscale.failure import idle_share, p_hit, step_links
from mrcemu.atscale.step import Transport

HASHED = Transport(sprayed=False)


def test_a_sprayed_step_crosses_every_link_of_every_leaf():
    fab = Clos(hosts=16, hosts_per_leaf=4, spines=4, planes=8)
    assert p_hit(fab, Transport(sprayed=True), 200, seed=1) == 1.0


def test_one_spine_carries_every_flow():
    assert p_hit(Clos(hosts=8, hosts_per_leaf=4, spines=1), HASHED, 100, seed=1) == 1.0


def test_a_hashed_step_matches_the_closed_form():
    # A link (leaf, spine) carries the leaf's h flows out and h flows in, each on that
    # spine with chance 1/a, independently (ACKs retrace their data): missed with
    # (1 - 1/a)^(2h).
    fab = Clos(hosts=32, hosts_per_leaf=4, spines=8)
    assert p_hit(fab, HASHED, 3000, seed=2) == pytest.approx(1 - (7 / 8) ** 8, abs=0.03)
    four = Clos(hosts=16, hosts_per_leaf=4, spines=4)
    assert p_hit(four, HASHED, 3000, seed=2) == pytest.approx(1 - (3 / 4) ** 8, abs=0.03)
    # more QPs a pair, more draws that may cross it
    assert p_hit(four, Transport(sprayed=False, qps=4), 2000, seed=2) > 0.99


def test_a_steps_links_are_the_hashed_paths_of_its_flows_both_ways():
    fab = Clos(hosts=8, hosts_per_leaf=4, spines=4)
    dst = [4, 5, 6, 7, 0, 1, 2, 3]
    used = step_links(fab, dst, HASHED, random.Random(1))
    assert used is not None and all(p == 0 and leaf in (0, 1) and 0 <= s < 4
                                    for p, leaf, s in used)
    # each flow crosses one link at its source's leaf and one at its peer's
    assert len(used) <= 16 and {leaf for _, leaf, _ in used} == {0, 1}
    assert step_links(fab, dst, Transport(sprayed=True), random.Random(1)) is None


def test_the_seed_gives_the_same_chance_twice():
    fab = Clos(hosts=32, hosts_per_leaf=4, spines=8)
    assert p_hit(fab, HASHED, 300, seed=5) == p_hit(fab, HASHED, 300, seed=5)


def test_idle_share_is_the_stall_rate_while_small_and_never_reaches_one():
    # 5 flaps a minute, every one touching the step, 2 s each: 1/6 of the time waiting
    assert idle_share(5, 1.0, 2.0) == pytest.approx((1 / 6) / (1 + 1 / 6))
    assert idle_share(1, 1.0, 3 * 13e-6) == pytest.approx(3 * 13e-6 / 60, rel=1e-4)
    assert idle_share(14, 1.0, 1e6) < 1 and idle_share(0, 1.0, 2.0) == 0
