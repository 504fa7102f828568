"""`make bench`, section "Latency off and on: what the scale model changed": the failover,
incast, E3, E7 and E9, without and with the paper's fixed latencies in the NICs, side by
side in one run."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

from benchmarks.common import BenchError, fid, mrcemu, run_report
from benchmarks.failover import _retired
from mrcemu.topology import Topology, latency, load
from mrcemu.transport.config import TransportConfig

TITLE = "Latency off and on: what the scale model changed"

MODES = ("off", "on")
# One pace for the failover with the latency off and on, at which a 2-core host runs it
# faithfully for both transports.
FAILOVER_SLOWDOWN = 10
# incast at its own faithful pace on 2 cores, MRC alone.
INCAST_SLOWDOWN = 4


def _cost(fault: dict) -> str:
    c = fault.get("cost_rtts")
    return "-" if c is None else f"{c:.2f}"


def _failover(tmp: Path) -> str:
    rows = []
    for mode in MODES:
        rep = run_report("failover", f"{tmp}/failover-{mode}", FAILOVER_SLOWDOWN,
                         "--latency", mode)
        m, r = rep["transports"]["mrc"], rep["transports"]["roce"]
        fm = {f["kind"]: f for f in m["faults"]}
        base = rep["scale"]["base_rtt_s"]["cross_leaf"]
        rows.append(
            f"| {mode} | {base * 1e3:.1f} ms | {m['job_completion_s']:.2f} s | "
            f"{r['job_completion_s']:.2f} s | "
            f"**{r['job_completion_s'] / m['job_completion_s']:.2f}** | "
            f"{_retired(fm['switch-down'])} | {_retired(fm['gray'])} | "
            f"{' / '.join(_cost(f) for f in m['faults'])} | "
            f"{m['rtos']} | {fid(m.get('fidelity'))} / {fid(r.get('fidelity'))} |")
    return ("**Failover** (`sudo mrcemu run failover --slowdown "
            f"{FAILOVER_SLOWDOWN} --latency off|on`; times in full-speed seconds, RTTs the "
            "connection's smoothed round trips):\n\n"
            "| latency | base RTT, cross-leaf | MRC job | RoCE job | RoCE / MRC | spine: "
            "stopped / retired after the loss, max RTTs (within 2 / 4; data after) | gray: "
            "the same | cost in RTTs, spine / gray | MRC RTOs | fidelity MRC / RoCE |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def _incast(tmp: Path) -> str:
    import yaml

    from mrcemu.scenario.model import SCENARIO_DIR

    spec = yaml.safe_load((SCENARIO_DIR / "incast.yaml").read_text())
    path = tmp / "incast-mrc.yaml"
    spec = {k: v for k, v in spec.items() if k != "capture"}  # no pcap: not measured here
    path.write_text(yaml.safe_dump(dict(spec, transports=["mrc"])))
    rows = []
    for mode in MODES:
        rep = run_report(str(path), f"{tmp}/incast-{mode}", INCAST_SLOWDOWN,
                         "--latency", mode)
        m = rep["transports"]["mrc"]
        flows = m["per_flow"].values()
        active = [f["active_s"] for f in flows]
        good = [f["goodput_mbps"] or 0.0 for f in flows]
        jain = sum(good) ** 2 / (len(good) * sum(g * g for g in good))
        rows.append(f"| {mode} | {m['job_completion_s']:.2f} s | "
                    f"{max(active) / min(active):.2f} | {jain:.3f} | {m['trims']} | "
                    f"{m['rtos']} | {'yes' if m['integrity_ok'] else 'NO'} | "
                    f"{fid(m.get('fidelity'))} |")
    return ("**Incast** (the `incast` scenario, MRC alone: seven hosts write "
            f"{spec['workload']['size']} each to h7, {spec['workload']['iterations']} "
            f"times; `mrcemu run ... --slowdown {INCAST_SLOWDOWN} --latency off|on`). The "
            "spread is the slowest sender's time with a write in flight over the "
            "fastest's, over all iterations; Jain's index is over the senders' goodput in "
            "that time (1 is fair):\n\n"
            "| latency | job | spread, slowest / fastest sender | Jain's index | trims | "
            "RTOs | hashes equal | fidelity |\n|---|---|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")


def _paper(tmp: Path) -> str:
    docs = {}
    for mode in MODES:
        out = tmp / f"paper-{mode}"
        r = mrcemu("paper", "E3", "E7", "E9", "--quick", "--latency", mode, "--out", str(out),
                   timeout=3600)
        if r.returncode:
            raise BenchError(f"`mrcemu paper E3 E7 E9 --quick --latency {mode}` failed: "
                             f"{r.stderr.strip()[-500:]}")
        docs[mode] = {e["id"]: e for e in json.loads((out / "paper.json").read_text())
                      ["experiments"]}
    rows = []
    for eid in ("E3", "E7", "E9"):
        for mode in MODES:
            e = docs[mode][eid]
            verdict = "consistent" if e["consistent"] else "**not consistent**"
            rows.append(f"| {eid} | {mode} | {_figure(eid, e['measured'])} | {verdict} | "
                        f"{'faithful' if e['faithful'] else '**NOT faithful**'} | "
                        f"{e['reason']} |")
    return ("**The paper's E3, E7 and E9** (`sudo mrcemu paper E3 E7 E9 --quick --latency "
            "off|on`):\n\n"
            "| experiment | latency | key figure | verdict | fidelity | verdict's reason |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def _figure(eid: str, m: dict | None) -> str:
    """The one number each experiment turns on: the worst failure's cost in round trips
    at the level before (E3, E7); MRC's bus bandwidth over one RoCE QP's at 1 MiB, per
    NIC loss rate (E9)."""
    if not m:
        return "-"
    if eid in ("E3", "E7"):
        cost = m.get("cost_rtts")  # E3: one per failure; E7: its one lossy path's
        costs = [c for c in (cost if isinstance(cost, list) else [cost]) if c is not None]
        return f"cost <= {max(costs):.2f} RTTs" if costs else "-"
    bw = m["busbw_mbps"]

    def ratio(loss: str) -> str:
        mrc, roce = bw[loss]["mrc"].get("1MiB"), bw[loss]["roce-1qp"].get("1MiB")
        return f"{mrc / roce:.2f}" if mrc and roce else f"- (MRC {mrc}, RoCE {roce})"

    return ", ".join(f"{loss} %: {ratio(loss)}" for loss in bw) + \
        " (MRC / RoCE 1 QP, 1 MiB)"


def _part(fn, tmp: Path) -> str:
    """One of the section's three parts: a part that fails says so in its place, and
    the others' half hour of runs is kept."""
    try:
        return fn(tmp)
    except BenchError as e:
        return f"{fn.__name__.strip('_').capitalize()}: {e}\n"


def latency_on_off() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        parts = [_part(fn, tmp) for fn in (_failover, _incast, _paper)]
    topo = load("default")
    return ("What it runs: Each pair is run one after the "
            "other on this host: `--latency off` is the fabric before the scale model "
            "(serialization and queueing alone; a cross-leaf round trip of a few packet "
            "times), `on` has the paper's fixed latencies at 1:5000 (a "
            f"{latency.longest_rtt_s(topo) * 1e3:.1f} ms cross-leaf base round trip; "
            "docs/topologies.md, the scale model). RoCE's go-back-N window is "
            f"{TransportConfig.roce_window} packets plus its port's bandwidth-delay product "
            "over the fixed round trip (`roce_window`): "
            f"{_window(dataclasses.replace(topo, nic_latency_us=0, switch_latency_us=0))} with "
            f"the latency off, {_window(topo)} on `default` and {_window(load('ecmp'))} on "
            "`ecmp` with it on.\n\n" + "\n".join(parts))


def _window(topo: Topology) -> int:
    return TransportConfig.for_topology(topo).roce_window


run = latency_on_off
