"""What mrcemu made on this server, found and removed: its processes (managers, NIC
daemons, node shells, captures, shared ssh connections) and its interfaces. The agent
runs `clean_server` on each server; `clean` runs the same pieces here, and the rest."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

from pyroute2 import IPRoute

from mrcemu import rundir
from mrcemu.fabric import state

# Our interface names (see topology.layout) and Mininet's shell marker for our nodes.
IFNAME = re.compile(r"^(h\d+-p\d+|p\d+[ls]\d+-[hls]\d+)$")
NODE = re.compile(r"^(h\d+|p\d+[ls]\d+)$")


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [x.decode(errors="replace") for x in raw.split(b"\0") if x]


def _runs_on_a_host(pid: int) -> bool:
    """A program `mrcemu exec` started on an emulated host (its environment names the
    host NIC's verbs socket): it goes with the fabric."""
    try:
        return b"\0MRCEMU_VERBS_SOCKET=" in b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def host_programs() -> list[int]:
    """The programs running on emulated hosts."""
    return [int(d.name) for d in Path("/proc").iterdir()
            if d.name.isdigit() and _runs_on_a_host(int(d.name))]


def our_processes() -> list[int]:
    """Managers, node shells named mininet:<one of our node names>, and programs run on
    the emulated hosts."""
    out = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        args = cmdline(int(d.name))
        if {"mrcemu.fabric.manager", "mrcemu.nic.daemon", "mrcemu.fabric.inject"} & set(args):
            out.append(int(d.name))
        elif args and args[0].endswith("dumpcap") and "-i" in args[:-1] and IFNAME.match(
                args[args.index("-i") + 1]):
            out.append(int(d.name))  # a capture of `mrcemu run` left by a kill -9
        elif args and args[-1].startswith("mininet:") and NODE.match(args[-1][8:]):
            out.append(int(d.name))
        elif args and args[0].endswith("ssh") and any(
                a == f"ControlPath={rundir.ssh_control_path()}" for a in args):
            out.append(int(d.name))  # a server's shared connection (fabric/servers.py)
        elif _runs_on_a_host(int(d.name)):
            out.append(int(d.name))
    return out


def kill(pids: set[int], grace: float = 3.0) -> None:
    """SIGTERM, then SIGKILL for what still runs `grace` seconds later."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while any(state.pid_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)


def our_links() -> int:
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
            if not any(a.startswith("ControlPath=") for a in cmdline(p))}
    kill(pids)
    links = our_links()
    bpf.unload()
    shutil.rmtree(rundir.REMOTE_CAPTURES, ignore_errors=True)  # captures never fetched
    return {"processes": len(pids), "veths": links}
