"""`make bench`, section "Scale model: the paper's latencies in the NICs": the idle round
trip, the bandwidth-delay product and the paper's point-to-point table (docs/topologies.md,
the scale model)."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from pathlib import Path

from benchmarks.common import BenchError, fid, mrcemu

TITLE = "Scale model: the paper's latencies in the NICs"

# The idle round trip's pairs on `default`: h0 and h1 share leaf 0, h7 is on leaf 1.
PAIRS = {"cross-leaf": ("h0", "h7"), "same leaf": ("h0", "h1")}
SENDS = 3


def _sends(topology: str) -> dict[str, list[dict]]:
    """A 2-byte write's completion, SENDS times per pair, on a fabric of its own."""
    mrcemu("clean")
    if mrcemu("up", topology).returncode:
        raise BenchError(f"`mrcemu up {topology}` failed")
    try:
        out: dict[str, list[dict]] = {}
        for name, (a, b) in PAIRS.items():
            for _ in range(SENDS):
                r = mrcemu("send", a, b, "--size", "2", "--json")
                if r.returncode:
                    raise BenchError(f"`mrcemu send {a} {b} --size 2` failed: {r.stderr[-300:]}")
                out.setdefault(name, []).append(json.loads(r.stdout))
        return out
    finally:
        mrcemu("down")


def s1(tmp: Path) -> str:
    from mrcemu.topology.model import TOPOLOGY_DIR

    off = tmp / "default-latency-off.yaml"
    off.write_text((TOPOLOGY_DIR / "default.yaml").read_text()
                   + "\nnic_latency_us: 0\nswitch_latency_us: 0\n")
    on, without = _sends("default"), _sends(str(off))
    rows = []
    for name in PAIRS:
        base = on[name][0]["base_rtt_s"]
        got = [r["completion_s"] for r in on[name]]
        bare = ", ".join(f"{r['completion_s'] * 1e3:.2f}" for r in without[name])
        ok = all(abs(x / base - 1) <= 0.10 for x in got)
        rows.append(f"| {name} | {base * 1e3:.1f} ms | "
                    f"{', '.join(f'{x * 1e3:.1f}' for x in got)} ms | "
                    f"{statistics.median(got) / base:.3f} | {'yes' if ok else 'NO'} | "
                    f"{bare} ms "
                    f"| {', '.join(fid(r.get('fidelity')) for r in on[name])} |")
    return ("**The idle round trip.** `mrcemu send h0 h7 --size 2` (cross-leaf) and "
            f"`h0 h1` (same leaf), {SENDS} each, on `default` with its latencies and on a "
            "copy with `nic_latency_us: 0` and `switch_latency_us: 0`:\n\n"
            "| pair | base RTT (target) | completion, latency on | median / base | "
            "each within 10 % | completion, latency off | fidelity (on) |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def s2() -> str:
    from mrcemu.topology import latency, load
    from mrcemu.transport.config import TransportConfig

    t = load("default")
    cfg = TransportConfig.for_topology(t)
    return ("**The bandwidth-delay product** (derived from the topology, "
            "`topology/latency.py`, and carried by the transport's windows, "
            "`TransportConfig.for_topology`): on `default` a host has "
            f"**{latency.bdp_packets(t, cfg.pmtu)} packets** of {cfg.pmtu} B in flight at "
            f"line rate over the cross-leaf base RTT (target >= 300); "
            f"initial window {cfg.init_cwnd // cfg.pmtu} packets, largest "
            f"{cfg.max_cwnd // cfg.pmtu}. The paper's point-to-point table below measures "
            "whether it is carried.\n")


def _paper(tmp: Path, name: str, *args: str) -> dict:
    out = tmp / name
    r = mrcemu("paper", *args, "--out", str(out))
    if r.returncode:
        raise BenchError(f"`mrcemu paper {' '.join(args)}` failed: {r.stderr[-500:]}")
    return json.loads((out / "paper.json").read_text())


def s3(tmp: Path) -> str:
    doc = _paper(tmp, "e0", "E0")
    (e0,) = doc["experiments"]
    m = e0["measured"]
    return ("**E0: the paper's point-to-point table** (`sudo mrcemu paper E0`, slowed "
            f"{e0['slowdown']:g} times; {'faithful' if e0['faithful'] else 'NOT faithful'}):"
            "\n\n| | measured | paper |\n|---|---|---|\n"
            f"| one way within a leaf (T0-local) | {m['one_way_us']['local']} µs | 5.09 µs |\n"
            f"| one way across leaves (cross-T1) | {m['one_way_us']['cross']} µs | 6.54 µs |\n"
            f"| 32 KB writes, share of line rate | {m['bandwidth_share']:.2f} | ~0.96 |\n\n"
            f"Verdict: {'consistent' if e0['consistent'] else 'not consistent'} "
            f"({e0['reason']}).\n")


def scale_model() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        return "\n".join([s1(tmp), s2(), s3(tmp)])


run = scale_model
