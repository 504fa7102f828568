"""The hash census's pure half (study/census.py): each draw's probes as the NIC would
send its QPs, and each link's load read back from per-port counters and checked."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from mrcemu.study import census
from mrcemu.topology import Layout, load
from mrcemu.topology.layout import leaf_name, spine_name
from mrcemu.transport.profiles import qp_of
from mrcemu.wire import codec


def counted_as(topo, probes, spine_of) -> dict[str, int]:
    """What the switch ports would count if each probe took spine `spine_of(probe)`."""
    out: Counter[str] = Counter()
    lay = Layout(topo)
    for p in probes:
        la, lb, s = topo.leaf_of(p.src), topo.leaf_of(p.dst), spine_of(p)
        out[f"{leaf_name(0, la)}-s{s}"] += 1
        out[f"{spine_name(0, s)}-l{lb}"] += 1
        out[lay.interfaces[f"h{p.dst}"][0].peer_name] += 1
    return dict(out)


@pytest.mark.parametrize("qps", [1, 3])
def test_a_draw_is_a_cross_leaf_permutation_with_fresh_qps_no_nic_takes_for_its_own(qps):
    topo = load("rack4-ecmp")
    probes = census.draw(topo, random.Random(1), qps)
    assert len(probes) == topo.hosts * qps
    assert Counter(p.src for p in probes) == Counter(p.dst for p in probes) == {
        h: qps for h in range(topo.hosts)}
    assert all(topo.leaf_of(p.src) != topo.leaf_of(p.dst) for p in probes)
    qpns = [q for p in probes for q in (p.qpn, p.peer_qpn)]
    assert all(qp_of(q, topo.hosts) is None and 0 < q < 1 << 24 for q in qpns)
    again = census.draw(topo, random.Random(1), qps)
    assert again == probes  # seeded
    assert census.draw(topo, random.Random(2), qps) != probes


def test_a_probe_is_the_roce_packet_its_qp_would_send():
    topo = load("rack4-ecmp")
    p = census.draw(topo, random.Random(7), 1)[0]
    d = codec.decode(p.packet())
    assert (d.sport, d.flow_label) == (p.sport, p.flow_label)
    assert d.bth["dqpn"] == p.peer_qpn


def test_a_census_needs_an_ecmp_fabric():
    with pytest.raises(ValueError, match="not an ECMP fabric"):
        census.draw(load("rack4"), random.Random(1), 1)


def test_loads_are_read_from_the_ports_and_every_probe_is_checked_at_each_hop():
    topo = load("rack4-ecmp")
    probes = census.draw(topo, random.Random(4), 2)
    counted = counted_as(topo, probes, lambda p: p.flow_label % topo.spines_per_plane)
    got = census.loads(topo, counted)
    assert census.miscounted(topo, probes, got) == []
    want = Counter((topo.leaf_of(p.src), p.flow_label % 4) for p in probes)
    assert {k: v for k, v in got.up.items() if v} == dict(want)
    assert sum(got.down.values()) == sum(got.delivered.values()) == len(probes)
    # a packet more on one uplink, one fewer delivered: each named
    counted["p0l1-s2"] = counted.get("p0l1-s2", 0) + 1
    port = Layout(topo).interfaces["h5"][0].peer_name
    counted[port] -= 1
    wrong = census.miscounted(topo, probes, census.loads(topo, counted))
    assert any(w.startswith("leaf 1 sent") for w in wrong)
    assert any(w.startswith("h5 got 1, not 2") for w in wrong)


def test_a_summary_fits_one_uplink_a_leaf_a_draw_against_the_binomial():
    topo = load("rack4-ecmp")
    rng = random.Random(9)
    draws = []
    for _ in range(200):
        probes = census.draw(topo, rng, 1)
        draws.append(census.loads(topo, counted_as(topo, probes, lambda p: rng.randrange(4))))
    s = census.summarize(topo, 1, draws)
    assert s["qps_a_leaf"] == 4 and s["fit"]["n"] == 4 and s["fit"]["p"] == 0.25
    assert s["fit"]["observations"] == 200 * topo.leaves_per_plane
    assert s["fit"]["p_value"] > 0.01  # a uniform hash
    assert sum(s["histogram_up"]) == 200 * topo.leaves_per_plane * topo.spines_per_plane
    assert s["busiest_uplink"]["uniform_hash"] == pytest.approx(2.125)
    # every flow of a leaf on spine 0: the worst hash there is
    worst = [census.loads(topo, counted_as(topo, census.draw(topo, rng, 1), lambda p: 0))
             for _ in range(50)]
    bad = census.summarize(topo, 1, worst)
    assert bad["fit"]["p_value"] < 1e-6 and bad["busiest_uplink"]["mean"] == 4
    text = census.as_text(bad)  # what the CLI and the pages print
    assert (text["busiest"], text["uniform"], text["ratio"]) == ("4.000", "2.125", "1.882")
    assert text["step"] == "0.25 [0.25-0.25]"  # every leaf's 4 QPs on one spine


def test_a_field_probe_changes_that_field_alone():
    topo = load("rack4-ecmp")
    p = census.draw(topo, random.Random(7), 1)[0]
    base, other = codec.decode(p.packet()), codec.decode(p.packet(sport=0xD00D))
    assert (other.sport, other.flow_label, other.src, other.dst, other.bth) == (
        0xD00D, base.flow_label, base.src, base.dst, base.bth)
    relabeled = codec.decode(p.packet(flow_label=0xABCDE))
    assert (relabeled.sport, relabeled.flow_label) == (base.sport, 0xABCDE)


def test_a_lone_probes_uplink_and_how_many_a_field_moved():
    topo = load("rack4-ecmp")
    p = census.draw(topo, random.Random(7), 1)[0]
    got = census.loads(topo, counted_as(topo, [p], lambda _: 3))
    assert census.uplink_of(got) == (topo.leaf_of(p.src), 3)
    out = census.hashed({"udp_source_port": [False] * 8, "flow_label": [True] * 6 + [False] * 2},
                        spines=4)
    assert out["udp_source_port"] == {"qps": 8, "moved": 0, "a_hashed_field_moves": 6.0}
    assert out["flow_label"]["moved"] == 6


def test_a_steps_efficiency_under_equal_shares_is_qps_over_the_busiest_link():
    links = [(leaf, s) for leaf in range(4) for s in range(4)]

    def loads(up: dict, down: dict) -> census.Loads:
        return census.Loads({k: up.get(k, 0) for k in links},
                            {k: down.get(k, 0) for k in links}, {})

    even = loads({k: 2 for k in links}, {k: 2 for k in links})  # 2 QPs a host, spread
    piled = loads({(leaf, 0): 8 for leaf in range(4)}, {(0, 1): 8})  # a leaf's 8 on one spine
    one_down = loads({k: 2 for k in links}, {(3, 2): 5})  # a downlink the busiest
    assert census.step_efficiency(2, [even])["mean"] == 1.0  # no link above a host's 2
    assert census.step_efficiency(2, [piled])["mean"] == 0.25  # 4 times the ideal
    assert census.step_efficiency(2, [one_down])["mean"] == 0.4
    both = census.step_efficiency(2, [even] * 5 + [piled] * 5)
    assert (both["mean"], both["p10"], both["p90"]) == (0.625, 0.25, 1.0)
