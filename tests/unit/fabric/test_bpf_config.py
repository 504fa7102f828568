"""What each switch port is told to do (mrcemu.fabric.bpf.port_config)."""

from __future__ import annotations

from mrcemu.fabric import bpf
from mrcemu.topology import Layout, load
from mrcemu.topology.addressing import Kind


def test_only_a_leafs_host_facing_ports_are_last_hops_and_they_never_mark_ecn():
    layout = Layout(load("default"))
    topo = layout.topo
    seen = {True: 0, False: 0}
    for node, ifaces in layout.interfaces.items():
        if layout.nodes[node].kind is Kind.HOST:
            continue
        for i in ifaces:
            c = bpf.port_config(layout, i)
            last = layout.nodes[i.peer_node].kind is Kind.HOST
            seen[last] += 1
            assert c.lasthop is last
            # B3: ECN everywhere but on the last hop; trimming everywhere.
            assert c.ecn_threshold == (0 if last else topo.ecn_threshold_bytes)
            assert c.trim_threshold == topo.trim_threshold_bytes
    assert seen[True] == 64 and seen[False] > 0  # 8 hosts x 8 ports, and the fabric
