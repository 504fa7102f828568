"""One node's kernel programmed from the model, on the server that holds it: addresses,
static neighbours and routes over netlink, and htb on its ports. The agent runs it for
its own nodes; orchestration (`build`) never runs it on another server's."""

from __future__ import annotations

import multiprocessing
import os

from mrcemu.fabric import netlink, shaping
from mrcemu.fabric.netns import iproute
from mrcemu.topology import Layout
from mrcemu.topology.addressing import Kind
from mrcemu.topology.routes import NodeTable


def program_node(layout: Layout, table: NodeTable, pid: int) -> None:
    """Addresses, neighbours, routes and htb into one node's kernel, by its PID on this
    server (each server's agent runs this for its own nodes)."""
    topo = layout.topo
    ipr = iproute(pid)
    try:
        ifindex = netlink.program(ipr, table, topo.mtu)
        switch = layout.nodes[table.node].kind is not Kind.HOST
        for i in layout.interfaces[table.node]:
            idx = ifindex[i.name]
            if switch:
                # htb's leaf pfifo holds txqlen packets: size it to the switch buffer,
                # so a congested port drops instead of queueing for seconds.
                ipr.link("set", index=idx, txqlen=shaping.queue_packets(topo.buffer_bytes))
            shaping.shape(ipr, idx, i.mbps, topo.mtu)
    finally:
        ipr.close()


# What the forked workers of `program_nodes` program from: inherited, not pickled.
_FORKED: tuple[Layout, dict[str, NodeTable]] | None = None


def _program_some(nodes: list[tuple[str, int]]) -> None:
    assert _FORKED is not None
    layout, tables = _FORKED
    for name, pid in nodes:
        try:
            program_node(layout, tables[name], pid)
        except Exception as e:  # named, and a plain error that crosses back from a worker
            raise RuntimeError(f"programming {name} (PID {pid}): {type(e).__name__}: {e}"
                               ) from None


def program_nodes(layout: Layout, tables: dict[str, NodeTable], nodes: dict[str, int],
                  workers: int | None = None) -> None:
    """`program_node` for every node given (name -> PID), on every core: programming is
    pyroute2 encoding in Python (htb's rate tables most of it), 3.2 s of one core for
    `default`'s 56 nodes, half a bring-up. Each forked worker opens its own netlink
    sockets, one node at a time; the first error any of them meets is raised here."""
    global _FORKED
    items = list(nodes.items())
    k = max(1, min(workers or os.cpu_count() or 1, len(items)))
    if k == 1:
        _FORKED = (layout, tables)
        try:
            _program_some(items)
        finally:
            _FORKED = None
        return
    _FORKED = (layout, tables)
    try:
        # Interleaved, so each worker gets its share of switches (the most ports).
        with multiprocessing.get_context("fork").Pool(k) as pool:
            pool.map(_program_some, [items[i::k] for i in range(k)])
    finally:
        _FORKED = None
