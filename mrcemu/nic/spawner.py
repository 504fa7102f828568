"""Starting NIC daemons by fork from one process that has imported the daemon already.

A daemon started as a fresh interpreter spends about 0.3 s of CPU on imports before it
opens a port: a host's NIC costs that at every bring-up, eight of them most of a second
of the default fabric's on 2 cores. The spawner pays it once: the agent starts it when
the fabric's build begins (`python -m mrcemu.nic.daemon --spawner`, so its command line
and its daemons' are the daemon's, which is how `clean` finds them), and asks it for each
host's daemon on stdin, one JSON line a host:

    {"host": 3, "netns_pid": 12345, "topology": "{...}", "transport": "{...}"}

It answers one JSON line each, `{"pid": N}` or `{"error": TEXT}`, and ends at the end of
its input (the agent closes it once every daemon started, or dies). Each daemon is a
grandchild: forked, in a session of its own, moved into the host's network namespace,
forked again so that it is nobody's child here (init reaps it, as it did a daemon whose
starter had exited), its output on the spawner's (the manager log), and nothing else of
the spawner's open.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import signal
import sys
from collections.abc import Callable
from typing import IO

CLONE_NEWNET = 0x40000000
PR_SET_NAME = 15
_libc = ctypes.CDLL(None, use_errno=True)

Run = Callable[[int, str, str], int]  # (host index, topology JSON, transport JSON) -> code


def enter_netns(pid: int) -> None:
    """Move this (single-threaded) process into the network namespace of `pid`."""
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into the namespace of PID {pid}: {os.strerror(err)}")
    finally:
        os.close(fd)


def _daemon(run: Run, req: dict, report: int) -> None:
    """In the first child: never returns. Writes the daemon's PID (or the error that
    kept it from starting) on `report`."""
    try:
        os.setsid()
        enter_netns(int(req["netns_pid"]))
        pid = os.fork()
    except Exception as e:  # noqa: BLE001 - the spawner answers with it
        os.write(report, json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
        os._exit(1)
    if pid:
        os.write(report, json.dumps({"pid": pid}).encode())
        os._exit(0)
    code = 1
    try:
        os.close(report)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)  # the spawner's stdout is its answers to the agent
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        random.seed()  # as a fresh interpreter would be
        # Its command line is the spawner's; its name (ps -o comm, top) says whose it is.
        _libc.prctl(PR_SET_NAME, f"mrcemu-nic-h{req['host']}".encode()[:15], 0, 0, 0)
        code = run(int(req["host"]), req["topology"], req["transport"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - the daemon logged what it could
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def spawn(run: Run, req: dict) -> dict:
    """One daemon for `req`: {"pid": N} or {"error": TEXT}."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        _daemon(run, req, w)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read()
    os.waitpid(child, 0)
    try:
        return json.loads(said)
    except ValueError:
        return {"error": "the daemon's starter ended without a word"}


def serve(run: Run, requests: IO[str] = sys.stdin, answers: IO[str] = sys.stdout) -> int:
    """Answer each request line until the input ends."""
    for line in requests:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            req = {"host": int(req["host"]), "netns_pid": int(req["netns_pid"]),
                   "topology": str(req["topology"]), "transport": str(req["transport"])}
            answer = spawn(run, req)
        except (ValueError, KeyError, TypeError) as e:
            answer = {"error": f"bad request: {type(e).__name__}: {e}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0
