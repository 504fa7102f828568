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
