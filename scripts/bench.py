#!/usr/bin/env python3
"""Regenerate BENCHMARKS.md. Every figure carries the command that measured it;
comparisons are ratios taken side by side in the same run."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SECTIONS: list[tuple[str, Callable[[], str]]] = []


def section(title: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def deco(fn: Callable[[], str]) -> Callable[[], str]:
        SECTIONS.append((title, fn))
        return fn
    return deco


def mem_available_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def mrcemu(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mrcemu", *args], capture_output=True,
                          text=True, timeout=600)


@section("Fabric bring-up and teardown")
def fabric_updown() -> str:
    from mrcemu.fabric import state

    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    rows = []
    goals = {"default": "<= 10 s", "large": "<= 60 s"}
    for name in ("small", "default", "large"):
        mrcemu("clean")
        before = mem_available_kib()
        t0 = time.monotonic()
        r = mrcemu("up", name)
        up_s = time.monotonic() - t0
        if r.returncode:
            rows.append(f"| {name} | failed: {r.stderr.strip()} | | | | |")
            continue
        st = state.load_state()
        hwm = 0
        for line in Path(f"/proc/{st.manager_pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
        used = (before - mem_available_kib()) / 1024
        t1 = time.monotonic()
        mrcemu("down")
        down_s = time.monotonic() - t1
        s = st.summary
        rows.append(f"| {name} | {s['switches']} sw, {s['hosts']} hosts, {s['links']} links | "
                    f"{up_s:.2f} s ({goals.get(name, '-')}) | {down_s:.2f} s | "
                    f"{hwm / 1024:.0f} MiB | {used:.0f} MiB |")
    return ("Command: `sudo .venv/bin/mrcemu up TOPO` then `sudo .venv/bin/mrcemu down`, timed "
            "from the outside (wall clock, includes Python start-up).\n"
            "Manager peak RSS is VmHWM of the manager process; system memory is the drop in "
            "MemAvailable while the fabric is up (namespaces, veths, qdiscs, node shells).\n\n"
            "| topology | size | up (goal) | down | manager peak RSS | system memory |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


@section("Wire codec: fast struct path against Scapy")
def wire_codec() -> str:
    from scapy.all import raw
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw

    from mrcemu.wire import codec, layers

    src, dst = bytes(range(16)), bytes(range(16, 32))
    payload = bytes(1024)

    def fast(n: int) -> None:
        for i in range(n):
            pkt = codec.encode_data(src, dst, sport=0xC001, flow_label=i & 0xFFFF, dscp=4,
                                    ecn=0, opcode=0xC7, dqpn=1, psn=i, msn=1,
                                    va=0x10000 + i * 1024, rkey=7, dmalen=1 << 26,
                                    payload=payload)
            codec.decode(pkt)

    def scapy(n: int) -> None:
        for i in range(n):
            pkt = raw(IPv6(src="0001:0203:0405:0607:0809:0a0b:0c0d:0e0f",
                           dst="1011:1213:1415:1617:1819:1a1b:1c1d:1e1f", tc=16, fl=i & 0xFFFF)
                      / UDP(sport=0xC001, dport=4791) / layers.BTH(opcode=0xC7, dqpn=1, psn=i)
                      / layers.METH(msn=1) / layers.RETH(va=0x10000 + i * 1024, rkey=7,
                                                         dmalen=1 << 26) / Raw(payload))
            IPv6(pkt)

    def rate(fn: Callable[[int], None], seconds: float = 3.0) -> float:
        fn(50)  # warm up
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            fn(200)
            n += 200
        return n / (time.perf_counter() - t0)

    f, s = rate(fast), rate(scapy)
    return ("Command: `make bench` (scripts/bench.py, section wire). One MRC WRITE_MIDDLE with "
            "1 KiB payload: encode (headers, ICRC, UDP checksum) then decode (ICRC verified), "
            "in one process, the two measured back to back in this run.\n\n"
            "| path | packets/s (encode + decode) |\n|---|---|\n"
            f"| fast `struct` codec | {f:,.0f} |\n| Scapy build + dissect | {s:,.0f} |\n"
            f"| **ratio** (goal >= 50) | **{f / s:.1f}** |\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--only", default=None, help="run only sections whose title has this")
    args = ap.parse_args()
    import mrcemu.wire  # noqa: F401 - registers nothing, but fails early if broken

    parts = ["# mrcemu benchmarks\n",
             f"Generated by `make bench` on {datetime.date.today()}, "
             f"{platform.node()}: {os.cpu_count()} cores, kernel {platform.release()}, "
             f"Python {platform.python_version()}. These machines are noisy: compare ratios "
             "measured in one run, not absolute figures across runs.\n"]
    for title, fn in SECTIONS:
        if args.only and args.only.lower() not in title.lower():
            continue
        print(f"bench: {title} ...", file=sys.stderr, flush=True)
        parts.append(f"## {title}\n\n{fn()}")
    (ROOT / args.out).write_text("\n".join(parts))
    print(f"bench: wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
