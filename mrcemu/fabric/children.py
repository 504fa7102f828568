"""Helper processes a fabric runs beside itself (a flapping link, a packet capture),
recorded in the run directory so that `down` and `clean` end every one of them
without knowing what it is, even after a `kill -9` of whoever started it.

Each record holds the process's start time as the kernel counts it, so a recycled
PID is never mistaken for ours.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mrcemu import rundir

# Ours, to reap: a process we started is a zombie until we wait for it.
_popen: dict[int, subprocess.Popen] = {}


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


@contextmanager
def _records() -> Iterator[dict[str, dict]]:
    """The records, locked against other writers, saved on leaving the block if the
    block changed them."""
    rundir.RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(rundir.CHILDREN.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            recs = json.loads(rundir.CHILDREN.read_text())
        except (FileNotFoundError, ValueError):
            recs = {}
        was = json.dumps(recs)
        yield recs
        if json.dumps(recs) != was:
            tmp = rundir.CHILDREN.with_suffix(".tmp")
            tmp.write_text(json.dumps(recs, indent=1))
            tmp.replace(rundir.CHILDREN)


def spawn(argv: list[str], what: str, log: Path | None = None,
          stop_signal: int = signal.SIGTERM) -> subprocess.Popen:
    """Start `argv` in a session of its own (our Ctrl-C must not reach it first) and
    record it. `stop_signal` is how it likes to be asked to end (dumpcap: SIGINT, which
    closes its file cleanly)."""
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as err:  # the child has its own copy: ours closes here
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err, start_new_session=True)
    else:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    _popen[p.pid] = p
    with _records() as recs:
        recs[str(p.pid)] = {"what": what, "argv": argv, "start": _start_time(p.pid),
                            "signal": int(stop_signal)}
    return p


def alive(pid: int, start: int | None = None) -> bool:
    """Running (not a zombie) and, given `start`, the very process that was recorded."""
    p = _popen.get(pid)
    if p is not None and p.poll() is not None:
        return False
    try:
        st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return st[0] != "Z" and (start is None or int(st[19]) == start)


def stop(pid: int, timeout: float = 10.0) -> None:
    """Ask a recorded child to end with its own signal; kill it if it will not."""
    with _records() as recs:
        rec = recs.pop(str(pid), None)
    start = rec["start"] if rec else None
    sig = rec["signal"] if rec else signal.SIGTERM
    if alive(pid, start):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while alive(pid, start) and time.monotonic() < deadline:
            time.sleep(0.02)
        if alive(pid, start):
            os.kill(pid, signal.SIGKILL)
            while alive(pid, start):
                time.sleep(0.01)
    p = _popen.pop(pid, None)
    if p is not None:
        p.wait()


def recorded() -> dict[int, dict]:
    """Recorded children that are still running: PID -> record."""
    with _records() as recs:
        return {int(k): v for k, v in recs.items() if alive(int(k), v.get("start"))}


def stop_all() -> int:
    """End every recorded child; returns how many were running."""
    running = recorded()
    for pid in running:
        stop(pid)
    try:
        rundir.CHILDREN.unlink()
    except FileNotFoundError:
        pass
    return len(running)
