"""The hash census: where an ECMP fabric's leaves put RoCE QPs among their spines, as the
kernel hashes them. Pure: which QPs each draw probes, and what the switches' counters
say each link carried (census_run.py sends the probes and reads the counters).

A draw is a cross-leaf permutation (every host writes to one host on another leaf) with
`qps` QPs a pair. Each QP gets fresh numbers, so the flow label its NIC derives from them
(transport/factory.py) is new; the fabric's hash seed stays the one every run has. One
packet a QP is enough: the switches hash every packet of a flow alike. A uniform,
independent hash puts Bin(hosts a leaf x qps, 1 / spines) QPs on each uplink.
"""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from dataclasses import dataclass

from mrcemu.scenario.patterns import cross_leaf_permutation
from mrcemu.study import stats
from mrcemu.topology import Layout, Topology
from mrcemu.topology.addressing import Kind, host_address
from mrcemu.topology.paths import ev_flow_label, ev_udp_sport
from mrcemu.transport.factory import roce_first_flow
from mrcemu.transport.profiles import qp_of
from mrcemu.wire import codec
from mrcemu.wire.constants import Dscp, Opcode

# What the kernel hashes (fib_multipath_hash_policy 0, fabric/build.py) and what a draw
# changes: said in every census, since the finding depends on both.
HASHED = ("source and destination address, flow label and next header "
          "(net.ipv6.fib_multipath_hash_policy 0), with the fabric's fixed hash seed")
VARIED = "every QP's number, so the flow label its NIC derives from it; the seed stays"
QPN_SPACE = 1 << 24


@dataclass(frozen=True)
class Probe:
    """One QP's probe: a RoCEv2 packet as the QP would send its data."""

    src: int
    dst: int
    qpn: int  # the sender's QP
    peer_qpn: int  # the one it writes to (the packet's destination QP)
    ev: int  # the flow it starts on: UDP source port and flow label

    @property
    def sport(self) -> int:
        return ev_udp_sport(self.ev)

    @property
    def flow_label(self) -> int:
        return ev_flow_label(self.ev)

    def packet(self, sport: int | None = None, flow_label: int | None = None) -> bytes:
        """A RoCEv2 WRITE ONLY with the QP's UDP source port, flow label and destination
        QP, as the codec builds the QP's data: the switches hash it as they would that.
        `sport`, `flow_label`: another value of that field alone (what is hashed?)."""
        return codec.encode(host_address(0, self.src).packed, host_address(0, self.dst).packed,
                            sport=self.sport if sport is None else sport,
                            flow_label=self.flow_label if flow_label is None else flow_label,
                            dscp=Dscp.NO_TRIM,
                            ecn=0, bth={"opcode": Opcode.RC_WRITE_ONLY, "dqpn": self.peer_qpn,
                                        "psn": 0}, headers={"RETH": {}})


def _fresh_qpns(rng: random.Random, k: int, hosts: int) -> list[int]:
    # None a NIC daemon takes for one of its own QPs: a probe must not make it one.
    out: list[int] = []
    while len(out) < k:
        q = rng.randrange(1, QPN_SPACE)
        if q not in out and qp_of(q, hosts) is None:
            out.append(q)
    return out


def draw(topo: Topology, rng: random.Random, qps: int) -> list[Probe]:
    """One draw's probes: a cross-leaf permutation with `qps` fresh QPs a pair."""
    if not topo.ecmp:
        raise ValueError(f"{topo.name} is not an ECMP fabric: a census needs `routing: ecmp`")
    perm = cross_leaf_permutation([topo.leaf_of(h) for h in range(topo.hosts)], rng)
    out = []
    for a, b in enumerate(perm):
        mine = _fresh_qpns(rng, 2 * qps, topo.hosts)
        for local, remote in zip(mine[:qps], mine[qps:], strict=True):
            out.append(Probe(a, b, local, remote, roce_first_flow(topo, a, b, local, remote)))
    return out


@dataclass(frozen=True)
class Loads:
    """The probes each link carried over one draw."""

    up: dict[tuple[int, int], int]  # (leaf, spine): leaf to spine
    down: dict[tuple[int, int], int]  # (spine, leaf): spine to leaf
    delivered: dict[int, int]  # host: leaf to host


@functools.lru_cache(maxsize=8)
def _ports(topo: Topology) -> tuple[tuple[str, str, tuple[int, int] | int], ...]:
    """Each switch port that matters to a census, once a topology: its name, what it is
    (up, down, host) and the link or host it names."""
    lay = Layout(topo)
    out: list[tuple[str, str, tuple[int, int] | int]] = []
    for ifaces in lay.interfaces.values():
        for i in ifaces:
            me, peer = lay.nodes[i.node], lay.nodes[i.peer_node]
            if me.kind == Kind.LEAF and peer.kind == Kind.SPINE:
                out.append((i.name, "up", (me.index, peer.index)))
            elif me.kind == Kind.SPINE:
                out.append((i.name, "down", (me.index, peer.index)))
            elif me.kind == Kind.LEAF and peer.kind == Kind.HOST:
                out.append((i.name, "host", peer.index))
    return tuple(out)


def loads(topo: Topology, counted: dict[str, int]) -> Loads:
    """Each link's probes from the packets each switch port sent over the draw (by
    interface name; a port not named sent none)."""
    got: dict[str, dict] = {"up": {}, "down": {}, "host": {}}
    for name, role, key in _ports(topo):
        got[role][key] = counted.get(name, 0)
    return Loads(got["up"], got["down"], got["host"])


