"""The failure study, pure: what one link failure inside a step of a synchronous job
costs, and whom it idles.

Each trial is three steps running one cross-leaf permutation (the same flows, on the
same QPs, hashed onto the same spines): the twin, untouched; the faulted step, inside
which a link between a leaf and a spine fails at a random moment, down or gray in turn,
healing when the step ends; and the step after, healed. The twin is the step's time
without the fault; the step after says what the fault still costs once healed (its QPs'
state), and carries that cost instead of the next trial's twin. No fabric here:
failures_run.py runs what this plans, and `trial_rows` reads its report."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

from mrcemu.study.fabrics import ECMP_FABRICS, MRC_FABRICS

KINDS = ("link-down", "gray")
STEPS_A_TRIAL = 3  # the twin, the faulted step, the step after
# The transports a size runs: MRC on the multi-plane fabric, RoCE with one QP a pair on
# its ECMP twin (the paper's baseline, and the census's).
TRANSPORTS = ("mrc", "roce")


@dataclass(frozen=True)
class Trial:
    """One trial's fault: its kind, the leaf-spine link, and when inside the step, as
    a share of the step's ideal time (the least it can take: each host's write at
    line rate), so that it always falls inside the step."""

    index: int
    kind: str
    target: str
    at_share: float

    @property
    def step(self) -> int:
        """The faulted step; the one before is its twin, the one after its aftermath."""
        return STEPS_A_TRIAL * self.index + 1


def topology_of(hosts: int, transport: str) -> str:
    return (MRC_FABRICS if transport == "mrc" else ECMP_FABRICS)[hosts]


def fabric_links(topology: str) -> list[str]:
    """The links between a leaf and a spine, every plane's, by name (`p0l1-p0s3`)."""
    from mrcemu.topology import Layout, load

    return [link.name for link in Layout(load(topology)).links
            if not link.a.node.startswith("h")]


def trials(topology: str, n: int, seed: int) -> list[Trial]:
    """`n` trials, drawn from `seed`: the kinds in turn, each a uniform link and moment."""
    rng = random.Random(f"failures:{seed}")
    links = fabric_links(topology)
    return [Trial(j, KINDS[j % len(KINDS)], rng.choice(links), round(rng.random(), 4))
            for j in range(n)]


def ideal_step_s(topology: str) -> float:
    """A step's least time at full speed: one default write at a host's line rate."""
    from mrcemu.scenario.model import default_step_size
    from mrcemu.topology import load

    topo = load(topology)
    return default_step_size(topo) * 8 / (topo.planes * topo.host_link_mbps * 1e6)


def base_rtt_s(topology: str) -> float:
    """The base round trip across leaves at full speed: the unit of a stall."""
    from mrcemu.topology import latency, load

    return latency.longest_rtt_s(load(topology))


def mapping(hosts: int, transport: str, n: int, seed: int) -> dict:
    """The run as a scenario file's mapping: `n` permutations run three times each, a
    fault in each second run. Clustermapper stays off: nothing here reads its map, and
    its probes would take CPU from the fabric."""
    topology = topology_of(hosts, transport)
    ideal = ideal_step_s(topology)
    return {"description": f"failure study, {hosts} hosts: {transport}",
            "topology": topology, "transports": [transport], "seed": seed,
            "workload": {"kind": "permutation", "steps": n, "repeat": STEPS_A_TRIAL},
            "faults": [{"step": t.step, "at": round(t.at_share * ideal, 6), "kind": t.kind,
                        "target": t.target} for t in trials(topology, n, seed)],
            "timeout_s": 600 + 45 * n, "map_interval_ms": 0}


def _flow_times(step: dict, port_bytes_s: float, size: int) -> list[float | None]:
    """Each flow's time in a step, from its share of its port over its own time."""
    return [size / (s * port_bytes_s) if s else None for s in step["flow_share"]]


