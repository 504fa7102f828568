"""One node's kernel programmed from the model, on the server that holds it: addresses,
static neighbours and routes over netlink, and htb on its ports. The agent runs it for
its own nodes; orchestration (`build`) never runs it on another server's."""

from __future__ import annotations

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


def program_nodes(layout: Layout, tables: dict[str, NodeTable], nodes: dict[str, int]
                  ) -> None:
    """`program_node` for every node given (name -> PID), one at a time; the first that
    fails stops it, named. (Forked workers, one a core, took `default` from 3.2 to 2.1 s,
    but a bring-up in CI then hung twice in one run: a fork of a process with threads
    may copy a lock another thread holds.)"""
    for name, pid in nodes.items():
        try:
            program_node(layout, tables[name], pid)
        except Exception as e:
            raise RuntimeError(f"programming {name} (PID {pid}): {type(e).__name__}: {e}"
                               ) from None
