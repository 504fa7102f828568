"""The meter's accounting of harness CPU (no sockets: a meter with no ports)."""

from __future__ import annotations

import hashlib

from mrcemu import fidelity
from mrcemu.nic.meter import Meter


def _work() -> None:
    hashlib.sha256(bytes(4 << 20)).hexdigest()


def test_harness_cpu_counts_only_the_blocks_marked_as_harness_and_resets():
    m = Meter({}, {}, now=0.0)
    _work()  # the NIC's own work: not harness
    assert m.harness_cpu == 0.0
    with m.harness():
        _work()
    first = m.harness_cpu
    assert first > 0.0
    block = m.to_json(now=1.0)
    assert block["harness_cpu_s"] == round(first, 4)
    assert block["cpu_s"] >= block["harness_cpu_s"]  # a part of the daemon's CPU
    m.reset(now=2.0)
    assert m.harness_cpu == 0.0


def test_harness_cpu_is_counted_even_when_the_block_fails():
    m = Meter({}, {}, now=0.0)
    try:
        with m.harness():
            _work()
            raise ValueError("budget")
    except ValueError:
        pass
    assert m.harness_cpu > 0.0


def test_the_verdict_sums_harness_cpu_over_hosts_and_tolerates_old_blocks():
    a = Meter({}, {}, now=0.0)
    with a.harness():
        _work()
    blocks = {"h0": a.to_json(now=1.0), "h1": {**a.to_json(now=1.0)}}
    del blocks["h1"]["harness_cpu_s"]  # a block from before the field existed
    v = fidelity.judge(blocks, cpus=2)
    assert v["harness_cpu_s"] == round(blocks["h0"]["harness_cpu_s"], 3)


def test_the_paced_sends_figures_come_from_the_ports_that_paced_them():
    import socket

    from mrcemu import datapath

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        ports = datapath.Ports([(a.fileno(), 2, bytes(14), bytes(16), 1e6)], 0.0, 8, 2000,
                               2, 2000.0)
        m = Meter({}, {2: 1e6}, now=0.0, pacer=ports)
        for _ in range(2):
            ports.queue(make_ev_plane2(), bytes(986))
        ports.drain(0.0)
        ports.drain(0.0015)  # the second frame fell due at 0.001
        block = m.to_json(now=0.002)
        assert block["send_late"]["n"] == 1
        assert block["send_late"]["max_s"] == 0.0005
        assert block["ports"]["2"]["backlogged_s"] == 0.0015
        assert block["ports"]["2"]["sent_bytes"] == 1000
        m.reset(now=0.003)  # resets the ports' figures too
        assert m.to_json(now=0.004)["send_late"]["n"] == 0


def make_ev_plane2() -> int:
    from mrcemu.topology.paths import make_ev

    return make_ev(2, 0, 0)


def test_the_collectors_pauses_are_reported_and_reset_with_the_rest():
    from mrcemu.nic.collector import Pauses

    times = iter([1.0, 1.003])
    p = Pauses(clock=lambda: next(times))
    m = Meter({}, {}, now=0.0, pauses=p)
    p("start", {})
    p("stop", {})
    assert m.to_json(1.0)["gc_pause"]["n"] == 1
    assert m.to_json(1.0)["gc_pause"]["max_s"] == 0.003
    m.reset(2.0)
    assert m.to_json(2.0)["gc_pause"]["n"] == 0
    assert "gc_pause" not in Meter({}, {}, now=0.0).to_json(0.0)
