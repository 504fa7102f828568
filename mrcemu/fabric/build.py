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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

from mininet.link import Intf, Link
from mininet.net import Mininet
from mininet.node import Node

from mrcemu.fabric.netns import write_sysctls
from mrcemu.fabric.remote import LinkPlan, PlannedLink, RemoteNode, veth_line
from mrcemu.fabric.servers import Server, Servers
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


# Node shells started at once (on a split fabric: well under a local server's sshd
# MaxSessions, 64 in fabric/cluster_local.py, and OpenSSH's default of 10).
PARALLEL_SHELLS = 8


class BareIntf(Intf):
    """Mininet's Intf reconfigures MACs with ifconfig; ours are set at creation."""

    def config(self, **params):  # type: ignore[override]
        return {}


class PlannedVeth(Link):
    """A local fabric's veth pair, made later with all the others (`LinkPlan.make`, one
    `ip -batch`): Mininet makes each with a command in its first node's shell, 4 ms a
    link."""

    def __init__(self, node1: Node, node2: Node, plan: LinkPlan, server: Server,
                 **kwargs: object) -> None:
        self.plan, self.server = plan, server
        super().__init__(node1, node2, **kwargs)

    def makeIntfPair(self, intfname1: str, intfname2: str, addr1: str | None = None,  # noqa: N802
                     addr2: str | None = None, node1: Node | None = None,
                     node2: Node | None = None, deleteIntfs: bool = True) -> bool:
        assert node1 is not None and node2 is not None  # Link's fast path hands them
        self.plan.add(self.server, veth_line(intfname1, addr1, node1.pid, intfname2, addr2,
                                             node2.pid))
        return True


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
        if self.cluster:
            self._remote_nodes(say)
        else:
            # Mininet's `addHost` is the node's constructor and two entries: the shells
            # start several at once (each is mostly waiting for a bash to start).
            self._start_nodes(lambda name: Node(name, ip=None, inNamespace=True), say)
            for node in nodes:
                write_sysctls(self.pids[node.name], self._sysctls(node.kind))
        self.timings["nodes_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        # Links are planned as Mininet adds them (Mininet's cluster classes on a split
        # fabric), then made a server at a time by its agent, in one `ip -batch`.
        plan = LinkPlan()
        for n, link in enumerate(layout.links, 1):
            planned = ({"cls": PlannedLink, "vni": n, "plan": plan} if self.cluster else
                       {"cls": PlannedVeth, "plan": plan, "server": self.servers.of(link.a.node)})
            self.net.addLink(link.a.node, link.b.node, intfName1=link.a.name,
                             intfName2=link.b.name, addr1=link.a.mac, addr2=link.b.mac,
                             intf=BareIntf, **planned)
        plan.make(self.servers, lambda done, total: say("links", done, total))
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
        # `up` returns a fabric whose every port carries packets, or fails naming those
        # that do not.
        t2 = time.monotonic()
        for server, names in self.servers.group(n.name for n in nodes).items():
            self.servers.call(server, "wait_up", topology=asdict(self.topo),
                              nodes={n: self.pids[n] for n in names})
        self.timings["links_up_s"] = time.monotonic() - t2

    def _sysctls(self, kind: Kind) -> dict[str, str]:
        if kind is Kind.HOST:
            return DEFAULT_SYSCTLS
        return DEFAULT_SYSCTLS | SWITCH_SYSCTLS | (ECMP_SYSCTLS if self.topo.ecmp else {})

    def _started(self, name: str, pid: int) -> None:
        self.pids[name] = pid
        if self.on_node:
            self.on_node(name, pid)

    def _remote_nodes(self, say: Progress) -> None:
        """Each node's shell on its server, over the server's shared connection, several
        at once: a shell is an ssh session there, and starting one is mostly waiting
        (0.2 s a session on a local server). Then each server's agent writes its nodes'
        sysctls in one request."""
        assert self.cluster is not None
        cluster, nodes = self.cluster, list(self.layout.nodes.values())
        self._start_nodes(lambda name: RemoteNode(
            name, cluster=cluster, on=cluster.server(self.placement[name]), ip=None,
            inNamespace=True), say)
        for server, names in self.servers.group(n.name for n in nodes).items():
            self.servers.call(server, "sysctls", nodes={
                str(self.pids[n]): self._sysctls(self.layout.nodes[n].kind) for n in names})

    def _start_nodes(self, start: Callable[[str], Node], say: Progress) -> None:
        """Every node's shell made by `start`, PARALLEL_SHELLS at once, and entered in the
        net in the topology's order (what Mininet's `addHost` would do after its
        constructor)."""
        nodes = list(self.layout.nodes.values())
        with ThreadPoolExecutor(max_workers=PARALLEL_SHELLS) as pool:
            futures = [pool.submit(start, node.name) for node in nodes]
            try:
                for n, (node, fut) in enumerate(zip(nodes, futures, strict=True), 1):
                    mn = fut.result()
                    self.net.hosts.append(mn)
                    self.net.nameToNode[node.name] = mn
                    self._started(node.name, mn.pid)
                    say("nodes", n, len(nodes))
            except BaseException:
                # the shells that did start are the net's, for stop() to end
                for node, fut in zip(nodes, futures, strict=True):
                    fut.cancel()
                    if fut.done() and not fut.cancelled() and fut.exception() is None \
                            and node.name not in self.net.nameToNode:
                        self.net.hosts.append(fut.result())
                raise

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
        self.servers.close()
        for pid in self.pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
