"""Both transports keep one contract: the daemon drives either with the same calls, and
each reports what happened as typed events instead of growing lists."""

from __future__ import annotations

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.topology import load
from mrcemu.transport.base import Connection
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import MessageCompleted, MessageReceived
from mrcemu.transport.factory import TRANSPORTS, make_connection
from mrcemu.transport.memory import MemoryTable
from mrcemu.transport.simnet import SimNet
from tests.unit.transport.helpers import drain

CONTRACT = [n for n in dir(Connection) if not n.startswith("_")] + [
    "local_qpn", "remote_qpn", "stats", "tx_trace", "profile"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_either_transport_delivers_under_the_one_contract(transport):
    topo = load("default")
    cfg = TransportConfig.for_topology(topo)
    ca = make_connection(transport, topo, 0, 7, cfg)
    cb = make_connection(transport, topo, 7, 0, cfg, MemoryTable())
    for c in (ca, cb):
        assert [n for n in CONTRACT if not hasattr(c, n)] == []
    net = SimNet()
    net.attach("h0", ca, "h7")
    net.attach("h7", cb, "h0")
    mr = cb.memory.register(3 << 16)
    sizes = [1 << 16, 2 << 16]
    msns = [ca.post_write(bytes([k + 1]) * n, mr.base + k * (1 << 16), mr.rkey, 0.0)
            for k, n in enumerate(sizes)]
    assert sum(m.size for m in ca.unfinished()) == sum(sizes)
    net.run(10.0, stop=lambda: ca.idle)
    done = drain(ca, MessageCompleted)
    assert [(d.msn, d.size) for d in done] == list(zip(msns, sizes, strict=True))
    assert all(d.posted_at == 0.0 < d.done_at for d in done)
    assert [r.msn for r in drain(cb, MessageReceived)] == msns
    # Done messages leave the connection: nothing about them grows with the run.
    assert ca.message(msns[0]) is None and list(ca.unfinished()) == []
    assert ca.next_event() is None and not ca.failed
    assert bytes(mr.buf) == b"\x01" * (1 << 16) + b"\x02" * (2 << 16)
    assert isinstance(ca.snapshot(net.now), dict) and ca.rto > 0


def test_the_config_is_made_for_a_topology_and_survives_json():
    topo = load("default")
    cfg = TransportConfig.for_topology(topo, seed=9)
    assert cfg.seed == 9 and cfg.pmtu == 4096
    assert TransportConfig.from_json(cfg.to_json()) == cfg
    with pytest.raises(MrcemuError, match="unknown field.*pmtuu"):
        TransportConfig.from_json({"pmtuu": 1})


def test_the_seed_reaches_the_spraying_order():
    topo = load("default")

    def order(seed: int) -> list[int]:
        c = make_connection("mrc", topo, 0, 7, TransportConfig.for_topology(topo, seed))
        return [c.profile.next_ev().ev for _ in range(32)]

    assert order(1) == order(1)
    assert order(1) != order(2)
    assert sorted(order(1)) == sorted(order(2))  # the same paths, in another order


def test_nscc_starts_from_its_own_pairs_fixed_round_trip():
    # default at 1:5000: 50.9 ms within a leaf, 65.4 ms across. A leaf's own flow that
    # started at the fabric's longest would take its first sample (queued, in an
    # incast) for its base and read its delays low.
    topo = load("default")
    cfg = TransportConfig.for_topology(topo)
    assert cfg.rtt_known
    near, far = (make_connection("mrc", topo, 0, peer, cfg) for peer in (1, 4))
    assert (near.cc.base_rtt, far.cc.base_rtt) == pytest.approx((0.0509, 0.0654))
    assert near.cc.sampled and far.cc.sampled
    # Without the fixed latency the first sample sets it.
    lone = make_connection("mrc", topo, 0, 1, TransportConfig())
    assert not lone.cc.sampled
