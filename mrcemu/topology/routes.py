"""Every node's static IPv6 route table and neighbour entries, as data.

Computed here in pure Python, checked by a forwarding walk in the unit tests,
and only then written to kernels by `mrcemu.fabric.netlink`.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv6Address, IPv6Network

from mrcemu.topology.addressing import (
    Kind,
    host_address,
    plane_prefix,
    shift,
    usid,
    usid_prefix,
)
from mrcemu.topology.layout import Interface, Layout, leaf_name

# The device End routes hang on. Not `lo`: on this kernel an End next-csid route on
# lo drops every packet after the shift (Ip6InNoRoutes), and there is no dummy
# driver, so each switch gets an always-up internal veth pair of this name.
END_DEV = "usid"


@dataclass(frozen=True)
class Route:
    dst: IPv6Network
    dev: str  # outgoing interface; END_DEV for End
    gateway: IPv6Address | None = None  # peer's link-local; None for End
    src: IPv6Address | None = None  # preferred source (hosts only)
    end: bool = False  # seg6local End with flavor next-csid
    # An ECMP route's other next hops, (dev, gateway) each; dev/gateway are the first.
    # The kernel hashes each packet's flow onto one of them.
    also: tuple[tuple[str, IPv6Address], ...] = ()

    @property
    def nexthops(self) -> tuple[tuple[str, IPv6Address | None], ...]:
        return ((self.dev, self.gateway), *self.also)

    def describe(self) -> str:
        if self.end:
            return f"{self.dst} seg6local End next-csid lblen 32 nflen 16 dev {self.dev}"
        if self.also:
            return f"{self.dst} " + " ".join(f"nexthop via {g} dev {d}"
                                             for d, g in self.nexthops)
        via = f" via {self.gateway}" if self.gateway else ""
        src = f" src {self.src}" if self.src else ""
        return f"{self.dst}{via} dev {self.dev}{src}"


@dataclass(frozen=True)
class Neighbour:
    dev: str
    address: IPv6Address
    mac: str


@dataclass(frozen=True)
class NodeTable:
    node: str
    routes: tuple[Route, ...]
    addresses: tuple[tuple[str, IPv6Address, int], ...]  # (dev, address, prefixlen)
    neighbours: tuple[Neighbour, ...]


def _via(i: Interface, dst: IPv6Network, src: IPv6Address | None = None) -> Route:
    return Route(dst, i.name, i.peer_link_local, src)


def ecmp_routes(layout: Layout, name: str, dead: frozenset[str] = frozenset()
                ) -> list[Route]:
    """An ECMP fabric's switch routes to the hosts, besides its uSID routes: a leaf
    reaches each host of another leaf over every spine at once, a spine each host over
    the host's leaf. Host addresses are plane 0's, the one plane such a fabric has.

    `dead`: links (`p0l0-p0s2`) routing has converged around. A leaf then reaches a
    host over the spines whose links to both leaves are alive, and not at all (no
    route) when none is: what a routing daemon leaves in the FIB once it knows."""
    topo, node = layout.topo, layout.nodes[name]
    ifaces = layout.interfaces[name]
    out = []
    for h in range(topo.hosts):
        dst = usid_prefix(usid(0, Kind.HOST, h))
        if node.kind is Kind.LEAF and topo.leaf_of(h) != node.index:
            far = leaf_name(node.plane, topo.leaf_of(h))
            up = [i for i in ifaces if i.peer_node.startswith(f"p{node.plane}s")
                  and f"{name}-{i.peer_node}" not in dead
                  and f"{far}-{i.peer_node}" not in dead]
            if up:
                out.append(Route(dst, up[0].name, up[0].peer_link_local,
                                 also=tuple((i.name, i.peer_link_local) for i in up[1:])))
        elif node.kind is Kind.SPINE:
            down = next(i for i in ifaces if layout.nodes[i.peer_node].index
                        == topo.leaf_of(h))
            out.append(_via(down, dst))
    return out


def tables(layout: Layout, dead: frozenset[str] = frozenset()) -> dict[str, NodeTable]:
    """Every node's table; `dead`: the links an ECMP fabric's routing converged around."""
    out: dict[str, NodeTable] = {}
    for name, node in layout.nodes.items():
        ifaces = layout.interfaces[name]
        routes: list[Route] = []
        addrs: list[tuple[str, IPv6Address, int]] = [(i.name, i.link_local, 64) for i in ifaces]
        if node.kind is Kind.HOST:
            for i in ifaces:
                own = host_address(i.plane, node.index)
                addrs.append((i.name, own, 128))
                routes.append(_via(i, plane_prefix(i.plane), own))
        else:
            routes.append(Route(usid_prefix(layout.node_usid(name)), END_DEV, end=True))
            routes += [_via(i, usid_prefix(i.peer_usid)) for i in ifaces]
            if layout.topo.ecmp:
                routes += ecmp_routes(layout, name, dead)
        neigh = tuple(Neighbour(i.name, i.peer_link_local, i.peer_mac) for i in ifaces)
        out[name] = NodeTable(name, tuple(routes), tuple(addrs), neigh)
    return out


def lookup(table: NodeTable, addr: IPv6Address) -> Route | None:
    """Longest-prefix match, as the kernel's FIB does for these tables."""
    best = None
    for r in table.routes:
        if addr in r.dst and (best is None or r.dst.prefixlen > best.dst.prefixlen):
            best = r
    return best


class ForwardingError(Exception):
    pass


def walk(layout: Layout, tabs: dict[str, NodeTable], src_host: str, dst: IPv6Address,
         hop_limit: int = 64, pick: int = 0) -> tuple[list[str], str, IPv6Address, int]:
    """Forward a packet through the tables the way the kernels would. At an ECMP route
    the packet takes next hop `pick` modulo their number (the kernel's hash does pick
    one; which one is the kernel's, not this model's).

    Returns (nodes visited, arriving interface, final destination, hop limit on arrival).
    """
    peer_of = {(i.node, i.name): (i.peer_node, i.peer_name) for ifs in layout.interfaces.values()
               for i in ifs}
    node, visited = src_host, [src_host]
    iface = ""
    for _ in range(64):
        table = tabs[node]
        local = {a for _, a, plen in table.addresses if plen == 128}
        if len(visited) > 1 and dst in local:  # arrived (a self-probe arrives back home)
            return visited, iface, dst, hop_limit
        route = lookup(table, dst)
        if route is None:
            raise ForwardingError(f"{node}: no route to {dst}")
        if route.end:
            dst = shift(dst)
            route = lookup(table, dst)
            if route is None or route.end:
                raise ForwardingError(f"{node}: no route to {dst} after End")
        if len(visited) > 1:
            hop_limit -= 1
            if hop_limit <= 0:
                raise ForwardingError(f"{node}: hop limit exceeded")
        hops = route.nexthops
        node, iface = peer_of[(node, hops[pick % len(hops)][0])]
        visited.append(node)
    raise ForwardingError("forwarding loop")

