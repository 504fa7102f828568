"""Bring a topology up on Mininet: one namespace per node, veth cables, then
pyroute2 writes addresses, static neighbours, routes and htb into each kernel.

Mininet is used for what it is good at (namespaced node shells and veth pairs);
everything IPv6 is written over netlink from the model's tables, not via ifconfig.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict

from mininet.link import Intf
from mininet.net import Mininet
from mininet.node import Node

from mrcemu.fabric.netns import write_sysctls
from mrcemu.fabric.remote import RemoteNode, VxlanLink
from mrcemu.fabric.servers import Servers
from mrcemu.topology import Layout, Topology
from mrcemu.topology.addressing import Kind
from mrcemu.topology.cluster import Cluster, place
from mrcemu.topology.routes import tables

Progress = Callable[[str, int, int], None]

# Set before any interface exists, so every veth inherits them: no SLAAC link-local
# (we assign our own), no DAD delay, no router solicitations or advertisements.
DEFAULT_SYSCTLS = {
    "net.ipv6.conf.default.addr_gen_mode": "1",
    "net.ipv6.conf.default.accept_dad": "0",
    "net.ipv6.conf.default.accept_ra": "0",
    "net.ipv6.conf.default.router_solicitations": "0",
    "net.ipv6.conf.default.autoconf": "0",
    "net.ipv6.conf.default.disable_ipv6": "0",
    "net.ipv6.conf.all.accept_dad": "0",
    "net.ipv6.conf.all.seg6_enabled": "1",
    "net.ipv6.conf.default.seg6_enabled": "1",
}
SWITCH_SYSCTLS = {"net.ipv6.conf.all.forwarding": "1"}
# An ECMP fabric's switches (topology `routing: ecmp`): hash a flow on its addresses,
# next header and flow label (policy 0, L3: a RoCE QP's flow label is its entropy), with
# one fixed seed, so that the same flows take the same spines in every run (0 would be
# a random seed per namespace); and stop using a next hop whose carrier is gone, as a
# switch does at once; the other switches learn of it by reconvergence (fabric/inject).
ECMP_HASH_SEED = 0x6D726365
ECMP_SYSCTLS = {
    "net.ipv6.fib_multipath_hash_policy": "0",
    "net.ipv4.fib_multipath_hash_seed": str(ECMP_HASH_SEED),
    "net.ipv6.conf.all.ignore_routes_with_linkdown": "1",
}


class BareIntf(Intf):
    """Mininet's Intf reconfigures MACs with ifconfig; ours are set at creation."""

    def config(self, **params):  # type: ignore[override]
        return {}


class Fabric:
    """Owns the Mininet object and the node shells for as long as the fabric lives."""

    def __init__(self, topo: Topology, on_node: Callable[[str, int], None] | None = None,
                 cluster: Cluster | None = None) -> None:
        self.topo = topo
        # Split over servers (`--cluster`): each node on its server, links between
        # servers as VXLAN (fabric/remote.py, Mininet's cluster edition).
        self.cluster = cluster
        self.placement = place(topo, cluster) if cluster else {}
        self.servers = Servers(cluster, self.placement)
        self.layout = Layout(topo)
        self.tables = tables(self.layout)
        self.net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False,
                           waitConnected=False, cleanup=False)
        self.on_node = on_node
        self.pids: dict[str, int] = {}
        self.timings: dict[str, float] = {}

    def build(self, progress: Progress | None = None) -> None:
        say = progress or (lambda *_: None)
        layout, t0 = self.layout, time.monotonic()
        nodes = list(layout.nodes.values())
        for n, node in enumerate(nodes, 1):
            if self.cluster:
                on = self.cluster.server(self.placement[node.name])
                mn = self.net.addHost(node.name, cls=RemoteNode, cluster=self.cluster, on=on,
                                      ip=None, inNamespace=True)
            else:
                mn = self.net.addHost(node.name, cls=Node, ip=None, inNamespace=True)
            self.pids[node.name] = mn.pid
            if self.on_node:
                self.on_node(node.name, mn.pid)
            sysctls = DEFAULT_SYSCTLS
            if node.kind is not Kind.HOST:
                sysctls = sysctls | SWITCH_SYSCTLS | (ECMP_SYSCTLS if self.topo.ecmp else {})
            if getattr(mn, "isRemote", False):
                # its namespace is on another server: write them from its own shell
                mn.cmd("sysctl -q -w " + " ".join(f"{k}={v}" for k, v in sysctls.items()))
            else:
                write_sysctls(mn.pid, sysctls)
            say("nodes", n, len(nodes))
        self.timings["nodes_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        for n, link in enumerate(layout.links, 1):
            self.net.addLink(link.a.node, link.b.node, intfName1=link.a.name,
                             intfName2=link.b.name, addr1=link.a.mac, addr2=link.b.mac,
                             intf=BareIntf, **({"cls": VxlanLink, "vni": n}
                                               if self.cluster else {}))
            say("links", n, len(layout.links))
        self.timings["links_s"] = time.monotonic() - t1
        # Each server's agent programs its own nodes (fabric/agent.py): in-process
        # here, over the shared ssh connection on another server.
        done = 0
        for server, names in self.servers.group(n.name for n in nodes).items():
            took = self.servers.call(server, "program", topology=asdict(self.topo),
                                     nodes={n: self.pids[n] for n in names})
            for k, v in took.items():
                self.timings[k] = self.timings.get(k, 0.0) + v
            done += len(names)
            say("routes", done, len(nodes))

    def stop(self) -> None:
        """Kill every node shell: each namespace, with its veths, goes with it."""
        for server in self.servers.all():
            try:
                self.servers.call(server, "unload")
            except Exception:  # noqa: BLE001 - a server gone already has nothing loaded
                pass
        for node in self.net.hosts:
            try:
                node.terminate()
            except Exception:  # noqa: BLE001 - keep tearing down the rest
                pass
        for pid in self.pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
