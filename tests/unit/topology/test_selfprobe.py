"""Clustermapper's self-probes: every loop comes home through the static tables, and the
map blames the link that loses probes, not the ones beside it."""

import pytest

from mrcemu.topology import Layout, load
from mrcemu.topology.addressing import host_address
from mrcemu.topology.routes import tables, walk
from mrcemu.topology.selfprobe import BAD_LOSS, MIN_PROBES, LinkMap, loops


@pytest.mark.parametrize("name", ["small", "default"])
def test_every_loop_comes_back_to_its_own_port_over_the_links_it_names(name):
    layout = Layout(load(name))
    tabs = tables(layout)
    ls = loops(layout)
    t = layout.topo
    assert len(ls) == t.hosts * t.planes * (1 + t.spines_per_plane)
    for lp in ls:
        visited, iface, final, _ = walk(layout, tabs, f"h{lp.host}", lp.container)
        assert final == host_address(lp.plane, lp.host) and iface == f"h{lp.host}-p{lp.plane}"
        hops = list(zip(visited, visited[1:], strict=False))
        crossed = {"-".join(sorted(pair, key=lambda n: (not n.startswith("h"), n)))
                   for pair in hops}
        assert crossed == set(lp.links), (lp, visited)
        assert all(link in layout.links_by_name for link in lp.links)
    # Every link of the fabric is probed.
    assert {link for lp in ls for link in lp.links} == {link.name for link in layout.links}


def run(m: LinkMap, lossy: set[str], rounds: int, t0: float = 0.0, dt: float = 0.05) -> float:
    """Probe every loop each `dt`; a probe crossing a link in `lossy` never returns."""
    t = t0
    for _ in range(rounds):
        for i, lp in enumerate(m.loops):
            seq = m.sent(i, t)
            if not lossy & set(lp.links):
                assert m.answered(i, seq, t + 0.001)
        t += dt
    return t


def test_a_gray_leaf_spine_link_is_the_only_bad_one():
    layout = Layout(load("small"))
    m = LinkMap(loops(layout))
    t = run(m, set(), 10)
    assert m.bad(t) == []
    t = run(m, {"p1l0-p1s1"}, 10, t)
    assert m.bad(t + 0.4) == ["p1l0-p1s1"]
    h = m.links(t + 0.4)
    assert h["p1l0-p1s1"].loss == 1.0 and h["p1l0-p1s1"].rtt_ms is None
    assert h["h0-p1l0"].loss == 0 and h["h0-p1l0"].rtt_ms == pytest.approx(1.0)


def test_a_bad_host_link_is_not_blamed_on_the_spines_above_it():
    layout = Layout(load("small"))
    m = LinkMap(loops(layout))
    t = run(m, {"h0-p0l0"}, 12)
    assert m.bad(t + 0.4) == ["h0-p0l0"]  # p0l0's uplinks still fine through h1


def test_a_healed_link_leaves_the_map_after_the_window_and_strays_are_ignored():
    layout = Layout(load("small"))
    m = LinkMap(loops(layout), window=0.5, timeout=0.3)
    t = run(m, {"p0l1-p0s0"}, 12)
    assert m.bad(t + 0.4) == ["p0l1-p0s0"]
    t = run(m, set(), 20, t + 0.4)
    assert m.bad(t) == []
    seq = m.sent(0, t)
    assert m.answered(0, seq, t + 0.01) and not m.answered(0, seq, t + 0.02)  # duplicate
    assert not m.answered(0, 10**9, t) and not m.answered(-1, seq, t)  # strangers
    late = m.sent(1, t)
    assert not m.answered(1, late, t + 0.31)  # given up on: it counts as lost


def test_too_few_probes_judge_nothing():
    layout = Layout(load("small"))
    m = LinkMap(loops(layout))
    t = run(m, {"p1l0-p1s1"}, 1)
    h = m.links(t + 0.4)["p1l0-p1s1"]
    assert 0 < h.probes < MIN_PROBES and h.loss == 1.0 > BAD_LOSS and not h.bad


def test_judgements_of_several_servers_merge_into_one_map():
    from mrcemu.topology.selfprobe import LinkHealth, merge

    a = {"h0-p0l0": LinkHealth("h0-p0l0", 10, 0, 2.0),
         "p0l0-p0s0": LinkHealth("p0l0-p0s0", 10, 10, None)}
    b = {"h2-p0l1": LinkHealth("h2-p0l1", 8, 0, 4.0),
         "p0l0-p0s0": LinkHealth("p0l0-p0s0", 10, 0, 6.0)}
    got = merge([a, b])
    assert set(got) == {"h0-p0l0", "p0l0-p0s0", "h2-p0l1"}
    assert got["h0-p0l0"] == a["h0-p0l0"] and got["h2-p0l1"] == b["h2-p0l1"]
    # a link both judged: all 20 probes, 10 lost, the RTT of the 10 answered
    assert got["p0l0-p0s0"] == LinkHealth("p0l0-p0s0", 20, 10, 6.0)
    assert got["p0l0-p0s0"].bad and not merge([b])["p0l0-p0s0"].bad
