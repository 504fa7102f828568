"""The white paper's testbed experiments (its section 5.2) as scenarios, and how each
run is measured and judged (the rules and thresholds are in `rules.py`).

Pure: an experiment is a scenario mapping (what `mrcemu run` would read from YAML) and a
function from the run's report.json to what was measured, with the verdict. Times here
are full-speed seconds, as every report gives them whatever its `slowdown`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mrcemu.paper import rules
from mrcemu.topology import load as load_topology
from mrcemu.topology.latency import PAPER_ONE_WAY_CROSS_US, bdp_packets

Measured = tuple[dict[str, Any], bool | None, str]  # None: not judged
Verdict = tuple[bool | None, str]


@dataclass(frozen=True)
class Contrast:
    """A second run of an experiment's scenario on its topology changed (`topology`:
    fields to override), measured the same way and reported beside it, never judged:
    what the paper's mechanism buys, shown by its absence."""

    key: str  # the prefix of its figures in `measured`, e.g. "no_trim"
    what: str  # in words, e.g. "trimming off"
    topology: dict[str, Any]


@dataclass(frozen=True)
class Sweep:
    """An experiment of several runs (a configuration and loss level each): `runs` gives
    each one's label and scenario mapping, `measure` judges their reports together
    (label -> report.json)."""

    runs: Callable[[bool], list[tuple[str, dict]]]
    measure: Callable[[dict[str, dict], bool], Measured]
    busbw_figure: bool = True  # draw busbw.png (a collective's size sweep)


@dataclass(frozen=True)
class Experiment:
    id: str
    figure: str
    paper: str  # what the paper observed
    scenario: Callable[[bool], dict] | None  # quick -> the scenario mapping; None: not yet
    measure: Callable[[dict, bool], Measured] | None  # (report.json, quick)
    missing: str = ""  # why it cannot run yet
    contrast: Contrast | None = None
    sweep: Sweep | None = None  # instead of scenario and measure: several runs
    short: str = ""  # what it does, in a few words (tables)


STREAM_WRITE = 256 << 10


