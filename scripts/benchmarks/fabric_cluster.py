"""`make bench`, section "Fabric over local servers (`--cluster`)": bring-up over two
local servers against one, and the main job with hosts on every server of three."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

from benchmarks.common import BenchError, mrcemu, run_report

TITLE = 'Fabric over local servers (`--cluster`): bring-up, and hosts on every server'
# one pace for both runs of the main job, at which this 2-core host runs it faithfully:
# both must be, to be compared
JOB_SLOWDOWN = 10


def fabric_cluster_updown() -> str:
    """Bring-up of each topology on this server alone and split over two local
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
            rows.append(f"| {name} | {one[0]:.2f} s | {two[0]:.2f} s | "
                        f"**{two[0] / one[0]:.2f}** | "
                        f"{one[1]:.2f} s | {two[1]:.2f} s |")
        else:
            rows.append(f"| {name} | {one} | {two} | | | |")
    return ("What it runs: `sudo .venv/bin/mrcemu up TOPO`, "
            "`mrcemu check` (every path must deliver) and `mrcemu down`, first on this server "
            "alone, then over `mrcemu cluster local 2` with `--cluster` (plane placement: "
            "every switch on the second server, each host link a VXLAN), one after the "
            "other in this run. Up and down are wall clock from the outside.\n\n"
            "| topology | up, one server | up, two local servers | **ratio** | "
            "down, one server | down, two |\n|---|---|---|---|---|---|\n" + "\n".join(rows)
            + "\n\nWhere `up` spent its time, as the manager measured it (the ssh master "
            "connection; node shells, eight started at once, and their sysctls; links, "
            "made by each server's agent in one `ip -batch`; each server's agent writing "
            "its nodes' addresses, routes and htb; and its switch program):\n\n"
            "| topology | where | ssh master | nodes | links | routes and htb | BPF |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(parts) + "\n\n" + hosts_on_every_server())


def hosts_on_every_server() -> str:
    """`make demo`'s job on one server, then with `rack` placement over three local
    servers (each leaf with its hosts and their NIC daemons on a server), in this run."""
    from mrcemu.fabric import cluster_local

    rows, jobs = [], {}
    for how in ("one server", "three local servers, rack"):
        mrcemu("clean")
        extra: list[str] = []
        try:
            if how != "one server":
                cluster_local.down()
                path, _ = cluster_local.up(3, placement="rack")
                extra = ["--cluster", str(path)]
            with tempfile.TemporaryDirectory() as out:
                try:
                    rep = run_report("failover", out, JOB_SLOWDOWN, *extra)
                except BenchError as e:
                    rows.append(f"| {how} | {e} | | | |")
                    continue
        finally:
            if how != "one server":
                cluster_local.down()
        mrc = rep["transports"]["mrc"]
        faithful = mrc["fidelity"]["ok"]
        jobs[how] = (mrc["job_completion_s"], faithful)
        hosts = rep.get("cluster", {}).get("hosts", {})
        where = ", ".join(f"{srv}: {sum(1 for v in hosts.values() if v == srv)}"
                          for srv in dict.fromkeys(hosts.values())) or "all here"
        rows.append(f"| {how} | {mrc['job_completion_s']:.3f} s | "
                    f"{'faithful' if faithful else '**not faithful**'} | {mrc['rtos']} | "
                    f"{where} |")
    ratio = ""
    if len(jobs) == 2:
        (a, fa), (b, fb) = jobs.values()
        ratio = (f"\n\nMRC's job over three servers / on one: "
                 f"**{b / a:.3f}**" + ("" if fa and fb else
                                        " (a run was **not faithful**: not comparable)"))
    return ("**The main job with hosts on every server.** `sudo .venv/bin/mrcemu run "
            f"failover --slowdown {JOB_SLOWDOWN}`, on this server alone, "
            "then with `--cluster` over `mrcemu cluster local 3 --placement rack`: leaf i of "
            "every plane and its hosts on server i mod 3 (the default fabric has 2 leaves a "
            "plane: the third server holds spines only), so h4-h7's NIC daemons run on "
            "srv1, started and asked by its agent.\n\n"
            "| where | MRC job | fidelity | MRC RTOs | hosts per server |\n"
            "|---|---|---|---|---|\n" + "\n".join(rows) + ratio + "\n")


run = fabric_cluster_updown
