"""Shared by the switch integration tests: incast, slowed ports and counter deltas."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from mrcemu.fabric import rates, state
from mrcemu.nic import transfer
from mrcemu.topology import Layout, load
from tests.integration.conftest import mrcemu


def switch_counters() -> dict[str, dict[str, int]]:
    """Port name -> counters, every switch."""
    out = json.loads(mrcemu("stats", "--json").stdout)
    return {port: c for ports in out.values() for port, c in ports.items()}


def delta(after: dict, before: dict) -> dict[str, dict[str, int]]:
    return {p: {k: v - before.get(p, {}).get(k, 0) for k, v in c.items()}
            for p, c in after.items()}


@contextmanager
def slowed(ports: list[tuple[str, str]], fraction: float) -> Iterator[None]:
    """(switch, port) pairs run at `fraction` of their configured rate for the block.

    Tests that need a congested port make it congested by construction: the senders'
    rate depends on how much CPU the Python NICs get, a port's rate does not."""
    st = state.load_state()
    layout = Layout(st.topo())
    mbps = {(n, p): next(i.mbps for i in layout.interfaces[n] if i.name == p)
            for n, p in ports}
    for (n, p), m in mbps.items():
        rates.set_port_rate(layout, st.nodes, n, p, m * fraction)
    try:
        yield
    finally:
        for (n, p), m in mbps.items():
            rates.set_port_rate(layout, st.nodes, n, p, m)


def last_hop_ports(topology: str, dst: int) -> list[tuple[str, str]]:
    """Every leaf port that faces host `dst`, one per plane."""
    layout = Layout(load(topology))
    return [(i.peer_node, i.peer_name) for i in layout.interfaces[f"h{dst}"]]


def incast(topology: str = "default", dst: int = 7, size: int = 8 << 20) -> list[dict]:
    topo = load(topology)
    results, _ = transfer.run_many(topo, [(a, dst, size, "mrc", a) for a in range(topo.hosts)
                                          if a != dst])
    return results
