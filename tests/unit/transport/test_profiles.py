"""QP numbers (transport/profiles.py): what a number says, and a pair made again on the
next generation's, as the factory makes its connections."""

from __future__ import annotations

import pytest

from mrcemu.topology import load
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.factory import make_connection
from mrcemu.transport.profiles import GEN_STRIDE, GENERATIONS, MAX_QPS, qp_of, qpn


def test_a_qp_number_says_transport_peer_qp_and_generation_and_fits_24_bits():
    for transport, qps in (("mrc", 1), ("roce", MAX_QPS)):
        for k in range(qps):
            for gen in (0, 1, GENERATIONS - 1):
                q = qpn(5, transport, k, gen)
                assert q < 1 << 24
                assert qp_of(q, hosts=8) == (transport, 5, k, gen)
    assert qpn(5, "mrc", 0, GENERATIONS + 3) == qpn(5, "mrc", 0, 3)  # it wraps
    assert qp_of(qpn(5) + 0x300, hosts=8) is None  # a peer the fabric lacks
    with pytest.raises(ValueError, match="a pair has 1 at most"):
        qpn(5, "mrc", 1)


def test_a_pair_made_again_has_new_qp_numbers_and_the_same_paths_and_choices():
    topo, cfg = load("default"), TransportConfig(seed=4)
    for transport in ("mrc", "roce"):
        first = make_connection(transport, topo, 0, 7, cfg)
        again = make_connection(transport, topo, 0, 7, cfg, gen=1)
        assert (again.local_qpn, again.remote_qpn) == (first.local_qpn + GEN_STRIDE,
                                                       first.remote_qpn + GEN_STRIDE)
        assert list(again.profile.evs) == list(first.profile.evs)  # RoCE's hashed flows too
    a = make_connection("mrc", topo, 0, 7, cfg)
    b = make_connection("mrc", topo, 0, 7, cfg, gen=1)
    assert [a.reverse._rng.random() for _ in range(4)] == [b.reverse._rng.random()
                                                          for _ in range(4)]


def test_a_newer_generation_is_ahead_by_less_than_half_the_numbers_wrapping():
    from mrcemu.transport.profiles import GENERATIONS, newer_generation

    assert newer_generation(1, 0) and newer_generation(0, GENERATIONS - 1)
    assert not newer_generation(0, 0) and not newer_generation(0, 1)
    assert not newer_generation(GENERATIONS // 2, 0)  # as far behind as ahead: not newer


def test_the_flow_a_census_probes_is_the_one_a_roce_qp_starts_on():
    from mrcemu.transport.factory import roce_first_flow

    for name in ("ecmp", "rack4-ecmp"):
        topo, cfg = load(name), TransportConfig(seed=4)
        for a, b in ((0, 5), (5, 0), (3, topo.hosts - 1)):
            for k in range(3):
                c = make_connection("roce", topo, a, b, cfg, qp=k)
                assert roce_first_flow(topo, a, b, c.local_qpn, c.remote_qpn) == c.dp.ev
