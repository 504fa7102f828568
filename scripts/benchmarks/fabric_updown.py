"""`make bench`, section "Fabric bring-up and teardown"."""

from __future__ import annotations

import os
import time
from pathlib import Path

from benchmarks.common import mem_available_kib, mrcemu

TITLE = 'Fabric bring-up and teardown'


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


run = fabric_updown
