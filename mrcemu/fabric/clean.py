"""Remove everything mrcemu ever created, even after `kill -9` of a manager."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from pyroute2 import IPRoute

from mrcemu import rundir
from mrcemu.fabric import state

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
    return out


def clean() -> dict[str, int]:
    """Returns counts of what was removed."""
    from mrcemu.fabric import children

    stopped = children.stop_all()  # first, each with its own signal (captures close)
    pids = set(our_processes())
    st = state.load_state()
    if st:
        pids |= {p for p in [st.manager_pid, *st.nodes.values(), *st.nics.values()]
                 if state.pid_alive(p)}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while any(state.pid_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
    veths = 0
    with IPRoute() as ipr:
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME")
            if name and IFNAME.match(name):
                try:
                    ipr.link("del", index=link["index"])
                    veths += 1
                except Exception:  # noqa: BLE001 - its peer's deletion may have taken it
                    pass
    from mrcemu.fabric import bpf

    bpf.unload()
    files = 0
    for p in (state.STATE, state.SOCKET, state.STATE.with_suffix(".tmp"),
              rundir.FAULTS, rundir.CHILDREN,
              *state.RUN_DIR.glob("nic-*.sock")):
        try:
            p.unlink()
            files += 1
        except FileNotFoundError:
            pass
    return {"processes": len(pids) + stopped, "veths": veths, "files": files}
