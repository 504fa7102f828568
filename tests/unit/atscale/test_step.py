"""The model's synchronous step: its fluid time on cases known by hand, and its Monte
Carlo against the census's equal-share figures (uniform hash, one QP a pair)."""

from __future__ import annotations

import random

import pytest

from mrcemu.atscale.clos import Clos
from mrcemu.atscale.step import Transport, permutation_efficiency, step_time

HASHED, SPRAYED = Transport(sprayed=False), Transport(sprayed=True)


class _Fixed(random.Random):
    """A hash that always picks the first choice: every QP on spine 0."""

    def randrange(self, *_a, **_k) -> int:
        return 0


def test_every_flow_of_a_leaf_on_one_spine_takes_four_times_as_long():
    fab = Clos(hosts=8, hosts_per_leaf=4, spines=4)
    pairs = [(h, (h + 4) % 8) for h in range(8)]
    assert step_time(fab, pairs, HASHED, _Fixed()) == pytest.approx(4.0)


def test_sprayed_flows_never_collide_and_a_transports_efficiency_stretches_the_step():
    fab = Clos(hosts=16, hosts_per_leaf=4, spines=4, planes=8)
    pairs = [(h, (h + 4) % 16) for h in range(16)]
    assert step_time(fab, pairs, SPRAYED, random.Random(1)) == pytest.approx(1 / 8)
    assert step_time(fab, pairs, Transport(True, efficiency=0.5),
                     random.Random(1)) == pytest.approx(2 / 8)


def test_flows_that_finish_free_the_link_for_the_rest():
    # two leaves of two hosts, one spine: h0's flow and h1's share an uplink at 0.5;
    # with h1's half the size... every pair moves one unit: both end at 2
    fab = Clos(hosts=4, hosts_per_leaf=2, spines=1)
    assert step_time(fab, [(0, 2), (1, 3)], HASHED, random.Random(1)) == pytest.approx(2.0)


@pytest.mark.parametrize("fab,census", [(Clos(8, 4, 4), 0.44), (Clos(16, 4, 4), 0.35)])
def test_one_qp_a_pair_gives_the_equal_share_step_the_census_computed(fab, census):
    # a step waits for its busiest link, whose flows keep 1/k until they all end
    band = permutation_efficiency(fab, HASHED, draws=300, seed=2)
    assert band.mean == pytest.approx(census, abs=0.03)
    assert band.p10 <= band.mean <= band.p90


def test_more_qps_a_pair_even_the_load_and_spraying_removes_it():
    fab = Clos(16, 4, 4)
    one = permutation_efficiency(fab, HASHED, 100, seed=3).mean
    four = permutation_efficiency(fab, Transport(False, qps=4), 100, seed=3).mean
    assert one < four < 1.0
    assert permutation_efficiency(fab, SPRAYED, 5, seed=3).mean == pytest.approx(1.0)


def test_three_tiers_send_a_cross_pod_flow_through_a_core_and_spraying_still_fills_ports():
    fab = Clos(hosts=16, hosts_per_leaf=2, spines=2, pods=2, cores=2)
    hops = [link[0] for link in fab.path(0, 15, 0, 1, 1, 0)]
    assert hops == ["up", "l2s", "s2c", "c2s", "s2l", "down"]
    assert [link[0] for link in fab.path(0, 2, 0, 1)] == ["up", "l2s", "s2l", "down"]
    use = fab.sprayed(0, 15)
    assert sum(w for link, w in use.items() if link[0] == "s2c") == pytest.approx(1.0)
    pairs = [(h, (h + 8) % 16) for h in range(16)]  # every flow to the other pod
    assert step_time(fab, pairs, SPRAYED, random.Random(1)) == pytest.approx(1.0)