def miscounted(topo: Topology, probes: list[Probe], got: Loads) -> list[str]:
    """Where the counters disagree with the probes sent: each leaf sends its probes up
    once, each leaf gets its own down once, each host gets its own. Empty if every probe
    was counted once at each hop."""
    want_up: dict[int, int] = defaultdict(int)
    want_down: dict[int, int] = defaultdict(int)
    want_host: dict[int, int] = defaultdict(int)
    for p in probes:
        want_up[topo.leaf_of(p.src)] += 1
        want_down[topo.leaf_of(p.dst)] += 1
        want_host[p.dst] += 1
    out = []
    for leaf in range(topo.leaves_per_plane):
        sent = sum(n for (lf, _), n in got.up.items() if lf == leaf)
        came = sum(n for (_, lf), n in got.down.items() if lf == leaf)
        if sent != want_up[leaf]:
            out.append(f"leaf {leaf} sent {sent} up, not {want_up[leaf]}")
        if came != want_down[leaf]:
            out.append(f"leaf {leaf} got {came} from the spines, not {want_down[leaf]}")
    out += [f"h{h} got {got.delivered.get(h, 0)}, not {want_host[h]}"
            for h in range(topo.hosts) if got.delivered.get(h, 0) != want_host[h]]
    return out


def fit_sample(topo: Topology, draws: list[Loads]) -> list[int]:
    """One uplink a leaf a draw, the spine turning with the draw: leaves' uplinks carry
    disjoint QPs, so these loads are independent, as a chi-square needs (a leaf's own
    uplinks are not: their loads sum to its QPs)."""
    spines = topo.spines_per_plane
    return [d.up[(leaf, k % spines)] for k, d in enumerate(draws)
            for leaf in range(topo.leaves_per_plane)]


def summarize(topo: Topology, qps: int, draws: list[Loads]) -> dict:
    """A size's census: the uplink loads against the binomial, and the busiest uplink
    of a leaf against what a uniform hash gives."""
    n, spines = topo.hosts_per_leaf * qps, topo.spines_per_plane
    fit = stats.binomial_fit(fit_sample(topo, draws), n, 1.0 / spines)
    worst = [max(d.up[(leaf, s)] for s in range(spines))
             for d in draws for leaf in range(topo.leaves_per_plane)]
    step = step_efficiency(qps, draws)
    every_up = [x for d in draws for x in d.up.values()]
    every_down = [x for d in draws for x in d.down.values()]
    return {"topology": topo.name, "hosts": topo.hosts, "leaves": topo.leaves_per_plane,
            "hosts_per_leaf": topo.hosts_per_leaf, "spines": spines, "qps": qps,
            "draws": len(draws), "qps_a_leaf": n,
            "fit": fit.to_json(),
            "busiest_uplink": {"mean": round(sum(worst) / len(worst), 4),
                               "uniform_hash": round(stats.expected_max_load(n, spines), 4)},
            "step_efficiency": step,
            "histogram_up": _histogram(every_up, n),
            "histogram_down": _histogram(every_down, n)}


def step_efficiency(qps: int, draws: list[Loads]) -> dict:
    """A synchronous step of each draw's permutation, had every QP an equal share of each
    link it crosses: a host's write, split over its `qps` QPs, ends when its QP on the
    busiest link does, so the step takes max(qps, the busiest link's QPs) / qps times
    the ideal (a host's own port carries its qps). Its efficiency, ideal over taken:
    mean and 10th and 90th percentiles over the draws."""
    effs = sorted(qps / max(qps, *d.up.values(), *d.down.values()) for d in draws)
    return {"mean": round(sum(effs) / len(effs), 4), "p10": round(effs[len(effs) // 10], 4),
            "p90": round(effs[(9 * len(effs)) // 10], 4)}


def as_text(s: dict) -> dict[str, str]:
    """A size's census figures as the CLI and the pages print them: one place rounds."""
    f, b, e = s["fit"], s["busiest_uplink"], s.get("step_efficiency")
    return {"p": "n/a" if f["p_value"] is None else f"{f['p_value']:.3g}",
            "chi2": f"{f['chi2']:.2f}", "dof": str(f["dof"]), "busiest": f"{b['mean']:.3f}",
            "uniform": f"{b['uniform_hash']:.3f}", "ratio": f"{b['mean'] / b['uniform_hash']:.3f}",
            "step": "n/a" if not e else f"{e['mean']:.2f} [{e['p10']:.2f}-{e['p90']:.2f}]"}


def _histogram(values: list[int], n: int) -> list[int]:
    out = [0] * (n + 1)
    for v in values:
        out[v] += 1
    return out


# The header fields (and the seed) whose effect on a QP's uplink a census measures: each
# changed alone, a QP at a time.
FIELDS = ("udp_source_port", "flow_label", "hash_seed")


def uplink_of(got: Loads) -> tuple[int, int]:
    """The one uplink a lone probe took."""
    (link,) = [k for k, n in got.up.items() if n]
    return link


def hashed(moved: dict[str, list[bool]], spines: int) -> dict[str, dict]:
    """For each field: of the QPs whose probe was sent again with that field alone
    changed, how many took another uplink. A field the hash ignores moves none; one it
    reads moves about (spines - 1) / spines of them."""
    return {f: {"qps": len(m), "moved": sum(m), "a_hashed_field_moves": round(
        len(m) * (spines - 1) / spines, 1)} for f, m in moved.items()}
