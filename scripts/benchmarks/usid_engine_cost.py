"""`make bench`, section "The uSID End's CPU per forwarded packet, by engine": the
default fabric's all-to-all at full speed under each End engine this kernel runs, the
whole machine sampled by perf, and the switches' forwarded packets counted by their
egress program over the same window."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, BenchError, host_cpu
from benchmarks.cpu_profile import SCENARIO, started

TITLE = "The uSID End's CPU per forwarded packet, by engine"
PROFILE_S = 8.0
# perf's names for each engine's End: the BPF program's, or the kernel's seg6local.
END_CODE = {"bpf": r"usid_end", "kernel": r"seg6|input_action_end|end_next_csid"}
# The rest of a switch's forwarding, for the share beside it.
FORWARDING = r"ip6_|ipv6_|fib6|rt6|seg6|bpf|tcf_|tc_run|cls_bpf|sch_handle|htb|veth"


def _forwarded() -> int:
    """Packets every switch port's egress program has seen: each forwarded packet once."""
    from mrcemu.fabric import bpf

    return sum(v["packets"] for v in bpf.read_state().values())


def _shares(report: str, end: str) -> tuple[float, float]:
    """(the End's share, all forwarding's share) of every sample, from `perf report`."""
    end_pct = fwd_pct = 0.0
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)", line)
        if not m:
            continue
        pct, dso, sym = float(m[1]), m[2], m[3]
        if re.search(end, dso) or re.search(end, sym):
            end_pct += pct
        if dso.startswith("bpf_prog") or (dso == "[kernel.kallsyms]"
                                          and re.search(FORWARDING, sym)):
            fwd_pct += pct
    return end_pct / 100, fwd_pct / 100


def _profile(engine: str, work: Path) -> dict:
    scen, out, data = work / "a2a.yaml", work / f"out-{engine}", work / f"{engine}.perf"
    scen.write_text(SCENARIO)
    run = started(scen, out, engine, ROOT, "--usid-engine", engine)
    try:
        f0, c0, m0 = _forwarded(), host_cpu(), time.monotonic()
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-a", "-o", str(data),
                        "--", "sleep", str(PROFILE_S)], capture_output=True, timeout=120)
        f1, c1, m1 = _forwarded(), host_cpu(), time.monotonic()
        err = run.communicate(timeout=600)[1]
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
            subprocess.run([sys.executable, "-m", "mrcemu", "clean"], capture_output=True)
    if run.returncode not in (0, 1):
        raise BenchError(f"{engine}: `mrcemu run` failed: {err.strip()[-300:]}")
    report = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort",
                             "dso,sym", "--stdio", "-q", "--percent-limit", "0"],
                            capture_output=True, text=True, timeout=600).stdout
    end, fwd = _shares(report, END_CODE[engine])
    cpu_s = sum(c1[k] - c0[k] for k in c1)  # every CPU's time over the window, idle too
    busy_s = sum(c1[k] - c0[k] for k in ("user", "nice", "system", "irq", "softirq"))
    pkts = f1 - f0
    if not pkts:
        raise BenchError(f"{engine}: no packet was forwarded in the profile's window")
    return {"pkts": pkts, "pps": pkts / (m1 - m0), "end": end, "fwd": fwd,
            "end_ns": end * cpu_s / pkts * 1e9, "fwd_ns": fwd * cpu_s / pkts * 1e9,
            "busy_us": busy_s / pkts * 1e6}


def run() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    if shutil.which("perf") is None:
        raise BenchError("perf is not installed (Debian: linux-perf): the section needs it")
    from mrcemu.fabric import usid_engine

    found = usid_engine.found(refresh=True)
    got: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="mrcemu-end-") as tmp:
        for engine in usid_engine.ENGINES:
            if found[engine] is None:
                got[engine] = _profile(engine, Path(tmp))
    rows = "".join(
        f"| {e} | {g['pps']:,.0f} | {g['end']:.2%} | **{g['end_ns']:,.0f} ns** | "
        f"{g['fwd']:.1%} | {g['fwd_ns']:,.0f} ns | {g['busy_us']:.1f} us |\n"
        for e, g in got.items())
    absent = "".join(f"\nThe {e} engine does not run on this kernel ({found[e]}): it has no "
                     "row." for e in usid_engine.ENGINES if found[e] is not None)
    both = ""
    if len(got) == 2:
        both = (f"\n\n**bpf / kernel**, the End's CPU per forwarded packet: "
                f"**{got['bpf']['end_ns'] / got['kernel']['end_ns']:.2f}**.")
    return ("What it runs: `mrcemu run --slowdown 1 --usid-engine E` "
            "of an all-to-all on `default` (every host writes 256 KiB to each of the 7 "
            "others, 80 iterations, MRC only, no faults), one engine after the other in this "
            f"run; once h0 has posted ten iterations' writes, `perf record -e cpu-clock -a` "
            f"over the whole machine for {PROFILE_S:g} s, `/proc/stat` over the same window, "
            "and the packets every switch port's egress program counted in it (each "
            "forwarded packet once). The End's CPU is its share of all samples (the BPF "
            "program `usid_end`, or the kernel's seg6local functions) times the CPU time of "
            "the window; forwarding is every switch's kernel IPv6 path, tc programs, htb and "
            "veth. At full speed on 2 cores the run is not faithful: these are costs.\n\n"
            "| engine | packets forwarded / s | the End's share of samples | the End's CPU "
            "per forwarded packet | forwarding's share | forwarding's CPU per forwarded "
            "packet | the machine's busy CPU per forwarded packet |\n"
            "|---|---|---|---|---|---|---|\n" + rows + absent + both + "\n")
