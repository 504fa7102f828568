"""`make bench`, section "Fabric bring-up over two local servers (`up --cluster`)"."""

from __future__ import annotations

import os
import subprocess
import time

from benchmarks.common import mrcemu

TITLE = 'Fabric bring-up over two local servers (`up --cluster`)'


def fabric_cluster_updown() -> str:
    """Issue 15: bring-up of each topology on this server alone and split over two local
    servers (`mrcemu cluster local 2`, plane placement), side by side in one run."""
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    from mrcemu.fabric import cluster_local, state

    rows, parts = [], []
    for name in ("default", "large"):
        times: dict[str, tuple[float, float] | str] = {}
        for how in ("one server", "two local servers"):
            mrcemu("clean")
            extra: list[str] = []
            if how != "one server":
                cluster_local.down()
                path, _ = cluster_local.up(2)
                extra = ["--cluster", str(path)]
            try:
                t0 = time.monotonic()
                try:
                    r = mrcemu("up", name, *extra)
                except subprocess.TimeoutExpired:
                    times[how] = "not up within 600 s"
                    continue
                up_s = time.monotonic() - t0
                if r.returncode:
                    times[how] = f"failed: {r.stderr.strip()[-200:]}"
                    continue
                st = state.load_state()
                took = st.summary if st else {}
                parts.append(f"| {name} | {how} | " + " | ".join(
                    f"{took.get(k, 0):.2f} s" for k in ("ssh_s", "nodes_s", "links_s",
                                                        "program_s", "bpf_s")) + " |")
                ok = mrcemu("check").returncode == 0
                t1 = time.monotonic()
                mrcemu("down")
                times[how] = (up_s, time.monotonic() - t1) if ok else "check failed"
            finally:
                mrcemu("down")
                if how != "one server":
                    cluster_local.down()
        one, two = times["one server"], times["two local servers"]
        if isinstance(one, tuple) and isinstance(two, tuple):
            rows.append(f"| {name} | {one[0]:.2f} s | {two[0]:.2f} s | **{two[0] / one[0]:.1f}** | "
                        f"{one[1]:.2f} s | {two[1]:.2f} s |")
        else:
            rows.append(f"| {name} | {one} | {two} | | | |")
    return ("Command: `make bench` (section cluster): `sudo .venv/bin/mrcemu up TOPO`, "
            "`mrcemu check` (every path must deliver) and `mrcemu down`, first on this server "
            "alone, then over `mrcemu cluster local 2` with `--cluster` (plane placement: "
            "every switch on the second server, each host link a VXLAN), one after the "
            "other in this run. Up and down are wall clock from the outside.\n\n"
            "| topology | up, one server | up, two local servers | **ratio** | down, one "
            "server | down, two |\n|---|---|---|---|---|---|\n" + "\n".join(rows)
            + "\n\nWhere `up` spent its time, as the manager measured it (the ssh master "
            "connection; node shells and their sysctls; links, each VXLAN port made in one "
            "ssh session over the shared connection; each server's agent writing its nodes' "
            "addresses, routes and htb; and its switch program):\n\n"
            "| topology | where | ssh master | nodes | links | routes and htb | BPF |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(parts) + "\n")


run = fabric_cluster_updown
