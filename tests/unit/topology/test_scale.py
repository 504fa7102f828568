"""The closed-form per-server footprint (mrcemu/topology/scale.py) against what the code
really builds: the layout's links, the route tables and the placement."""

from __future__ import annotations

import pytest

from mrcemu.topology import Layout
from mrcemu.topology import load as load_topology
from mrcemu.topology.addressing import Kind
from mrcemu.topology.cluster import LOCAL, Cluster, Server, place
from mrcemu.topology.routes import tables
from mrcemu.topology.scale import PAPER, Fabric, Share, footprint


def counted(name: str, n: int, placement: str) -> list[Share]:
    """Every figure by walking the fabric as `up --cluster` builds it."""
    topo = load_topology(name)
    layout = Layout(topo)
    servers = tuple(Server(f"s{k}", LOCAL if k == 0 else f"10.0.0.{k}") for k in range(n))
    where = place(topo, Cluster("c.yaml", servers, placement))
    index = {s.name: k for k, s in enumerate(servers)}
    out = [Share() for _ in range(n)]
    tabs = tables(layout)
    for node in layout.nodes.values():
        s = out[index[where[node.name]]]
        s.namespaces += 1
        s.routes += len(tabs[node.name].routes)
        if node.kind is Kind.HOST:
            s.hosts += 1
        else:
            s.switch_ports += len(layout.interfaces[node.name])
    for link in layout.links:
        a, b = index[where[link.a.node]], index[where[link.b.node]]
        if a == b:
            out[a].veths += 2
        else:
            out[a].vxlan += 1
            out[b].vxlan += 1
    return out


@pytest.mark.parametrize("name", ["small", "default", "large"])
@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("placement", ["plane", "rack"])
def test_the_closed_form_is_what_the_code_builds(name, n, placement):
    t = load_topology(name)
    f = Fabric(t.planes, t.leaves_per_plane, t.spines_per_plane, t.hosts_per_leaf)
    assert f.hosts == t.hosts and f.links == len(Layout(t).links)
    assert footprint(f, n, placement) == counted(name, n, placement)


def test_the_papers_fabric_conserves_its_links_and_nodes_over_any_split():
    for placement, n in (("plane", 9), ("rack", 512)):
        shares = footprint(PAPER, n, placement)
        total = Share()
        for s in shares:
            total.add(s)
        assert PAPER.hosts == 131_072 and total.hosts == 131_072
        assert total.namespaces == 131_072 + 8 * (512 + 256)
        # each link: two veth ends on one server, or a VXLAN port on each of two
        assert (total.veths + total.vxlan) // 2 == PAPER.links == 8 * 2 * 131_072
    with pytest.raises(ValueError, match="plane or rack"):
        footprint(PAPER, 2, "spine")
