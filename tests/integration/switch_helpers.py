"""Shared by the switch integration tests: incast, slowed ports and counter deltas."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from mrcemu.fabric import bpf, rates, state
from mrcemu.nic import ops, transfer
from mrcemu.nic.client import NicClient
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


PACKET = 4300  # a 4 KiB data packet's frame


@contextmanager
def busy(ports: list[tuple[str, str]], share: float) -> Iterator[None]:
    """(switch, port) pairs busy with cross traffic for the block: ours gets `share` of
    the rate, and the queue we see holds `share` of the bytes, so its delay stays what
    the topology's thresholds give at full rate (about 25 ms to trim).

    A port merely slowed to 5 % keeps byte thresholds that take 20 times longer to
    drain: half a second before the first ECN mark, past any RTO, so the sender judges
    the path silent before the switch has said a word, which is not the hot spine the
    white paper describes."""
    st = state.load_state()
    layout = Layout(st.topo())
    with slowed(ports, share):
        cfgs = {}
        for n, p in ports:
            i = next(i for i in layout.interfaces[n] if i.name == p)
            c = bpf.port_config(layout, i)
            ecn = int(c.ecn_threshold * share)
            # Scaled alone, the trim threshold (3,000 B at 5 %) was below one 4 KiB data
            # packet: a packet was marked only if it came while the one before it was
            # between 1,500 and 3,000 bytes from drained, and otherwise trimmed, so
            # whether a run saw any mark was a matter of spacing (one clean-clone CI run
            # saw none). A packet's room above the ECN threshold makes one arriving
            # while the last is still draining a mark, as on a congested port at full
            # rate (its queue delay at trim: ~46 ms at 1 Mb/s, under the reorder window).
            trim = max(int(c.trim_threshold * share), ecn + PACKET)
            cfgs[i.mac] = replace(c, rate_bps=int(c.rate_bps * share), ecn_threshold=ecn,
                                  trim_threshold=trim,
                                  buffer=max(int(c.buffer * share), trim + PACKET))
        bpf.configure(cfgs, reset_counters=False)
        yield  # slowed() puts the full port config back


def last_hop_ports(topology: str, dst: int) -> list[tuple[str, str]]:
    """Every leaf port that faces host `dst`, one per plane."""
    layout = Layout(load(topology))
    return [(i.peer_node, i.peer_name) for i in layout.interfaces[f"h{dst}"]]


def incast(topology: str = "default", dst: int = 7, size: int = 8 << 20) -> list[dict]:
    topo = load(topology)
    results, _ = transfer.run_many(topo, [(a, dst, size, "mrc", a) for a in range(topo.hosts)
                                          if a != dst])
    return results


def nacks_heard(dst: int = 7, hosts: int = 8) -> tuple[int, int]:
    """The NACKs every other host's MRC connection to `dst` has received, and of them
    the ones for trimmed packets, since the connections were made."""
    with NicClient(range(hosts)) as c:
        stats = c.ask([(h, ops.Stats(peer=dst, missing_ok=True)) for h in range(hosts)
                       if h != dst])
    rows = [r["stats"] for r in stats if r["stats"] is not None]
    return sum(s["nacks_rx"] for s in rows), sum(s["trims_nacked"] for s in rows)
