"""`make bench`, section "Where the CPU goes": the whole machine's CPU samples (perf),
by component, over a full-speed MRC all-to-all, for the NIC daemon before its loop was
compiled and for this tree, one after the other in the same sitting.

The tree before is BASE, checked out in a temporary worktree and built there (the
compiled data path by gcc with the flags pyproject.toml gives, the switch program by the
Makefile's rule), and the run is made from that tree."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
from pathlib import Path

from benchmarks.common import ROOT, BenchError, host_cpu

TITLE = "Where the CPU goes"
BASE = "c40e541"  # the last commit whose NIC daemon ran its event loop in Python

# Kernel symbols by what they do, first match wins (perf's `--sort sym` names).
KERNEL_GROUPS = (
    ("idle", r"idle|cpuidle|safe_halt|mwait|poll_idle|hlt"),
    ("switch BPF (tc)", r"bpf|tcf_|tc_run|cls_"),
    ("IPv6 routing, SRv6", r"ip6|ipv6|fib6|rt6|seg6|icmp6|ndisc|neigh"),
    ("qdisc (htb)", r"htb|qdisc|sch_|pfifo|dev_queue_xmit|__qdisc"),
    ("AF_PACKET, syscalls", r"packet_|tpacket|sock|_sys_|syscall|sendmmsg|recvmmsg|"
                            r"copy_|epoll|fdget|__fget"),
    ("veth, softirq receive", r"veth|netif|napi|net_rx|backlog|__dev_|skb|gro|dev_hard"),
)


def _build(tree: Path) -> None:
    """The compiled data path in place (as pyproject.toml builds it) and switch.o."""
    cfg = tomllib.loads((tree / "pyproject.toml").read_text())
    (ext,) = cfg["tool"]["setuptools"]["ext-modules"]
    out = tree / (ext["name"].replace(".", "/") + sysconfig.get_config_var("EXT_SUFFIX"))
    r = subprocess.run(["gcc", "-shared", "-fPIC", *ext["extra-compile-args"],
                        f"-I{sysconfig.get_paths()['include']}", *ext["sources"], "-o",
                        str(out)], cwd=tree, capture_output=True, text=True)
    if r.returncode:
        raise BenchError(f"building {BASE}'s data path failed: {r.stderr[-300:]}")
    r = subprocess.run(["make", "-s", "mrcemu/bpf/switch.o"], cwd=tree, capture_output=True,
                       text=True)
    if r.returncode:
        raise BenchError(f"building {BASE}'s switch program failed: {r.stderr[-300:]}")


def _mrcemu(tree: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-m", "mrcemu", *args], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=600)


def _groups(report: str) -> dict[str, float]:
    """perf report (--sort dso,sym, percentages) folded into components."""
    out: dict[str, float] = {}
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)", line)
        if not m:
            continue
        pct, dso, sym = float(m[1]), m[2], m[3].strip()
        if dso.startswith("libpython") or dso == "python3.11" or dso.startswith("python"):
            key = "Python interpreter (libpython)"
        elif dso.startswith("_datapath"):
            key = ("compiled data path: ICRC (CRC-32)" if "crc" in sym.lower()
                   else "compiled data path: the rest")
        elif dso == "[kernel.kallsyms]":
            key = next((f"kernel: {name}" for name, pat in KERNEL_GROUPS
                        if re.search(pat, sym)), "kernel: other")
        elif dso.startswith("[bpf_prog") or dso.startswith("bpf_prog"):
            key = "kernel: switch BPF (tc)"
        elif dso.startswith("libc") or dso.startswith("ld-linux"):
            key = "C library"
        else:
            key = "other"
        out[key] = out.get(key, 0.0) + pct
    return out


SCENARIO = """description: the CPU profile's workload, a full-speed all-to-all, MRC only
topology: default
workload: {kind: all-to-all, size: 256KiB, iterations: 80}
transports: [mrc]
seed: 1
timeout_s: 300
"""
WAIT_POSTS = 7 * 10  # h0's writes before the profile starts: ten iterations in
PROFILE_S = 8.0


def _posts(log: Path, since: int) -> int:
    try:
        with log.open("rb") as f:
            f.seek(since)
            return f.read().count(b'"event": "post"')
    except OSError:
        return 0


def started(scen: Path, out: Path, tag: str, tree: Path = ROOT, *more: str
            ) -> subprocess.Popen:
    """`mrcemu run` of the all-to-all `scen` at full speed from `tree` (with `more`
    options), returned once h0 has posted WAIT_POSTS writes; killed on a failure."""
    from mrcemu import rundir

    log = rundir.nic_log("h0")
    since = log.stat().st_size if log.exists() else 0
    env = {**os.environ, "PYTHONPATH": str(tree)}
    run = subprocess.Popen([sys.executable, "-m", "mrcemu", "run", str(scen), "--slowdown",
                            "1", *more, "--out", str(out)], cwd=tree, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while _posts(log, since) < WAIT_POSTS and run.poll() is None:
            if time.monotonic() > deadline:
                raise BenchError(f"{tag}: the all-to-all never got going")
            time.sleep(0.1)
    except BaseException:
        run.kill()
        run.wait()
        raise
    return run


def _profile(tree: Path, work: Path, tag: str) -> dict:
    """`mrcemu run` of SCENARIO from `tree` at full speed; perf and /proc/stat over
    PROFILE_S in the middle of its job, and the packets delivered in that window (its
    goodput series, on the NICs' clock, which is this one's)."""
    import gzip
    import json

    from mrcemu.topology import load
    from mrcemu.transport.config import TransportConfig

    pmtu = TransportConfig.for_topology(load("default")).pmtu
    scen, out, data = work / "a2a.yaml", work / f"out-{tag}", work / f"{tag}.perf.data"
    scen.write_text(SCENARIO)
    _mrcemu(tree, "clean")
    run = started(scen, out, tag, tree)
    try:
        c0, m0 = host_cpu(), time.monotonic()
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-a", "-g", "-o", str(data),
                        "--", "sleep", str(PROFILE_S)], capture_output=True, timeout=120)
        c1, m1 = host_cpu(), time.monotonic()
        err = run.communicate(timeout=600)[1]
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
            _mrcemu(tree, "clean")
    if run.returncode not in (0, 1):
        raise BenchError(f"{tag}: `mrcemu run` failed: {err.strip()[-300:]}")
    (folder,) = out.iterdir()
    rep = json.loads((folder / "report.json").read_text())
    with gzip.open(folder / "logs" / "raw-mrc.json.gz", "rt") as f:
        t0 = json.load(f)["t0"]
    mrc = rep["transports"]["mrc"]
    series = mrc["goodput_series"]
    bits = sum(x * 1e6 * series["bin_s"] for t, x in zip(series["t"], series["total_mbps"],
                                                          strict=True)
               if m0 - t0 <= t and t + series["bin_s"] <= m1 - t0)
    window = sum(series["bin_s"] for t in series["t"]
                 if m0 - t0 <= t and t + series["bin_s"] <= m1 - t0)
    pkts = bits / 8 / pmtu
    rep_text = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort",
                               "dso,sym", "--stdio", "-q", "-g", "none", "--percent-limit",
                               "0"], capture_output=True, text=True, timeout=600).stdout
    busy = sum(c1[k] - c0[k] for k in ("user", "nice", "system", "irq", "softirq"))
    total = sum(c1[k] - c0[k] for k in c1)
    if not pkts:
        raise BenchError(f"{tag}: nothing was delivered in the profile's window")
    return {"ok": bool(mrc["integrity_ok"]), "groups": _groups(rep_text),
            # the window's packets: those of its whole bins, over the time they cover
            "us_per_pkt": busy / (pkts * (m1 - m0) / window) * 1e6,
            "busy": busy / total if total else 0.0, "mbps": bits / window / 1e6,
            "faithful": (mrc.get("fidelity") or {}).get("ok")}


def run() -> str:
    if shutil.which("perf") is None:
        raise BenchError("perf is not installed (Debian: linux-perf): the section needs it")
    with tempfile.TemporaryDirectory(prefix="mrcemu-cpu-") as tmp:
        base = Path(tmp) / "base"
        r = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base),
                            BASE], capture_output=True, text=True)
        if r.returncode:
            raise BenchError(f"checking out {BASE} failed: {r.stderr.strip()[-300:]}")
        try:
            _build(base)
            before = _profile(base, Path(tmp), "before")
            after = _profile(ROOT, Path(tmp), "after")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(base)], capture_output=True)
    return _markdown(before, after)


def _markdown(before: dict, after: dict) -> str:
    keys = sorted(set(before["groups"]) | set(after["groups"]),
                  key=lambda k: -max(before["groups"].get(k, 0), after["groups"].get(k, 0)))
    rows = [f"| {k} | {before['groups'].get(k, 0):.1f} % | {after['groups'].get(k, 0):.1f} % |"
            for k in keys if max(before["groups"].get(k, 0), after["groups"].get(k, 0)) >= 0.1]
    p1 = (before["groups"].get("Python interpreter (libpython)", 0.0),
          after["groups"].get("Python interpreter (libpython)", 0.0))
    return (
        "What it runs: `mrcemu run` at full speed (`--slowdown 1`) of "
        "an all-to-all on `default` (every host writes 256 KiB to each of the 7 others, 80 "
        "iterations, MRC only, no faults); once h0 has posted ten iterations' writes, `perf "
        f"record -e cpu-clock -a -g` over the whole machine for {PROFILE_S:g} s, and "
        "`/proc/stat` over the same window; the packets delivered in it from the run's "
        f"goodput series. Before: `{BASE}`, the last tree whose NIC daemon ran its event "
        "loop in Python, checked out and built in a temporary worktree and run from there; "
        "after: this tree. One after the other, in the same sitting.\n\n"
        "| share of all CPU samples | before | after |\n|---|---|---|\n"
        + "\n".join(rows) + "\n\n"
        "| | before | after | target |\n|---|---|---|---|\n"
        f"| the interpreter's share of all samples | {p1[0]:.1f} % | **{p1[1]:.1f} %** "
        "| at most 3 % |\n"
        f"| busy CPU (user + system + softirq) per delivered data packet | "
        f"{before['us_per_pkt']:.0f} us | **{after['us_per_pkt']:.0f} us** | at most 60 us |\n"
        f"| goodput in the window | {before['mbps']:.0f} Mb/s | {after['mbps']:.0f} Mb/s | |\n"
        f"| the machine busy | {before['busy']:.0%} | {after['busy']:.0%} | |\n"
        f"| data intact | {'yes' if before['ok'] else 'NO'} | "
        f"{'yes' if after['ok'] else 'NO'} | |\n"
        f"| the run faithful | {'yes' if before['faithful'] else 'no'} | "
        f"{'yes' if after['faithful'] else 'no'} | |\n\n"
        "At full speed on 2 cores neither run is faithful (docs/fidelity.md says "
        "why): these are costs, not transport figures. Idle is the machine's spare time; "
        "the kernel's groups are its forwarding of every frame through the emulated fabric "
        "at every hop. What is left in the interpreter is the policy's own work: rotations "
        "of the spraying order, reverse-set refreshes, probes and their answers, "
        "ECN-marked SACKs, control requests, and the harness's fill and hash of each "
        "write.\n")
