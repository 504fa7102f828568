"""`make bench`, section "Loss recovery: a stream over links slowed to a quarter"."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.common import bad_evs, fid, run_report

TITLE = 'Loss recovery: a stream over links slowed to a quarter'


# L6: a cross-leaf stream over leaf-spine links slowed to a quarter (nothing lost)
DEGRADED = {
    "description": "Four cross-leaf pairs stream both ways for 3 s; the leaf-spine links of "
                   "spine 1 in every plane run at 25 % of their rate from the start.",
    "topology": "default",
    "workload": {"kind": "stream", "size": "256KiB", "duration": 3.0,
                 "pairs": ["h0-h4", "h1-h5", "h2-h6", "h3-h7"], "both_ways": True},
    "faults": [{"at": 0.0, "kind": "degrade", "value": 25,
                "targets": [f"p{p}l{leaf}-p{p}s1" for p in range(8) for leaf in (0, 1)]}],
    "transports": ["mrc"],
    "seed": 1,
}


# The same permutation with 1 MiB writes: four in flight a direction are more than a
# host's bandwidth-delay product, so the stream is bound by the fabric, its queues mark
# and trim, and the false retirements show if anything takes a trim for a loss.
SLOWED = {**DEGRADED, "workload": {**DEGRADED["workload"], "size": "1MiB"},
          "description": DEGRADED["description"].replace("256 KiB", "1 MiB")}

DEGRADED_SLOWDOWN = 10


def _row(i: int, label: str, m: dict) -> str:
    c = m["counters"]
    retired = bad_evs({"transports": {"mrc": m}})
    f = m.get("fabric") or {}
    return (f"| {label} | {i + 1} | **{retired}** | **{f.get('false_retirements', '-')}** | "
            f"{sum((f.get('dropped') or {}).values())} | {f.get('trimmed', '-')} | "
            f"{c['ev_stops']} | {c['ev_stops_cleared']} "
            f"| {c['rx_dup']:,} / {c['rx_data']:,} = "
            f"**{100 * c['rx_dup'] / max(1, c['rx_data']):.2f} %** | "
            f"{c['retransmits']:,} | {c['trims_nacked']:,} | {c['rtos']} | "
            f"{m['goodput_mbps']:.0f} | {fid(m.get('fidelity'))} |")


def degraded_stream() -> str:
    """A slow path is no failed path: three runs of each stream, 256 KiB and 1 MiB writes."""
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    import tempfile

    import yaml

    k = DEGRADED_SLOWDOWN
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, scenario in (("256 KiB", DEGRADED), ("1 MiB", SLOWED)):
            spec = Path(tmp) / "degraded.yaml"
            spec.write_text(yaml.safe_dump(scenario))
            for i in range(3):
                m = run_report(str(spec), f"{tmp}/r{label[0]}{i}", k)["transports"]["mrc"]
                rows.append(_row(i, label, m))
    return (f"What it runs: `mrcemu run` of two scenarios in "
            f"scripts/benchmarks/degraded_stream.py (DEGRADED and SLOWED) at `--slowdown {k}`, "
            "three times each: four cross-leaf pairs stream writes both ways (a permutation) "
            "for 3 s while the 16 leaf-spine links of spine 1 (every plane, both leaves) run "
            "at a quarter of their rate from t=0; 256 KiB writes, then 1 MiB writes, which "
            "make the stream fabric-bound, so that its queues mark and trim. Nothing should "
            "be lost: no EV retired, duplicate deliveries at most 0.2 % of the data packets "
            "received.\n\n"
            "A false retirement is an EV retired on a path where no port dropped anything "
            "over the run (the report's fabric counters: switch buffers, queues, devices).\n\n"
            "| writes | run | EVs retired | of those, false | dropped in the fabric | trimmed | "
            "EVs stopped | of those, back in use | duplicates / data received | retransmits "
            "| trims NACKed | RTOs | goodput, full-speed Mb/s | fidelity |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
            + "\n")


run = degraded_stream
