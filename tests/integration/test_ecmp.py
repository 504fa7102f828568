"""The white paper's RoCE baseline fabric for real: one plane whose leaves hash each flow
over their spines with the kernel's own multipath routes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from mrcemu import rundir
from mrcemu.fabric import state
from mrcemu.fabric.netlink import end_dev, read_routes
from mrcemu.fabric.netns import iproute
from mrcemu.nic import transfer
from mrcemu.topology import Layout, load
from mrcemu.topology.routes import tables
from tests.integration.conftest import mrcemu, running, wait_for

SPINES = [f"p0s{s}" for s in range(4)]
# Both ways between the leaves: every one of these crosses a spine.
FLOWS = [(a, a + 4) for a in range(4)] + [(a + 4, a) for a in range(4)]


@pytest.fixture(scope="module")
def ecmp() -> Iterator[None]:
    with running("ecmp"):
        yield


def spine_packets() -> dict[str, int]:
    """Packets each spine's ports carried (its two ports, both ways), from its BPF
    program's counters."""
    r = mrcemu("stats", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    return {s: sum(p["packets"] for p in d[s].values()) for s in SPINES}


def settle_spines() -> None:
    """Wait until the spines' counters stop moving with no traffic: a fabric just up can
    still carry packets of its own bring-up (the kernels' multicast listener reports go
    at random delays of up to a second, twice), which on a loaded machine the first
    transfer would count as its own."""
    seen = [spine_packets()]

    def still() -> bool:
        time.sleep(1.0)  # the reports' interval: quiet over one is quiet
        seen.append(spine_packets())
        return seen[-1] == seen[-2]
    wait_for(still, limit=30)


def test_multipath_routes_read_back_equal_the_model(ecmp):
    st = state.load_state()
    model = tables(Layout(load("ecmp")))
    engine = st.topo().usid_engine
    multi = 0
    for name, pid in st.nodes.items():
        with iproute(pid) as ipr:
            kernel = {(r.dst, frozenset(r.nexthops) or frozenset({(r.dev, r.gateway)}),
                       r.end_next_csid, r.engine) for r in read_routes(ipr)}
        want = {(r.dst, frozenset({(end_dev(engine), None)}) if r.end else
                 frozenset(r.nexthops), r.end, engine if r.end else None)
                for r in model[name].routes}
        assert kernel == want, name
        multi += sum(1 for r in model[name].routes if r.also)
    assert multi == 2 * 4  # each leaf: one route a host of the other leaf, 4 next hops


def test_roce_flows_are_spread_by_the_kernels_hash_each_on_one_spine(ecmp):
    """Each RoCE QP's data crosses one spine, the one its flow label hashes to; the
    same flow takes the same spine again (one fixed hash seed); and the kernel spreads
    the 8 flows over more than one spine."""
    topo = state.load_state().topo()
    where: dict[tuple[int, int], str] = {}
    settle_spines()
    for a, b in FLOWS + FLOWS[:2]:  # the first two again: the same spine
        before = spine_packets()
        (res,), _ = transfer.run_many(topo, [(a, b, 256 << 10, "roce", 1)], 120)
        after = spine_packets()
        assert res["integrity_ok"]
        data = res["packets_per_path"]["p0-ecmp"]  # every data packet, on its one flow
        assert data >= 64
        delta = {s: after[s] - before[s] for s in SPINES}
        carried = [s for s in SPINES if delta[s] >= data]
        assert len(carried) == 1, (a, b, delta, data)
        # nothing else crossed the spines but this QP's acks (one per 8 packets, and
        # a NAK or two if any packet was retransmitted)
        assert sum(delta.values()) <= data + data // 8 + 8 + 2 * res["retransmits"]
        if (a, b) in where:
            assert where[(a, b)] == carried[0], (a, b)
        where[(a, b)] = carried[0]
    assert len(set(where.values())) > 1, where


def leaf_nexthops(node: str, host: int) -> list[str] | None:
    """The devices of a leaf's kernel route to a host, None if it has none."""
    with iproute(state.load_state().nodes[node]) as ipr:
        for r in read_routes(ipr):
            if str(r.dst) == f"fcbb:bb00:{0xC00 + host:x}::/48":
                return sorted(d for d, _ in r.nexthops) or [r.dev]
    return None


def test_routing_converges_around_a_dead_link_after_its_delay_and_back_on_heal(ecmp):
    topo = state.load_state().topo()
    delay = state.load_state().transport().roce_reconvergence
    all4 = [f"p0l0-s{s}" for s in range(4)]
    assert leaf_nexthops("p0l0", 5) == all4
    t0 = time.monotonic()
    r = mrcemu("fail", "link-down", "p0l1-p0s2")
    assert r.returncode == 0, r.stderr
    # the far leaf learns of it by reconvergence: s2 no longer reaches p0l1's hosts
    wait_for(lambda: leaf_nexthops("p0l0", 5) != all4, limit=delay + 30)
    assert time.monotonic() - t0 >= delay
    assert leaf_nexthops("p0l0", 5) == ["p0l0-s0", "p0l0-s1", "p0l0-s3"]
    assert leaf_nexthops("p0l1", 1) == ["p0l1-s0", "p0l1-s1", "p0l1-s3"]
    log = [json.loads(x) for x in (rundir.FAULT_LOG.read_text().splitlines())]
    assert [e["around"] for e in log if e["event"] == "reconverged"][-1] == ["p0l1-p0s2"]
    # RoCE between the leaves, every flow of the 8, both ways: all intact, none on s2
    before = spine_packets()
    res, _ = transfer.run_many(topo, [(a, b, 128 << 10, "roce", 1) for a, b in FLOWS], 120)
    assert all(x["integrity_ok"] for x in res)
    after = spine_packets()
    assert after["p0s2"] == before["p0s2"]
    # healed: every leaf routes over all four spines again, at once
    assert mrcemu("heal").returncode == 0
    assert leaf_nexthops("p0l0", 5) == all4
    assert leaf_nexthops("p0l1", 1) == [f"p0l1-s{s}" for s in range(4)]