def stream_depth(topology: str = "default", write: int = STREAM_WRITE) -> int:
    """Writes a stream keeps in flight: twice a host's bandwidth-delay product, so the
    stream fills its links and a lost share of them shows as a lost share of goodput.
    At depth 4 (1 MiB, what sufficed before the scale model) a `default` stream was
    latency-bound at about 0.6 of line rate: E5's plane going down then cost it nothing.
    Never below 4 (a fabric without latency)."""
    from mrcemu.transport.config import pmtu_for

    topo = load_topology(topology)
    pmtu = pmtu_for(topo.mtu)
    return max(4, -(-2 * bdp_packets(topo, pmtu) * pmtu // write))


def _stream(pairs: list[str], duration: float, both_ways: bool = True) -> dict:
    return {"kind": "stream", "size": STREAM_WRITE, "pairs": pairs, "both_ways": both_ways,
            "duration": duration, "depth": stream_depth()}


def _scenario(desc: str, workload: dict, faults: list[dict], **extra: Any) -> dict:
    return {"description": desc, "topology": "default", "workload": workload,
            "faults": faults, "transports": ["mrc"], "map_interval_ms": 0,
            "capture": {"hosts": ["h0"], "snaplen": 256, "max_mb": 20}, **extra}


def _mrc(report: dict) -> dict:
    return report["transports"]["mrc"]


# The goodput level before the first fault: after the stream's ramp-up, up to the fault.
WARM = 0.4


def _before(series: dict, at: float) -> float | None:
    return rules.level(series, WARM, at)


def _len(quick: bool, short: float) -> float:
    """An experiment's time (a duration, an interval) from its `--quick` value: the full
    run takes twice as long. Its scenario and its measure both read it here."""
    return short if quick else 2 * short


# The `--quick` times, each read by an experiment's scenario and its measure.
E1_EVERY = 1.0  # between one port going down (or up) and the next
E2_DOWN = 2.0  # how long the 4 ports stay down
E3_EVERY = 0.5  # between one link going down and the next
E4_DOWN = 2.0  # how long the 8 links stay down
E6_DOWN = 1.5  # how long the spine stays down
STREAM = 3.0  # E5, E7, E11: the stream's length


# ---- E1, E2: a host's ports down (T0-local, h0<->h1) --------------------------------


def e1_scenario(quick: bool) -> dict:
    s = _len(quick, E1_EVERY)
    return _scenario(
        "E1 (Fig. 9a): h0<->h1 stream; h0's plane ports 0-3 go down one at a time, then "
        "come back one at a time.", _stream(["h0-h1"], 1 + 8 * s),
        [{"at": 1.0, "kind": "host-port-down", "targets": ["h0-p0", "h0-p1", "h0-p2", "h0-p3"],
          "every": s, "duration": 4 * s}])


def e1_measure(report: dict, quick: bool) -> Measured:
    mrc = _mrc(report)
    g = mrc["goodput_series"]
    s = _len(quick, E1_EVERY)
    base = _before(g, 1.0)
    # Window i (i = 1..8) holds ports_down[i] ports down; its level is judged after a
    # settling third of the step.
    down = [1, 2, 3, 4, 3, 2, 1, 0]
    ratios = [rules.ratio(rules.level(g, 1 + i * s + s / 3, 1 + (i + 1) * s),
                          base) for i in range(8)]
    expected = [(8 - d) / 8 for d in down]
    m = {"level_before_mbps": base, "ports_down": down, "share_of_before": ratios,
         "expected": expected}
    return (m, *e1_judge(m))


def e1_judge(m: dict) -> Verdict:
    return rules.steps_consistent(m["share_of_before"], m["expected"])


def e2_scenario(quick: bool) -> dict:
    d = _len(quick, E2_DOWN)
    return _scenario(
        "E2 (Fig. 9b): h0<->h1 stream; 4 of h0's 8 ports go down together, then come back.",
        _stream(["h0-h1"], 2 + d + 1.5),
        [{"at": 1.0, "kind": "host-port-down", "targets": ["h0-p0", "h0-p1", "h0-p2", "h0-p3"],
          "duration": d}])


def e2_measure(report: dict, quick: bool) -> Measured:
    mrc = _mrc(report)
    g = mrc["goodput_series"]
    d = _len(quick, E2_DOWN)
    base = _before(g, 1.0)
    during = rules.ratio(rules.level(g, 1.5, 1 + d), base)
    after = rules.ratio(rules.level(g, 1 + d + 0.7, 1 + d + 1.5), base)
    m = {"level_before_mbps": base, "share_during": during, "share_after": after}
    return (m, *e2_judge(m))


def e2_judge(m: dict) -> Verdict:
    return rules.steps_consistent([m["share_during"], m["share_after"]], [0.5, 1.0])


# ---- E3, E4: leaf-spine links (cross-T1, h0<->h7) ----------------------------------------
LINKS = [f"p{p}l0-p{p}s{p % 4}" for p in range(8)]  # one per plane, spread over spines


def e3_scenario(quick: bool) -> dict:
    every = _len(quick, E3_EVERY)
    return _scenario(
        "E3 (Fig. 9c): h0<->h7 stream; 8 leaf-spine links (one per plane) go down one "
        "after another.", _stream(["h0-h7"], 1 + 8 * every + 1),
        [{"at": 1.0, "kind": "link-down", "targets": LINKS, "every": every}])


def e4_scenario(quick: bool) -> dict:
    d = _len(quick, E4_DOWN)
    return _scenario(
        "E4 (Fig. 9d): h0<->h7 stream; 8 leaf-spine links (one per plane) go down "
        "together, and come back.", _stream(["h0-h7"], 1 + d + 1.5),
        [{"at": 1.0, "kind": "link-down", "targets": LINKS, "duration": d}])


def _bins_beside(shares: list[float | None], report: dict) -> str:
    """The paper's 200 ms bins, reported beside a verdict as what they are: how many base
    round trips one holds here (from the run's scale) and on the paper's fabric."""
    low = min((x for x in shares if x is not None), default=None)
    if low is None:
        return ""
    bin_s = rules.THRESHOLDS.bin_s
    paper = bin_s / (2 * PAPER_ONE_WAY_CROSS_US * 1e-6)
    sc = report.get("scale") or {}
    rtt = (sc.get("base_rtt_s") or {}).get("cross_leaf", 0.0)
    here = (f"~{bin_s / rtt:.0f} base round trips each here" if rtt else
            "no fixed latency here")
    return (f"; its {bin_s * 1e3:.0f} ms bins ({here}, ~{round(paper, -3):,.0f} in the "
            f"paper's) fell to {low:.3f} of the level")


def _every_failure(report: dict, until: float) -> Measured:
    """E3, E4: each failure's cost in round trips at the level before (docs/paper.md,
    the time scale), with the 200 ms bins beside it."""
    mrc = _mrc(report)
    g = mrc["goodput_series"]
    base = _before(g, 1.0)
    width = rules.THRESHOLDS.bin_s
    shares = [rules.ratio(v, base) for v in rules.bins(g, 1.0, until, width)]
    m = {"level_before_mbps": base, "cost_rtts": [f.get("cost_rtts") for f in mrc["faults"]],
         "bin_shares": shares}
    ok, why = failures_judge(m)
    return m, ok, why + _bins_beside(shares, report)


def failures_judge(m: dict) -> Verdict:
    """E3, E4: every failure's cost in round trips."""
    return rules.cost_consistent(m["cost_rtts"], "the failures")


def e3_measure(report: dict, quick: bool) -> Measured:
    every = _len(quick, E3_EVERY)
    return _every_failure(report, 1 + 8 * every + 1)


def e4_measure(report: dict, quick: bool) -> Measured:
    d = _len(quick, E4_DOWN)
    return _every_failure(report, 1 + d + 1.5)


# ---- E5, E6: a switch down ----------------------------------------------------------
def e5_scenario(quick: bool) -> dict:
    return _scenario(
        "E5 (Fig. 10): h0<->h1 stream; their plane-2 leaf p2l0 goes down.",
        _stream(["h0-h1"], _len(quick, STREAM)),
        [{"at": 1.0, "kind": "switch-down", "target": "p2l0"}])


def e5_measure(report: dict, quick: bool) -> Measured:
    mrc = _mrc(report)
    g = mrc["goodput_series"]
    end = _len(quick, STREAM)
    base = _before(g, 1.0)
    m = {"level_before_mbps": base,
         "share_after": rules.ratio(rules.level(g, 1.5, end - 0.1), base)}
    return (m, *e5_judge(m))


def e5_judge(m: dict) -> Verdict:
    return rules.steps_consistent([m["share_after"]], [7 / 8])


E6_PAIRS = ["h0-h4", "h1-h5", "h2-h6", "h3-h7"]
# p3s1 is one of plane 3's 4 spines: with it down plane 3 can carry 3/4 of its share of
# the cross-leaf load, the fabric (7 + 3/4) / 8 of the level before.
E6_PLANE, E6_SPINES = 3, 4


def e6_scenario(quick: bool) -> dict:
    d = _len(quick, E6_DOWN)
    return _scenario(
        "E6 (Fig. 11): 4 pairs across spines (h0->h4 .. h3->h7); spine p3s1 goes down, "
        "then comes back.", _stream(E6_PAIRS, 1 + d + 1, both_ways=False),
        [{"at": 1.0, "kind": "switch-down", "target": f"p{E6_PLANE}s1", "duration": d}])


def e6_measure(report: dict, quick: bool) -> Measured:
    mrc = _mrc(report)
    g = mrc["goodput_series"]
    d = _len(quick, E6_DOWN)
    base = _before(g, 1.0)
    planes = len(g.get("per_plane_mbps") or []) or 8
    kept = (E6_SPINES - 1) / E6_SPINES
    m = {"level_before_mbps": base, "share_during": rules.ratio(rules.level(g, 1.5, 1 + d), base),
         "bound": (planes - 1 + kept) / planes,
         "plane_share_before": rules.plane_share(g, E6_PLANE, WARM, 1.0),
         "plane_share_during": rules.plane_share(g, E6_PLANE, 1.5, 1 + d),
         "plane_capacity_share": kept / (planes - 1 + kept)}
    return (m, *e6_judge(m))


def e6_judge(m: dict) -> Verdict:
    """At least `no_impact` of the level before (the paper: no steady-state loss); the
    reason gives it against what the fabric with the spine down can carry, and the
    shrunk plane's share of the data against its capacity's."""
    ok, why = rules.floor_consistent([m["share_during"]], "the steady state with the spine down")
    share, bound = m["share_during"], m.get("bound")
    if share is not None and bound:
        why += f": {share / bound:.3f} of what the fabric can carry ({bound:.3f})"
    before, during = m.get("plane_share_before"), m.get("plane_share_during")
    if before is not None and during is not None:
        why += (f"; plane {E6_PLANE} carried {before:.3f} of the data before, {during:.3f} "
                f"with its spine down (its capacity's share {m['plane_capacity_share']:.3f})")
    return ok, why


# ---- E7: one EV dropping 20 % --------------------------------------------------------
def e7_scenario(quick: bool) -> dict:
    return _scenario(
        "E7 (Fig. 12, 13): h0<->h7 stream, EV set 2 a plane; the path of one active EV "
        "(h0->h7 over p2s0) drops 20 % of its packets.",
        _stream(["h0-h7"], _len(quick, STREAM)),
        [{"at": 1.0, "kind": "path-loss", "target": "h0-h7/p2s0", "value": 20}],
        transport={"ev_set_per_plane": 2})


def e7_measure(report: dict, quick: bool) -> Measured:
    mrc = _mrc(report)
    g = mrc["goodput_series"]
    end = _len(quick, STREAM)
    base = _before(g, 1.0)
    (fault,) = mrc["faults"]
    paths = fault.get("failed_paths", [])
    retired = [p for p in paths if p.get("bad_s") is not None]
    after = rules.ratio(rules.level(g, 1.5, end - 0.1), base)
    shares = [rules.ratio(v, base) for v in
              rules.bins(g, 1.0, end - 0.1, rules.THRESHOLDS.bin_s)]
    measured = {"level_before_mbps": base, "share_after": after,
                "bin_shares": shares,
                "evs_on_the_path": len(paths), "retired": len(retired),
                "data_after_retire": sum(p.get("data_after_retire") or 0 for p in paths),
                "retire_after_first_loss_s": [
                    round(p["bad_s"] - p["first_loss_s"], 4) for p in retired
                    if p.get("first_loss_s") is not None],
                # "Line rate sustained": what the lossy path cost, in round trips.
                "cost_rtts": fault.get("cost_rtts") if retired else None}
    ok, why = e7_judge(measured)
    return measured, ok, why + (_bins_beside(shares, report) if ok is not None and retired
                                and not measured["data_after_retire"] else "")


def e7_judge(m: dict) -> Verdict:
    if not m["retired"]:
        return False, "the lossy EV was never retired"
    if m["data_after_retire"]:
        return False, f"{m['data_after_retire']} data packets went onto it once retired"
    ok, why = rules.cost_consistent([m["cost_rtts"]], "the lossy path")
    return ok, f"the EV was retired at its first loss found; {why}"


# ---- E8: two flows on two EVs of one plane, one pinned -------------------------------------
# Both cross leaf 0 to leaf 1 in plane 2, restricted to its two lowest spines: EV-A over
# p2s0, EV-B over p2s1. Flow 2 has a set of one EV a plane, the lowest spine: pinned to
# EV-A. Each is held to one 20 Mb/s port, and the leaf-spine links are 20 Mb/s too, so
# both reach line rate only if flow 1 leaves EV-A to flow 2.
E8_FLOW1, E8_FLOW2 = "h0-h4", "h1-h5"
E8_PLANE = 2
E8_EV_A, E8_EV_B = f"p{E8_PLANE}s0", f"p{E8_PLANE}s1"
PORT_MBPS = 20 * 0.97  # one plane port of `default` as its NIC paces it


def e8_scenario(quick: bool) -> dict:
    one_plane = {"ev_planes": [E8_PLANE]}
    return _scenario(
        f"E8 (Fig. 14): {E8_FLOW1} and {E8_FLOW2} over plane {E8_PLANE} only, on its two "
        f"lowest spines (EV-A over {E8_EV_A}, EV-B over {E8_EV_B}); {E8_FLOW2} is pinned "
        "to EV-A.",
        {**_stream([E8_FLOW1, E8_FLOW2], _len(quick, STREAM), both_ways=False),
         "pair_transport": {E8_FLOW1: {**one_plane, "ev_set_per_plane": 2},
                            E8_FLOW2: {**one_plane, "ev_set_per_plane": 1}}}, [])


def e8_measure(report: dict, quick: bool) -> Measured:
    mrc = _mrc(report)
    flows = mrc.get("per_flow", {})
    paths = mrc.get("flow_paths", {})
    rates = [flows.get(f, {}).get("goodput_mbps") for f in (E8_FLOW1, E8_FLOW2)]
    shares = [rules.ratio(r, PORT_MBPS) for r in rates]
    one = paths.get("flows", {}).get(E8_FLOW1, {})
    two = paths.get("flows", {}).get(E8_FLOW2, {})
    bin_s = paths.get("bin_s", 0.05)
    # The stream's second half (its writes start at about 0 s of the report).
    a, b = int(_len(quick, STREAM) / 2 / bin_s), int(_len(quick, STREAM) / bin_s)

    def on(per: dict, name: str) -> int:
        return sum(per.get(name, [])[a:b])

    total = sum(on(one, n) for n in one)
    late_a = rules.ratio(on(one, E8_EV_A), total)
    measured = {"goodput_mbps": dict(zip((E8_FLOW1, E8_FLOW2), rates, strict=True)),
                "share_of_port": dict(zip((E8_FLOW1, E8_FLOW2), shares, strict=True)),
                "flow1_paths": sorted(one), "flow2_paths": sorted(two),
                "flow1_on_ev_a_second_half": late_a}
    return (measured, *e8_judge(measured))


def e8_judge(m: dict) -> Verdict:
    th = rules.THRESHOLDS
    shares = list(m["share_of_port"].values())
    late_a, one, two = m["flow1_on_ev_a_second_half"], m["flow1_paths"], m["flow2_paths"]
    if any(r is None for r in m["goodput_mbps"].values()) or late_a is None:
        return False, "a flow delivered nothing"
    if sorted(two) != [E8_EV_A] or not set(one) <= {E8_EV_A, E8_EV_B}:
        return False, f"the flows left their EVs: flow 1 on {sorted(one)}, flow 2 on {sorted(two)}"
    ok = min(shares) >= th.near_line_rate and late_a <= th.moved_off
    return ok, (f"flow 1 sent {late_a:.2f} of its packets on EV-A in the second half "
                f"(moved: <= {th.moved_off:.2f}); the flows carried {shares[0]:.2f} and "
                f"{shares[1]:.2f} of a port (near line rate: >= {th.near_line_rate:.2f})")


# ---- E11: incast beside a victim --------------------------------------------------------
E11_INCAST = ["h4-h0", "h5-h0", "h6-h0", "h8-h0", "h9-h0", "h10-h0", "h12-h0"]
E11_VICTIM = "h13-h3"
PORTS_MBPS = 8 * 20 * 0.97  # a host's 8 ports of rack4 as its NIC paces them


def e11_scenario(quick: bool) -> dict:
    return {**_scenario(
        "E11 (Fig. 18): 7 hosts of three other racks stream to h0 while h13 streams to "
        "h3, an idle host in h0's rack.",
        _stream([*E11_INCAST, E11_VICTIM], _len(quick, STREAM), both_ways=False), []),
        "topology": "rack4"}


def e11_measure(report: dict, quick: bool) -> Measured:
    mrc = _mrc(report)
    flows = mrc.get("per_flow", {})
    recovery = {x: mrc.get(x) for x in ("trims", "retransmits", "rtos")}
    incast = [flows.get(f, {}).get("goodput_mbps") for f in E11_INCAST]
    victim = flows.get(E11_VICTIM, {}).get("goodput_mbps")
    measured = {"victim_mbps": victim, "victim_share": rules.ratio(victim, PORTS_MBPS),
                "incast_mbps": incast,
                "fairness": rules.jain([x for x in incast if x is not None]), **recovery}
    return (measured, *e11_judge(measured))


def e11_judge(m: dict) -> Verdict:
    th = rules.THRESHOLDS
    if m["victim_mbps"] is None or any(x is None for x in m["incast_mbps"]):
        return False, "a flow delivered nothing"
    share, fair = m["victim_share"], m["fairness"]
    ok = share >= th.victim and fair is not None and fair >= th.fairness
    return ok, (f"the victim carried {share:.2f} of its ports (the paper: unaffected, here "
                f">= {th.victim:.2f}); the incast flows' fairness {fair:.3f} (Jain's index; "
                f"fair: >= {th.fairness:.2f})")


# ---- E0: the point-to-point table (white paper 5.2.1), on the scale model ----
# ib_write_lat's analogue: 2-byte writes one after another, within a leaf (h0 -> h1,
# the paper's T0-local) and across (h0 -> h7, cross-T1); its one-way latency is half
# the median completion. ib_write_bw's: 32 KB writes kept in flight h0 -> h7 (the
# paper's four QPs; MRC sprays its one QP, so the depth stands for theirs: 64 writes,
# 2 MiB, more than the 1.3 MB a host has in flight over a base round trip).
E0_PAPER_ONE_WAY_US = {"local": 5.09, "cross": 6.54}
E0_PAIRS = {"local": (0, 1), "cross": (0, 7)}


PERFTEST = ("ib_write_lat", "ib_write_bw")
E0_BW_QPS = 4  # the paper's ib_write_bw ran 4 QPs


def perftest_installed() -> bool:
    return all(shutil.which(p) for p in PERFTEST)


def e0_runs(quick: bool) -> list[tuple[str, dict]]:
    """The built-in analogues, then (with perftest installed) perftest itself through the
    verbs shim: the tools the paper measured with, unmodified, on the same fabric."""
    out = []
    for where, (a, b) in E0_PAIRS.items():
        out.append((f"lat-{where}", _scenario(
            f"E0 (5.2.1): ib_write_lat's analogue, 2-byte writes h{a} -> h{b} ({where})",
            {"kind": "single", "src": f"h{a}", "dst": f"h{b}", "size": 2,
             "iterations": 10 if quick else 30}, [])))
    out.append(("bw", _scenario(
        "E0 (5.2.1): ib_write_bw's analogue, 32 KB writes h0 -> h7, 64 in flight",
        {"kind": "stream", "size": "32KiB", "pairs": ["h0-h7"], "both_ways": False,
         "duration": 2.0 if quick else 4.0, "depth": 64}, [])))
    return out + (_perftest_runs(quick) if perftest_installed() else [])


def _programs(server: str, client: str, cmd: str) -> dict:
    return {"kind": "exec", "programs": [{"host": server, "run": cmd},
                                         {"host": client, "run": f"{cmd} {server}"}]}


def _perftest_runs(quick: bool) -> list[tuple[str, dict]]:
    out = []
    for where, (a, b) in E0_PAIRS.items():
        cmd = f"ib_write_lat -s 2 -n {10 if quick else 30}"
        out.append((f"perftest-lat-{where}", _scenario(
            f"E0 (5.2.1): perftest's {cmd}, unmodified, h{a} -> h{b} ({where})",
            _programs(f"h{b}", f"h{a}", cmd), [])))
    # per QP: the bytes the analogue's stream carries at line rate in its duration
    iters = (300 if quick else 600)
    cmd = f"ib_write_bw -s 32768 -q {E0_BW_QPS} -n {iters}"
    out.append(("perftest-bw", _scenario(f"E0 (5.2.1): perftest's {cmd}, unmodified, h0 -> h7",
                                         _programs("h7", "h0", cmd), [])))
    return out


def _client_perftest(report: dict | None) -> dict | None:
    """What perftest's client measured (at full speed), from a run's report."""
    progs = (((report or {}).get("transports") or {}).get("mrc") or {}).get("programs")
    return (progs[-1].get("perftest") if progs else None)


def e0_measure(reports: dict[str, dict], quick: bool) -> Measured:
    one_way: dict[str, float | None] = {}
    for where in E0_PAIRS:
        rep = reports.get(f"lat-{where}") or {}
        per = ((rep.get("transports") or {}).get("mrc") or {}).get("per_size", {})
        p50 = (per.get("2") or {}).get("transport_s_p50")
        # half the round trip, in the paper's seconds (the report's full-speed seconds
        # over the model's time scale)
        one_way[where] = (round(p50 / 2 / rep["scale"]["time_scale"] * 1e6, 3)
                          if p50 and "scale" in rep else None)
    bw = reports.get("bw") or {}
    mrc = (bw.get("transports") or {}).get("mrc") or {}
    topo = load_topology("default")
    line = topo.planes * topo.host_link_mbps
    share = rules.ratio(mrc.get("goodput_mbps"), line)
    measured: dict = {"one_way_us": one_way, "paper_one_way_us": E0_PAPER_ONE_WAY_US,
                      "bandwidth_share": share}
    if any(k.startswith("perftest-") for k in reports):
        pt: dict = {"one_way_us": {}}
        for where in E0_PAIRS:
            rep = reports.get(f"perftest-lat-{where}")
            fig = _client_perftest(rep)
            pt["one_way_us"][where] = (
                round(fig["typical_one_way_s"] / rep["scale"]["time_scale"] * 1e6, 3)
                if fig and fig["kind"] == "latency" and "scale" in rep else None)
        fig = _client_perftest(reports.get("perftest-bw"))
        pt["bandwidth_share"] = (rules.ratio(fig["average_mbps"], line)
                                 if fig and fig["kind"] == "bandwidth" else None)
        measured["perftest"] = pt
    return (measured, *e0_judge(measured))


def _e0_figures(one_way: dict, share: float | None) -> tuple[bool, str] | None:
    """Whether one set of E0's figures is as the paper's, and them in words; None if a
    run did not complete."""
    th = rules.THRESHOLDS
    if any(v is None for v in one_way.values()) or share is None:
        return None
    off = max(abs(one_way[w] / E0_PAPER_ONE_WAY_US[w] - 1) for w in E0_PAIRS)
    ok = off <= th.latency_tolerance and share >= th.bandwidth_share
    return ok, (f"one way {one_way['local']:.2f} µs within a leaf and {one_way['cross']:.2f} "
                f"µs across (paper 5.09 / 6.54, within {th.latency_tolerance:.0%} each: "
                f"{'yes' if off <= th.latency_tolerance else 'no'}); 32 KB writes "
                f"{share:.2f} of line rate (at least {th.bandwidth_share:.2f}; paper ~0.96)")


def e0_judge(m: dict) -> Verdict:
    got = _e0_figures(m["one_way_us"], m["bandwidth_share"])
    if got is None:
        return False, "a run did not complete"
    ok, why = got
    if "perftest" in m:  # the tools themselves, judged by the same rules
        pt = _e0_figures(m["perftest"]["one_way_us"], m["perftest"]["bandwidth_share"])
        if pt is None:
            return False, why + "; perftest: a run did not complete"
        ok, why = ok and pt[0], f"{why}; perftest itself: {pt[1]}"
    return ok, why


# ---- E9, E10: collectives over a message-size sweep, MRC against the paper's RoCE ----
# MRC sprays one QP a pair over `default`'s 8 planes; RoCE runs on `ecmp`, one plane of
# the same aggregate bandwidth whose switches hash each QP's flow onto a spine, with 1
# QP a pair or E9_QPS (the paper's 16 for 64 hosts; 8 here, for 8). Loss is at the NICs'
# ingress (`host-loss` on every host), in percent.
E9_QPS = 8
SWEEP_CONFIGS = (("mrc", "default", "mrc", 1), ("roce-1qp", "ecmp", "roce", 1),
                 (f"roce-{E9_QPS}qp", "ecmp", "roce", E9_QPS))
HOSTS8 = [f"h{h}" for h in range(8)]


def sweep_sizes(quick: bool) -> list[str]:
    return ["64KiB", "1MiB"] if quick else ["64KiB", "256KiB", "1MiB"]


def sweep_losses(quick: bool) -> list[float]:
    return [0.0, 1.0] if quick else [0.0, 0.1, 1.0]


def loss_label(loss: float) -> str:
    return f"loss{loss:g}".replace(".", "_")


def _sweep_runs(kind: str, fig: str, quick: bool) -> list[tuple[str, dict]]:
    out = []
    for loss in sweep_losses(quick):
        faults = ([{"at": 0.0, "kind": "host-loss", "targets": HOSTS8, "value": loss}]
                  if loss else [])
        for label, topo, transport, qps in SWEEP_CONFIGS:
            out.append((f"{label}-{loss_label(loss)}", {
                "description": f"{fig}: 8-host {kind} over a size sweep, {label} on {topo}, "
                               f"{loss:g} % loss at every NIC",
                "topology": topo, "transports": [transport], "map_interval_ms": 0,
                "workload": {"kind": kind, "size": sweep_sizes(quick),
                             "iterations": 2 if quick else 3, "qps": qps},
                "faults": faults, "timeout_s": 60 if quick else 150,
                "capture": {"hosts": ["h0"], "snaplen": 256, "max_mb": 10}}))
    return out


def sweep_table(reports: dict[str, dict], quick: bool) -> dict[str, dict[str, dict]]:
    """Bus bandwidth (full-speed Mb/s) per loss level, configuration and size; None where
    a run did not complete that size."""
    out: dict[str, dict[str, dict]] = {}
    for loss in sweep_losses(quick):
        row = out.setdefault(f"{loss:g}", {})
        for label, _topo, transport, _qps in SWEEP_CONFIGS:
            rep = reports.get(f"{label}-{loss_label(loss)}") or {}
            per = ((rep.get("transports") or {}).get(transport) or {}).get("per_size", {})
            row[label] = {sz: (per.get(str(n)) or {}).get("busbw_mbps")
                          for sz, n in zip(sweep_sizes(quick), _sizes_bytes(quick),
                                           strict=True)}
    return out


def _sizes_bytes(quick: bool) -> list[int]:
    from mrcemu.units import parse_size

    return [parse_size(x) for x in sweep_sizes(quick)]


def sweep_absent(reports: dict[str, dict], quick: bool) -> dict[str, str]:
    """The sweep's runs that gave no figures at all, each with why: no report (the run is
    missing), or a report without its transport's result (the run failed). A completed
    run that timed out at a size still has figures for the sizes before it."""
    out = {}
    for label, _topo, transport, _qps in SWEEP_CONFIGS:
        for loss in sweep_losses(quick):
            key = f"{label}-{loss_label(loss)}"
            rep = reports.get(key)
            if not rep:
                out[key] = "missing: no report"
            elif not (rep.get("transports") or {}).get(transport):
                out[key] = f"failed: its report has no {transport} result"
    return out


def _sweep_measure(reports: dict[str, dict], quick: bool, every_size: bool) -> Measured:
    table = sweep_table(reports, quick)
    clean = table[f"{sweep_losses(quick)[0]:g}"]
    big = sweep_sizes(quick)[-1]
    measured = {"busbw_mbps": table, "runs_without_figures": sweep_absent(reports, quick),
                "roce_1qp_share_of_mrc": rules.ratio(clean["roce-1qp"][big],
                                                     clean["mrc"][big])}
    ok, why = sweep_judge(measured, every_size)
    return measured, ok, why


def sweep_judge(measured: dict[str, Any], every_size: bool) -> tuple[bool | None, str]:
    """E9, E10's verdict from their figures: MRC over each RoCE configuration, compared
    only where both figures exist. A run with no figures, or no comparison at all, leaves
    the experiment not judged (None), with the reason: a missing figure is never a lead."""
    table = measured["busbw_mbps"]
    absent = measured.get("runs_without_figures") or {}
    if absent:
        return None, "not judged: " + "; ".join(f"run {k} {v}" for k, v in absent.items())
    sizes = list(next(iter(table.values()))["mrc"])
    big = sizes[-1]
    ratios: dict[str, float | None] = {}
    without: list[str] = []
    for loss, row in table.items():
        for sz in sizes if every_size else [big]:
            for r in (c[0] for c in SWEEP_CONFIGS[1:]):
                key = f"{loss}%/{sz}/mrc:{r}"
                if row["mrc"][sz] is None or row[r][sz] is None:
                    without.append(key)
                else:
                    ratios[key] = rules.ratio(row["mrc"][sz], row[r][sz])
    what = "MRC over RoCE (" + ("every size" if every_size else f"at {big}") + ")"
    if not ratios:
        return None, f"not judged: no comparison of {what} has both figures"
    ok, why = rules.ahead(ratios, what)
    if without:
        why += (f"; {len(without)} comparisons without both figures not judged "
                f"({', '.join(without[:3])})")
    collide = measured.get("roce_1qp_share_of_mrc")
    return ok, (f"{why}; without loss one RoCE QP a pair carried {collide:.2f} of MRC's "
                f"bus bandwidth at {big}" if collide is not None else why)


def e9_runs(quick: bool) -> list[tuple[str, dict]]:
    return _sweep_runs("ring-allreduce", "E9 (Fig. 16)", quick)


def e9_measure(reports: dict[str, dict], quick: bool) -> Measured:
    # "MRC 1 QP beats RoCE 16 QPs", at the sizes where bandwidth, not latency, rules:
    # the largest; the paper's small sizes are latency-bound for every transport.
    return _sweep_measure(reports, quick, every_size=False)


def e10_runs(quick: bool) -> list[tuple[str, dict]]:
    return _sweep_runs("all-to-all", "E10 (Fig. 17)", quick)


def e10_measure(reports: dict[str, dict], quick: bool) -> Measured:
    return _sweep_measure(reports, quick, every_size=True)  # "MRC ahead at every size"


EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment("E0", "5.2.1", "point to point: one way 5.09 µs T0-local, 6.54 µs cross-T1; "
               "~96 % of peak bandwidth", None, None,
               sweep=Sweep(e0_runs, e0_measure, busbw_figure=False),
               short="point-to-point latency and bandwidth"),
    Experiment("E1", "9a", "throughput steps down one port at a time and back up; < 1 s "
               "interruption each time", e1_scenario, e1_measure,
               short="a host's ports down one at a time, and back"),
    Experiment("E2", "9b", "4 of 8 NIC links flapping: settles at about half, recovers on "
               "restore", e2_scenario, e2_measure,
               short="half of a host's ports down together"),
    Experiment("E3", "9c", "T0-T1 links downed one per second: minimal impact",
               e3_scenario, e3_measure,
               short="leaf-spine links down one after another"),
    Experiment("E4", "9d", "8 T0-T1 links flapping together: negligible impact",
               e4_scenario, e4_measure,
               short="eight leaf-spine links down together"),
    Experiment("E5", "10", "T0 switch down: steady state drops by 1/8", e5_scenario,
               e5_measure,
               short="a leaf switch down"),
    Experiment("E6", "11", "T1 switch down, 4 QPs cross-T1: no steady-state loss",
               e6_scenario, e6_measure,
               short="a spine switch down"),
    Experiment("E7", "12, 13", "an EV dropping 20 %: it goes inactive at once, another is "
               "activated, line rate is sustained", e7_scenario, e7_measure,
               short="one path dropping 20 % of its packets"),
    Experiment("E8", "14", "two flows on two EVs of one plane, flow 2 pinned to EV-A: "
               "flow 1 moves to EV-B via ECN, both near line rate", e8_scenario, e8_measure,
               short="two flows, one pinned to a shared path"),
    Experiment("E9", "16", "ring all-reduce sweep: RoCE 1 QP ~half (ECMP collisions); MRC 1 "
               "QP beats RoCE 16 QPs; at 1 % loss MRC ~1/3, RoCE unusable", None, None,
               sweep=Sweep(e9_runs, e9_measure),
               short="ring all-reduce against RoCE, with loss"),
    Experiment("E10", "17", "all-to-all sweep: MRC ahead at every size; RoCE QP scaling "
               "does not help", None, None, sweep=Sweep(e10_runs, e10_measure),
               short="all-to-all against RoCE, with loss"),
    Experiment("E11", "18", "7:1 incast plus a victim: fair sharing, victim unaffected",
               e11_scenario, e11_measure,
               # E11's note in docs/paper.md: the same with trimming disabled, for contrast;
               # the switches then drop what overflows their buffer.
               contrast=Contrast("no_trim", "trimming off", {"trim_threshold_bytes": 0}),
               short="incast beside a victim flow"),
)

# Each experiment's verdict from its measured figures alone (what paper.json keeps), so a
# committed run can be judged again and must agree with what it recorded.
JUDGES: dict[str, Callable[[dict], Verdict]] = {
    "E0": e0_judge, "E1": e1_judge, "E2": e2_judge, "E3": failures_judge,
    "E4": failures_judge, "E5": e5_judge, "E6": e6_judge, "E7": e7_judge, "E8": e8_judge,
    "E9": lambda m: sweep_judge(m, every_size=False),
    "E10": lambda m: sweep_judge(m, every_size=True), "E11": e11_judge}


def rejudge(row: dict) -> Verdict:
    """An experiment's verdict again, from the figures its row in paper.json measured."""
    return JUDGES[row["id"]](row["measured"])


BY_ID = {e.id: e for e in EXPERIMENTS}