def trial_rows(summary: dict, hosts: int, transport: str) -> list[dict]:
    """Each trial from a run's summary (its transport's part of report.json): the three
    steps' times; the faulted step's extra time over its twin, in seconds and base
    round trips, and the step after's (healed); whether a flow of the step crossed the
    link (its packets in the twin); and the amplification: the hosts the extra time
    idled, over the flows' own extra time (N where one flow alone is late and every host
    waits; 1 where every flow is as late as the step)."""
    from mrcemu.scenario.model import default_step_size
    from mrcemu.topology import load

    topology = topology_of(hosts, transport)
    topo = load(topology)
    port = topo.planes * topo.host_link_mbps * 1e6 / 8
    size = default_step_size(topo)
    rtt = base_rtt_s(topology)
    each = {e["step"]: e for e in (summary.get("steps") or {}).get("each", [])
            if e["iteration"] == 0}
    out = []
    for f in summary.get("step_faults", []):
        twin, hit, after = (each.get(f["step"] + k) for k in (-1, 0, 1))
        row = {"step": f["step"], "kind": f["kind"], "target": f["target"],
               "at_s": f["at_s"], "error": f["error"],
               "crossed": None if f["link_packets_step_before"] is None
               else f["link_packets_step_before"] > 0}
        if twin and hit and f["at_s"] is not None:
            extra = hit["time_s"] - twin["time_s"]
            late = [max(0.0, a - b) for a, b in zip(_flow_times(hit, port, size),
                                                    _flow_times(twin, port, size),
                                                    strict=True) if a and b]
            row.update(twin_s=twin["time_s"], step_s=hit["time_s"], extra_s=round(extra, 6),
                       extra_rtts=round(extra / rtt, 2),
                       amplification=round(hosts * max(0.0, extra) / sum(late), 2)
                       if sum(late) > 0 else None)
            if after:
                row.update(after_s=after["time_s"],
                           after_rtts=round((after["time_s"] - twin["time_s"]) / rtt, 2))
        out.append(row)
    return out


def _pct(xs: list[float], q: float) -> float | None:
    from mrcemu.study.collisions import _pct as pct

    return pct(xs, q)


def summarize(rows: list[dict], hosts: int, transport: str) -> dict:
    """A transport's trials at a size, per kind: how many acted, the share whose link
    carried a flow of the step (P_hit), and over those, the extra step time (median,
    p90, max, in base round trips and seconds), the step after's (median, max) and the
    median amplification; over the others, the median extra (what a step varies by
    without a fault on its flows)."""
    out: dict = {"base_rtt_s": base_rtt_s(topology_of(hosts, transport))}
    for kind in KINDS:
        acted = [r for r in rows if r["kind"] == kind and "extra_s" in r]
        hit = [r for r in acted if r["crossed"]]
        missed = [r for r in acted if r["crossed"] is False]
        rtts = [r["extra_rtts"] for r in hit]
        amp = [r["amplification"] for r in hit if r["amplification"] is not None]
        after = [r["after_rtts"] for r in hit if "after_rtts" in r]
        out[kind] = {
            "trials": sum(1 for r in rows if r["kind"] == kind), "acted": len(acted),
            "p_hit": round(len(hit) / len(acted), 3) if acted else None,
            "extra_rtts_median": _round(statistics.median(rtts) if rtts else None),
            "extra_rtts_p90": _round(_pct(rtts, 90)),
            "extra_rtts_max": _round(max(rtts, default=None)),
            "extra_s_median": _round(statistics.median([r["extra_s"] for r in hit])
                                     if hit else None, 4),
            "after_rtts_median": _round(statistics.median(after) if after else None),
            "after_rtts_max": _round(max(after, default=None)),
            "amplification_median": _round(statistics.median(amp) if amp else None),
            "missed_extra_rtts_median": _round(statistics.median(
                [r["extra_rtts"] for r in missed]) if missed else None)}
    return out


def _round(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(x, digits)


def grows(maxima: list[float]) -> bool:
    """Whether the worst extra time grows with the size: each larger size's above the
    smaller's (a stall that does not depend on N stays level, up and down)."""
    return len(maxima) > 1 and all(b > a for a, b in zip(maxima, maxima[1:], strict=False))
