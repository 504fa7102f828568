"""The route tables, walked in Python, deliver every container to the right port."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu.topology import Layout, Topology, load
from mrcemu.topology.addressing import Kind, container_usids, usid_prefix
from mrcemu.topology.paths import (
    ecmp_paths,
    ev_fields,
    ev_flow_label,
    ev_udp_sport,
    is_ecmp_ev,
    path_label,
    paths,
)
from mrcemu.topology.routes import ForwardingError, tables, walk


def check_all_pairs(topo: Topology) -> int:
    layout = Layout(topo)
    tabs = tables(layout)
    # Who owns each uSID: every node on a path after the source host, source leaf first.
    owner = {layout.node_usid(n): n for n, node in layout.nodes.items()
             if node.kind is not Kind.HOST}
    n = 0
    for a in range(topo.hosts):
        for b in range(topo.hosts):
            ps = paths(topo, a, b)
            assert len(ps) == topo.paths_between(a, b)
            assert len({p.ev for p in ps}) == len(ps)
            for p in ps:
                visited, iface, final, hlim = walk(layout, tabs, f"h{a}", p.container, 64)
                assert tuple(visited) == p.hops
                assert iface == p.dst_port
                assert final == p.delivered
                assert hlim == 64 - p.switch_hops
                assert ev_fields(p.ev) == (p.plane, p.spine)
                usids = container_usids(p.container)
                assert [owner.get(u, f"h{u & 0x3FF}") for u in usids] == list(p.hops[1:])
                n += 1
    return n


@pytest.mark.parametrize("name", ["small", "default"])
def test_walk_delivers_every_path(name):
    topo = load(name)
    n = check_all_pairs(topo)
    assert n == sum(topo.paths_between(a, b) for a in range(topo.hosts)
                    for b in range(topo.hosts))


def test_default_path_counts_and_hops():
    topo = load("default")
    ps = paths(topo, 0, 7)
    assert len(ps) == 32
    assert Counter(p.plane for p in ps) == {p: 4 for p in range(8)}
    assert all(p.switch_hops == 3 for p in ps)
    assert all(p.switch_hops == 1 for p in paths(topo, 0, 1))


def test_ev_is_visible_on_the_wire():
    p = paths(load("small"), 0, 3)[3]
    assert ev_udp_sport(p.ev) >= 0xC000
    assert ev_flow_label(p.ev) == 3


def test_switch_tables_have_one_end_route_each():
    layout = Layout(load("small"))
    tabs = tables(layout)
    for sw in layout.switches:
        ends = [r for r in tabs[sw.name].routes if r.end]
        assert len(ends) == 1
        assert ends[0].dst.prefixlen == 48


def test_plain_host_address_is_not_routed_across_leaves():
    # Only containers cross the fabric: a bare remote host address has no route at
    # the source leaf (there is no routing protocol to make one up).
    topo = load("small")
    layout = Layout(topo)
    with pytest.raises(ForwardingError):
        walk(layout, tables(layout), "h0", paths(topo, 0, 3)[0].delivered)


@st.composite
def topologies(draw):
    leaves = draw(st.integers(1, 4))
    return Topology(planes=draw(st.integers(1, 16)), leaves_per_plane=leaves,
                    spines_per_plane=draw(st.integers(1, 5)),
                    hosts=leaves * draw(st.integers(1, 3)))


@settings(max_examples=40, deadline=None)
@given(topologies())
def test_walk_property_random_topologies(topo):
    check_all_pairs(topo)


# ---- ECMP fabrics (routing: ecmp): the white paper's single-plane RoCE baseline ----

def test_ecmp_topology_is_default_at_one_plane():
    e, d = load("ecmp"), load("default")
    assert e.ecmp and not d.ecmp and e.planes == 1
    assert e.host_link_mbps == d.planes * d.host_link_mbps  # the same aggregate
    # non-blocking, as default: a leaf's uplinks carry what its hosts can send
    assert e.spines_per_plane * e.fabric_link_mbps == e.hosts_per_leaf * e.host_link_mbps


def test_ecmp_leaf_routes_each_remote_host_over_every_spine():
    layout = Layout(load("ecmp"))
    tabs = tables(layout)
    multi = [r for r in tabs["p0l0"].routes if r.also]
    # h4..h7 are under p0l1: one route each, a next hop per spine
    assert sorted(str(r.dst) for r in multi) == [
        f"fcbb:bb00:{0xC00 + h:x}::/48" for h in range(4, 8)]
    for r in multi:
        assert [d for d, _ in r.nexthops] == ["p0l0-s0", "p0l0-s1", "p0l0-s2", "p0l0-s3"]
        assert "nexthop via" in r.describe()
    # a spine reaches each host over that host's leaf, with one next hop
    spine = {str(r.dst): r.dev for r in tabs["p0s2"].routes if r.dst.prefixlen == 48}
    assert spine["fcbb:bb00:c01::/48"] == "p0s2-l0" and spine["fcbb:bb00:c06::/48"] == "p0s2-l1"
    # uSID fabrics have no multipath route at all
    assert not any(r.also for t in tables(Layout(load("default"))).values() for r in t.routes)


@pytest.mark.parametrize("pick", range(4))
def test_ecmp_walk_delivers_plain_host_addresses_over_each_spine(pick):
    topo = load("ecmp")
    layout = Layout(topo)
    tabs = tables(layout)
    for a in range(topo.hosts):
        for b in range(topo.hosts):
            if a == b:
                continue
            (p,) = ecmp_paths(topo, a, b, [77])
            visited, iface, final, hlim = walk(layout, tabs, f"h{a}", p.container, 64, pick)
            assert final == p.delivered == p.container and iface == f"h{b}-p0"
            if topo.leaf_of(a) == topo.leaf_of(b):
                assert visited == [f"h{a}", f"p0l{topo.leaf_of(a)}", f"h{b}"]
            else:  # the pick-th spine: each next hop of the route leads on to b
                assert visited[2] == f"p0s{pick}" and hlim == 61
    # and the uSID containers still work there (check, map, MRC on one plane)
    check_all_pairs(topo)


def test_ecmp_paths_carry_their_entropy_in_the_flow_label():
    topo = load("ecmp")
    ps = ecmp_paths(topo, 0, 5, [0x1234, 0xABC, 0x1234 + 0x10000])
    assert [ev_flow_label(p.ev) for p in ps] == [0x234, 0xABC]  # 12 bits, no duplicates
    assert all(is_ecmp_ev(p.ev) and ev_fields(p.ev) == (0, None) for p in ps)
    assert path_label(ps[0].ev) == "p0-ecmp" and path_label(paths(topo, 0, 5)[1].ev) == "p0s1"
    with pytest.raises(ValueError, match="not an ECMP fabric"):
        ecmp_paths(load("default"), 0, 5, [1])


def test_ecmp_routing_converges_around_dead_links_and_leaves_no_route_when_none_is_left():
    from mrcemu.topology.faults import Fault, routed_around

    layout = Layout(load("ecmp"))

    def hops(tabs, leaf, host):
        (r,) = [r for r in tabs[leaf].routes if str(r.dst) == f"fcbb:bb00:{0xC00 + host:x}::/48"]
        return [d for d, _ in r.nexthops]

    # a link at leaf 0: leaf 0 stops using it, and leaf 1 stops sending leaf 0's hosts
    # through that spine (it cannot reach leaf 0 from there); leaf 1's own hosts are
    # still reached over it from leaf 0's side only if both links are up: not here
    dead = routed_around(layout, [Fault("link-down", "p0l0-p0s2")])
    assert dead == {"p0l0-p0s2"}
    tabs = tables(layout, dead)
    assert hops(tabs, "p0l0", 5) == ["p0l0-s0", "p0l0-s1", "p0l0-s3"]
    assert hops(tabs, "p0l1", 1) == ["p0l1-s0", "p0l1-s1", "p0l1-s3"]
    # a gray link and a switch are routed around too; loss and a slow link are not
    dead = routed_around(layout, [Fault("gray", "p0l1-p0s0"), Fault("switch-down", "p0s3"),
                                  Fault("loss", "p0l0-p0s1", 1.0),
                                  Fault("degrade", "p0l0-p0s2", 10.0)])
    assert dead == {"p0l1-p0s0", "p0l0-p0s3", "p0l1-p0s3"}
    tabs = tables(layout, dead)
    assert hops(tabs, "p0l0", 6) == ["p0l0-s1", "p0l0-s2"]
    assert hops(tabs, "p0l1", 2) == ["p0l1-s1", "p0l1-s2"]
    # one next hop left: a plain route through it, which the walk follows
    tabs = tables(layout, frozenset({"p0l0-p0s0", "p0l0-p0s1", "p0l0-p0s2"}))
    (r,) = [r for r in tabs["p0l0"].routes if str(r.dst) == "fcbb:bb00:c05::/48"]
    assert not r.also and r.dev == "p0l0-s3"
    visited, *_ = walk(layout, tabs, "h0", ecmp_paths(layout.topo, 0, 5, [1])[0].container)
    assert visited[2] == "p0s3"
    # none left: no route, as a routing daemon leaves it
    tabs = tables(layout, routed_around(layout, [Fault("plane-down", "0")]))
    assert not any(r.also or r.dst.prefixlen == 48 and r.dst == usid_prefix(0xC05)
                   for r in tabs["p0l0"].routes)
    with pytest.raises(ForwardingError):
        walk(layout, tabs, "h0", ecmp_paths(layout.topo, 0, 5, [1])[0].container)
