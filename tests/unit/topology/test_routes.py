"""The route tables, walked in Python, deliver every container to the right port."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu.topology import Layout, Topology, load
from mrcemu.topology.addressing import Kind, container_usids
from mrcemu.topology.paths import ev_fields, ev_flow_label, ev_udp_sport, paths
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
