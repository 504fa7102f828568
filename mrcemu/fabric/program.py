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
        netlink.program(ipr, table, topo.mtu)
        switch = layout.nodes[table.node].kind is not Kind.HOST
        for i in layout.interfaces[table.node]:
            idx = ipr.link_lookup(ifname=i.name)[0]
            if switch:
                # htb's leaf pfifo holds txqlen packets: size it to the switch buffer,
                # so a congested port drops instead of queueing for seconds.
                ipr.link("set", index=idx, txqlen=shaping.queue_packets(topo.buffer_bytes))
            shaping.shape(ipr, idx, i.mbps, topo.mtu)
    finally:
        ipr.close()
