"""Remove everything mrcemu ever created, even after `kill -9` of a manager: here, and
on every server of the last fabric split over a cluster (by each one's agent)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

from pyroute2 import IPRoute

from mrcemu import rundir
from mrcemu.fabric import servers, state

# Our interface names (see topology.layout) and Mininet's shell marker for our nodes.
IFNAME = re.compile(r"^(h\d+-p\d+|p\d+[ls]\d+-[hls]\d+)$")
NODE = re.compile(r"^(h\d+|p\d+[ls]\d+)$")


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [x.decode(errors="replace") for x in raw.split(b"\0") if x]


def our_processes() -> list[int]:
    """Managers, and node shells named mininet:<one of our node names>."""
    out = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        args = _cmdline(int(d.name))
        if {"mrcemu.fabric.manager", "mrcemu.nic.daemon", "mrcemu.fabric.inject"} & set(args):
            out.append(int(d.name))
        elif args and args[0].endswith("dumpcap") and "-i" in args[:-1] and IFNAME.match(
                args[args.index("-i") + 1]):
            out.append(int(d.name))  # a capture of `mrcemu run` left by a kill -9
        elif args and args[-1].startswith("mininet:") and NODE.match(args[-1][8:]):
            out.append(int(d.name))
        elif args and args[0].endswith("ssh") and any(
                a == f"ControlPath={servers.control_path()}" for a in args):
            out.append(int(d.name))  # a server's shared connection (fabric/servers.py)
    return out


def _kill(pids: set[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while any(state.pid_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)


def _our_links() -> int:
    """Delete our interfaces in this namespace (veths, and VXLAN ports not yet moved
    into a node): only names our layout gives."""
    n = 0
    with IPRoute() as ipr:
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME")
            if name and IFNAME.match(name):
                try:
                    ipr.link("del", index=link["index"])
                    n += 1
                except Exception:  # noqa: BLE001 - its peer's deletion may have taken it
                    pass
    return n


def clean_server() -> dict[str, int]:
    """One server's share, run there by its agent: node shells and what runs in them,
    our devices, the switch program. Never its files: on a local server they are
    this machine's."""
    from mrcemu.fabric import bpf

    pids = {p for p in our_processes()
            if not any(a.startswith("ControlPath=") for a in _cmdline(p))}
    _kill(pids)
    links = _our_links()
    bpf.unload()
    shutil.rmtree(rundir.REMOTE_CAPTURES, ignore_errors=True)  # captures never fetched
    return {"processes": len(pids), "veths": links}


def _clean_cluster() -> tuple[dict[str, int], list[str]]:
    """Every remote server of the last cluster, by its agent; what failed, in words."""
    from mrcemu.errors import MrcemuError
    from mrcemu.topology.cluster import load

    done = {"processes": 0, "veths": 0}
    problems: list[str] = []
    try:
        path = rundir.LAST_CLUSTER.read_text().strip()
    except FileNotFoundError:
        return done, problems
    if not Path(path).exists():
        return done, problems  # its servers went with it (`cluster local --down`)
    try:
        cluster = load(path)
    except MrcemuError as e:
        return done, [f"the last cluster's file: {e}"]
    srv = servers.Servers(cluster)
    for s in cluster.servers:
        if s.local:
            continue
        try:
            part = srv.call(s, "clean_server")
        except MrcemuError as e:
            problems.append(str(e))
            continue
        for k in done:
            done[k] += part[k]
    return done, problems


def clean() -> dict[str, int]:
    """Returns counts of what was removed."""
    from mrcemu.fabric import children

    stopped = children.stop_all()  # first, each with its own signal (captures close)
    remote, problems = _clean_cluster()  # first, over the shared connections if alive
    pids = set(our_processes())
    st = state.load_state()
    if st:
        pids |= {p for p in [st.manager_pid, *st.nodes.values(), *st.nics.values()]
                 if state.pid_alive(p)}
    _kill(pids)
    veths = _our_links()
    from mrcemu.fabric import bpf

    bpf.unload()
    files = 0
    for p in (state.STATE, state.SOCKET, state.STATE.with_suffix(".tmp"),
              rundir.FAULTS, rundir.CHILDREN, *(() if problems else (rundir.LAST_CLUSTER,)),
              *rundir.SSH_CONTROL.glob("*"),
              *state.RUN_DIR.glob("nic-*.sock")):
        try:
            p.unlink()
            files += 1
        except FileNotFoundError:
            pass
    return {"processes": len(pids) + stopped + remote["processes"],
            "veths": veths + remote["veths"], "files": files, "problems": problems}
