"""What the benchmark sections share: running mrcemu, reading its reports, and the
CPU the daemons and the machine spent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# The slowdown (`mrcemu run --slowdown`) at which the default fabric's runs were faithful
# on a 2-core host: the sections that run scenarios add one run slowed this much.
SLOWDOWN = 20


def fid(v: dict | None) -> str:
    """A run's fidelity verdict for a table cell (mrcemu.fidelity): every figure from an
    unfaithful run is shown with it."""
    if v is None:
        return "not measured"
    return "faithful" if v["ok"] else "**NOT faithful**"


def mem_available_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def sh(cmd: str) -> None:
    """A shell command whose failure is expected (deleting what may not exist) or checked
    by what follows; the benchmarks' own netns rigs use it."""
    subprocess.run(cmd, shell=True, check=False, capture_output=True)


MRCEMU = [sys.executable, "-m", "mrcemu"]


def mrcemu(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*MRCEMU, *args], capture_output=True, text=True, timeout=timeout)


class BenchError(Exception):
    """A step a section needs failed: the section reports this line instead."""


def run_report(scenario: str, out: str, slowdown: float | str = 1, *more: str) -> dict:
    """`mrcemu run SCENARIO --slowdown K [MORE...]` into the empty folder `out`; its
    report.json."""
    r = mrcemu("run", scenario, "--slowdown", str(slowdown), *more, "--out", out)
    if r.returncode:
        raise BenchError(f"`mrcemu run {scenario}` failed: {r.stderr.strip()[-500:]}")
    (folder,) = Path(out).iterdir()
    return json.loads((folder / "report.json").read_text())


def transfer_cpu(report: dict) -> float:
    """The daemons' CPU seconds during a transfer, as they measured it themselves (from
    the fidelity reset before the post to the read after completion), less the
    harness's share: filling and hashing the source, allocating the region."""
    hosts = report["fidelity"]["hosts"].values()
    return sum(h["cpu_s"] - h.get("harness_cpu_s", 0.0) for h in hosts)


def cpu_around(pids: list[int], *args: str) -> tuple[subprocess.CompletedProcess,
                                                     tuple[float, float], dict, float]:
    """`mrcemu ARGS`, and what it cost: the daemons' (user, system) seconds from
    /proc/PID/stat, the whole machine's by kind from /proc/stat, and the wall time."""
    before, host0, t0 = [cpu_times(p) for p in pids], host_cpu(), time.monotonic()
    r = mrcemu(*args)
    wall = time.monotonic() - t0
    host = {k: v - host0[k] for k, v in host_cpu().items()}
    after = [cpu_times(p) for p in pids]
    used = tuple(sum(a[i] - b[i] for a, b in zip(after, before, strict=True)) for i in (0, 1))
    return r, used, host, wall


def cpu_times(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process in seconds, from /proc/PID/stat (fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tck, int(fields[12]) / tck


def host_cpu() -> dict[str, float]:
    """The machine's CPU seconds by kind since boot, from /proc/stat's cpu line."""
    vals = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    tck = os.sysconf("SC_CLK_TCK")
    kinds = ("user", "nice", "system", "idle", "iowait", "irq", "softirq")
    return {k: int(v) / tck for k, v in zip(kinds, vals[:len(kinds)], strict=True)}


def false_retirements(rep: dict, transport: str = "mrc") -> str:
    """EVs retired on a path that dropped nothing, with no fault on it (the report's
    fabric counters); '-' for a report without them."""
    f = rep["transports"][transport].get("fabric")
    return str(f["false_retirements"]) if f else "-"


def bad_evs(rep: dict, before: float = float("inf")) -> int:
    """EVs MRC retired (ASSUMED_BAD) before `before` seconds from the first write."""
    return sum(1 for c in rep["transports"]["mrc"]["ev_states"]["changes"]
               if c[5] == "ASSUMED_BAD" and c[0] < before)


def study_section(part: str, hosts: str, out: Path) -> dict:
    """`mrcemu study PART --hosts HOSTS --out OUT` on a clean machine; its results file's
    sections (the part's, and those it is read beside)."""
    mrcemu("clean")
    r = mrcemu("study", part, "--hosts", hosts, "--out", str(out), timeout=4 * 3600)
    if r.returncode:
        raise BenchError(f"`mrcemu study {part}` failed: {r.stderr.strip()[-300:]}")
    return json.loads((out / "study.json").read_text())
