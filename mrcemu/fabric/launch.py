"""Start and stop the fabric manager from a foreground command (`up`, `down`, `run`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from mrcemu import rundir
from mrcemu.errors import FabricStateError, MrcemuError
from mrcemu.fabric import state
from mrcemu.fabric.clean import clean
from mrcemu.topology import Topology


def manager_env() -> dict[str, str]:
    """The manager's environment: ours, with setuptools' copy of distutils left out where
    this Python has its own. Mininet imports `distutils.version`, and setuptools' shim (a
    .pth file in the venv) answers that by importing most of setuptools: a quarter of a
    second at every bring-up. The standard library's module is the same one."""
    env = dict(os.environ)
    if Path(sysconfig.get_paths()["stdlib"], "distutils", "version.py").is_file():
        env["SETUPTOOLS_USE_DISTUTILS"] = "stdlib"
    return env


def launch(topo: Topology, progress: Callable[[str, int, int], None] | None = None,
           seed: int = 1, slowdown: float = 1.0, transport: dict | None = None,
           cluster: str | None = None) -> dict:
    """Start a manager for the validated topology `topo`, exactly as given, and wait
    until the fabric is up; returns its summary. Every change a run makes to a file's
    fabric (`--slowdown`'s rates, `--latency off`) is already in `topo`: the manager
    builds what it is handed and reads no file. `slowdown` is the factor `topo` was
    slowed by, for the transport clocks that do not follow the links. `seed` goes into
    the fabric's transport config (it orders the EV spraying), and so do `transport`'s
    settings (a scenario's `transport:`, checked by its loader).
    The topology's uSID engine (`auto` unless forced) is decided for this kernel first:
    a kernel that can run neither engine stops here, before anything is made.
    On any failure or Ctrl-C, whatever was built is torn down before raising."""
    from mrcemu.fabric import preflight_probe
    from mrcemu.fabric.usid_engine import resolved
    from mrcemu.preflight import missing_for_fabric

    missing = missing_for_fabric(preflight_probe.found())
    if missing:  # what was missing at the last probe may have been installed since
        missing = missing_for_fabric(preflight_probe.found(refresh=True))
    if missing:
        raise MrcemuError("this machine cannot run a fabric: " + "; ".join(missing)
                          + " — 'mrcemu doctor' lists everything mrcemu uses")
    topo = resolved(topo)
    with state.Lock() as lock:
        if lock.held_by_other():
            lock.acquire()  # raises the clear "already running" error
    state.RUN_DIR.mkdir(parents=True, exist_ok=True)
    rundir.rotate_logs()  # no fabric runs: nothing writes them
    with open(state.LOG, "a") as log:  # the manager has its own copy
        proc = subprocess.Popen([sys.executable, "-m", "mrcemu.fabric.manager",
                                 json.dumps(asdict(topo)), str(seed), str(slowdown),
                                 json.dumps(transport or {}),
                                 str(Path(cluster).resolve()) if cluster else ""],
                                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                start_new_session=True, text=True, env=manager_env())
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev["event"] == "progress" and progress:
                progress(ev["stage"], ev["n"], ev["total"])
            elif ev["event"] == "ready":
                return ev["summary"]
            elif ev["event"] == "error":
                proc.wait(timeout=60)
                raise MrcemuError(ev["message"])
        proc.wait(timeout=60)
        raise MrcemuError(f"the fabric manager exited early (code {proc.returncode}); "
                          f"see {state.LOG}")
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        clean()
        raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()


def stop() -> float:
    """Tear the running fabric down; returns the seconds it took."""
    st = state.load_state()
    if st is None or not state.pid_alive(st.manager_pid):
        leftovers = clean()
        if any(leftovers.values()):
            return 0.0
        raise FabricStateError("no fabric is running")
    t0 = time.monotonic()
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(state.SOCKET))
            s.sendall(b'{"op": "down"}\n')
            s.recv(100)
    except OSError:
        os.kill(st.manager_pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while state.pid_alive(st.manager_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in st.nodes.values() if state.pid_alive(p)]
    if state.pid_alive(st.manager_pid) or left:
        clean()
    from mrcemu.fabric import idlegroup, oob
    from mrcemu.fabric.sweep import host_programs, kill

    kill(set(host_programs()))  # programs run on its hosts go with the fabric
    oob.remove()  # made by `exec`, outside the manager's nodes
    idlegroup.remove()  # so is their CPU group
    return time.monotonic() - t0
