"""Changing a running port's rate: htb shaping and the BPF virtual queue together."""

from __future__ import annotations

from dataclasses import replace

from mrcemu.errors import MrcemuError
from mrcemu.fabric import bpf, shaping
from mrcemu.fabric.netns import iproute
from mrcemu.topology import Layout
from mrcemu.topology.addressing import Kind


def set_port_rate(layout: Layout, pids: dict[str, int], node: str, ifname: str,
                  mbps: float) -> None:
    iface = next((i for i in layout.interfaces.get(node, []) if i.name == ifname), None)
    if iface is None:
        raise MrcemuError(f"{node} has no port {ifname}")
    switch = layout.nodes[node].kind is not Kind.HOST
    with iproute(pids[node]) as ipr:
        shaping.change_rate(ipr, ipr.link_lookup(ifname=ifname)[0], mbps, layout.topo.mtu)
    if switch:
        cfg = replace(bpf.port_config(layout, iface), rate_bps=int(mbps * 1e6))
        bpf.configure({iface.mac: cfg}, reset_counters=False)
