"""Nodes, interfaces and links of a topology, as data."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from ipaddress import IPv6Address

from mrcemu.topology.addressing import Kind, link_local, mac_address, usid
from mrcemu.topology.model import Topology


def host_name(h: int) -> str:
    return f"h{h}"


def leaf_name(plane: int, i: int) -> str:
    return f"p{plane}l{i}"


def spine_name(plane: int, i: int) -> str:
    return f"p{plane}s{i}"


@dataclass(frozen=True)
class Interface:
    node: str
    name: str
    usid: int  # uSID of the node on this plane
    peer_node: str
    peer_name: str
    peer_usid: int
    plane: int
    mbps: float

    @property
    def mac(self) -> str:
        return mac_address(self.usid, self.peer_usid)

    @property
    def link_local(self) -> IPv6Address:
        return link_local(self.usid, self.peer_usid)

    @property
    def peer_mac(self) -> str:
        return mac_address(self.peer_usid, self.usid)

    @property
    def peer_link_local(self) -> IPv6Address:
        return link_local(self.peer_usid, self.usid)


@dataclass(frozen=True)
class Link:
    a: Interface
    b: Interface

    @property
    def name(self) -> str:
        """The name faults use: `p2l0-p2s1` or `h3-p2l1`."""
        return f"{self.a.node}-{self.b.node}"


@dataclass(frozen=True)
class Node:
    name: str
    kind: Kind
    plane: int | None  # None for hosts, which sit in every plane
    index: int


class Layout:
    """Everything physical in a topology: nodes, their ports and the cables."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo

    @cached_property
    def hosts(self) -> list[Node]:
        return [Node(host_name(h), Kind.HOST, None, h) for h in range(self.topo.hosts)]

    @cached_property
    def switches(self) -> list[Node]:
        t = self.topo
        out = []
        for p in range(t.planes):
            out += [Node(leaf_name(p, i), Kind.LEAF, p, i) for i in range(t.leaves_per_plane)]
            out += [Node(spine_name(p, i), Kind.SPINE, p, i) for i in range(t.spines_per_plane)]
        return out

    @cached_property
    def nodes(self) -> dict[str, Node]:
        return {n.name: n for n in self.hosts + self.switches}

    @cached_property
    def links(self) -> list[Link]:
        t = self.topo
        out = []
        for p in range(t.planes):
            for h in range(t.hosts):
                leaf = t.leaf_of(h)
                hu, lu = usid(p, Kind.HOST, h), usid(p, Kind.LEAF, leaf)
                hn, ln = host_name(h), leaf_name(p, leaf)
                hi, li = f"{hn}-p{p}", f"{ln}-h{h}"
                out.append(Link(Interface(hn, hi, hu, ln, li, lu, p, t.host_link_mbps),
                                Interface(ln, li, lu, hn, hi, hu, p, t.host_link_mbps)))
            for i in range(t.leaves_per_plane):
                for s in range(t.spines_per_plane):
                    lu, su = usid(p, Kind.LEAF, i), usid(p, Kind.SPINE, s)
                    ln, sn = leaf_name(p, i), spine_name(p, s)
                    li, si = f"{ln}-s{s}", f"{sn}-l{i}"
                    out.append(Link(Interface(ln, li, lu, sn, si, su, p, t.fabric_link_mbps),
                                    Interface(sn, si, su, ln, li, lu, p, t.fabric_link_mbps)))
        return out

    @cached_property
    def interfaces(self) -> dict[str, list[Interface]]:
        """Each node's interfaces, in link order."""
        out: dict[str, list[Interface]] = {n: [] for n in self.nodes}
        for link in self.links:
            out[link.a.node].append(link.a)
            out[link.b.node].append(link.b)
        return out

    @cached_property
    def links_by_name(self) -> dict[str, Link]:
        out = {}
        for link in self.links:
            out[link.name] = link
            out[f"{link.b.node}-{link.a.node}"] = link
        return out

    def node_usid(self, name: str) -> int:
        node = self.nodes[name]
        if node.kind is Kind.HOST:
            raise ValueError(f"host {name} has one uSID per plane")
        return usid(node.plane, node.kind, node.index)  # type: ignore[arg-type]
