"""`make bench`, section "NSCC against UEC's reference simulator" (issue 41's N1, N2,
N4 and N5, beside uet-htsim's figures for the same shapes)."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

from benchmarks.common import fid, run_report
from benchmarks.degraded_stream import DEGRADED

TITLE = "NSCC against UEC's reference simulator (N1, N2, N4, N5)"

SLOWDOWN = 10  # faithful on 2 cores for both shapes (MRC alone)
# uet-htsim's NSCC with trimming and bitmap spraying on the same shapes (8 hosts, 2
# leaves, 4 spines): issue 41's figures.
HTSIM_SPREAD = 1.23
HTSIM_DEGRADED = 1.30
HTSIM_SLOWED_SHARE = 0.113
SENDERS = 7
SIZE = 2 << 20
INCAST = {
    "description": "7:1 incast of 2 MiB each onto h7 (issue 41's N1/N2)",
    "topology": "default",
    "workload": {"kind": "incast", "dst": "h7", "size": "2MiB", "iterations": 1,
                 "senders": [f"h{h}" for h in range(SENDERS)]},
    "faults": [],
    "transports": ["mrc"],
    "seed": 5,
}
CLEAN = {**DEGRADED, "description": DEGRADED["description"].split(";")[0] + ".",
         "faults": []}
SLOWED_SPINE = 1  # DEGRADED slows spine 1 of every plane
RUNS = 3


def _raw(out: str) -> dict:
    (raw,) = Path(out).glob("*/logs/raw-mrc.json.gz")
    with gzip.open(raw) as f:
        return json.load(f)


def slowed_share(raw: dict) -> float:
    """The share of the data packets sent (retransmissions included) that went over the
    slowed spines, from every connection's per-EV counts."""
    from mrcemu.topology.paths import ev_fields

    total = slowed = 0
    for tr in raw["traces"].values():
        for c in tr["conns"]:
            for ev, n in c["stats"].get("per_ev", {}).items():
                total += n
                slowed += n if ev_fields(int(ev, 16))[1] == SLOWED_SPINE else 0
    return slowed / max(1, total)


def _incast(tmp: Path, ideal: float) -> tuple[str, list[float]]:
    import yaml

    spec = tmp / "incast.yaml"
    spec.write_text(yaml.safe_dump(INCAST))
    rows, spreads = [], []
    for i in range(RUNS):
        m = run_report(str(spec), f"{tmp}/incast{i}", SLOWDOWN)["transports"]["mrc"]
        done = [f["active_s"] for f in m["per_flow"].values() if f.get("active_s")]
        spread = max(done) / min(done)
        spreads.append(spread)
        rows.append(f"| {i + 1} | {min(done):.3f} - {max(done):.3f} s | **{spread:.2f}** | "
                    f"{m['job_completion_s']:.3f} s | **{m['job_completion_s'] / ideal:.2f}** "
                    f"| {m['trims']:,} | {m['nacks']:,} | {m['rtos']} | "
                    f"{fid(m.get('fidelity'))} |")
    return ("| run | flows done (first - last) | N1: last / first (htsim "
            f"{HTSIM_SPREAD}) | job | N2: job / ideal | trims | NACKs | RTOs | fidelity |\n"
            "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n", spreads)


def _permutation(tmp: Path) -> str:
    import yaml

    got = {}
    for name, spec in (("clean", CLEAN), ("degraded", DEGRADED)):
        path = tmp / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        out = f"{tmp}/{name}"
        m = run_report(str(path), out, SLOWDOWN)["transports"]["mrc"]
        got[name] = (m, slowed_share(_raw(out)))
    (mc, share_c), (md, share_d) = got["clean"], got["degraded"]
    ratio = mc["goodput_mbps"] / md["goodput_mbps"]
    bound = 4 / (3 + 0.25)  # four spines a plane, one at a quarter
    return ("| stream | goodput, full-speed Mb/s | share of packets on spine 1 | trims | "
            "RTOs | fidelity |\n|---|---|---|---|---|---|\n"
            f"| clean | {mc['goodput_mbps']:.1f} | {share_c:.3f} | {mc['trims']:,} | "
            f"{mc['rtos']} | {fid(mc.get('fidelity'))} |\n"
            f"| spine 1 at 25 % | {md['goodput_mbps']:.1f} | **{share_d:.3f}** (N5; htsim "
            f"{HTSIM_SLOWED_SHARE}) | {md['trims']:,} | {md['rtos']} | "
            f"{fid(md.get('fidelity'))} |\n\n"
            f"N4, the degraded stream's job over the clean one's (clean goodput / degraded): "
            f"**{ratio:.3f}** (htsim {HTSIM_DEGRADED}; the capacity bound {bound:.3f}).\n")


def nscc_reference() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    from mrcemu.topology import load

    topo = load("default")
    ideal = SENDERS * SIZE * 8 / (topo.planes * topo.host_link_mbps * 1e6)
    with tempfile.TemporaryDirectory() as d:
        incast, _ = _incast(Path(d), ideal)
        perm = _permutation(Path(d))
    return (f"Command: `make bench` (section NSCC). `mrcemu run` at `--slowdown {SLOWDOWN}`, "
            "MRC alone, of scenarios in scripts/benchmarks/nscc_reference.py, on the "
            "default fabric; times in full-speed seconds. Issue 41 puts each beside "
            "uet-htsim's NSCC (trimming, bitmap spraying) on the same shapes.\n\n"
            f"**7:1 incast** (h0-h6 each write 2 MiB to h7 at once; {RUNS} runs). Ideal: "
            f"the bytes over h7's eight ports, {ideal:.3f} s. N1 targets a spread of at most "
            "1.3, N2 a job of at most 1.05 ideals.\n\n" + incast +
            "\n**Cross-leaf permutation over slowed spines** (the L6 stream: h0-h3 and "
            "h4-h7 pair off across the leaves and stream 256 KiB writes both ways for 3 s; "
            "then the same with the 16 leaf-spine links of spine 1 of every plane at a "
            "quarter of their rate). N4 targets at most 1.30, N5 at most 0.11.\n\n" + perm)


run = nscc_reference
