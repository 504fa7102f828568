"""`make bench`, section "A pace for programs": `--slowdown auto` for workloads of real
programs, each trial from scratch (`mrcemu calibrate --scenario`: the packets' cost and
the programs' probe measured anew), then the run at the pace picked, once: is it
faithful at the first pick?"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.common import BenchError, fid, mrcemu, run_report

TITLE = "A pace for programs"
TRIALS = 3
LATENCY = """description: ib_write_lat across leaves, h0 to h7
topology: default
workload:
  kind: exec
  programs:
    - {host: h7, run: ib_write_lat -s 2 -n 30}
    - {host: h0, run: ib_write_lat -s 2 -n 30 h7}
transports: [mrc]
seed: 1
"""


def _trial(name: str, scenario: str) -> str:
    r = mrcemu("calibrate", "--scenario", scenario, timeout=1800)
    if r.returncode:
        raise BenchError(f"`mrcemu calibrate --scenario {name}` failed: {r.stderr[-300:]}")
    with tempfile.TemporaryDirectory() as tmp:
        rep = run_report(scenario, tmp, "auto")
    pick = rep["slowdown_pick"]
    probe = pick.get("probe") or {}
    verdicts = {t: v.get("fidelity") for t, v in rep["transports"].items()}
    faithful = all(v and v["ok"] for v in verdicts.values())
    late = max(max(v["timer_late_p99_s"] / v["thresholds"]["timer_p99_s"],
                   v["release_late_p99_s"] / v["thresholds"]["timer_p99_s"])
               for v in verdicts.values() if v)
    return (f"| {name} | {probe.get('share', float('nan')):.2f} at "
            f"{probe.get('slowdown', 0):g} | {rep['slowdown']:g} | {late:.2f} | "
            + "; ".join(f"{t}: {fid(v)}" for t, v in verdicts.items())
            + f" | {'**yes**' if faithful else 'no'} | {rep['wall_clock_s']:.0f} s |")


def run() -> str:
    mrcemu("clean")
    work = Path(tempfile.mkdtemp(prefix="mrcemu-bench-"))
    (work / "ib-write-lat.yaml").write_text(LATENCY)
    rows = [_trial(name, scenario) for name, scenario in
            (("ib_write_lat", str(work / "ib-write-lat.yaml")),
             ("perftest-failover", "perftest-failover")) for _ in range(TRIALS)]
    return (f"What it runs: {TRIALS} trials of each workload, each from scratch: `mrcemu "
            "calibrate --scenario X` (what a packet costs, and the programs run once at "
            "that pace with the run's capture and map while the NICs' lateness is "
            "measured), then `mrcemu run X --slowdown auto`, once. X is `ib_write_lat -s 2 "
            "-n 30` from h0 to h7 over MRC, and the built-in `perftest-failover` "
            "(`ib_write_bw` through a spine's failure, MRC and RoCE). The target: every run "
            "faithful at the slowdown first picked. Lateness is the worst p99 of the NICs' "
            "timers and delay-line releases as a share of its limit, in the probe and in "
            "the run.\n\n"
            "| workload | probe: lateness at slowdown | picked | run: lateness | "
            "fidelity | faithful at the first pick | wall clock |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
