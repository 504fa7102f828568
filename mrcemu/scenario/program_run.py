"""Run a `kind: exec` workload's programs on the running fabric's hosts, over one
transport: each in turn once the one before is ready, all to their end (or the run's
time limit, or Ctrl-C, which end what is left), and what each printed.

The programs are the workload: the faults of the run's timeline land on their traffic,
and the NICs' records (its connections' EV states, packets, fidelity) are read around
them as for any other workload (`runner.run_transport`)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from mrcemu.fabric import hostprog, netns, state
from mrcemu.fabric.servers import of_running
from mrcemu.scenario.programs import Program

OUTPUT_BYTES = 64 * 1024  # what a report keeps of a program's output: its end
POLL_S = 0.02
TERM_GRACE_S = 2.0  # after SIGTERM, before SIGKILL


@dataclass
class Running:
    program: Program
    proc: subprocess.Popen
    out: tempfile.SpooledTemporaryFile  # type: ignore[type-arg]
    started_at: float
    ended_at: float | None = None
    ended_by: str | None = None  # None: it ended itself; or why we ended it
    listened: list[int] = field(default_factory=list)

    def record(self) -> dict:
        self.out.seek(0, os.SEEK_END)
        size = self.out.tell()
        self.out.seek(max(0, size - OUTPUT_BYTES))
        text = self.out.read().decode("utf-8", "replace")
        return {"host": f"h{self.program.host}", "command": self.program.command,
                "exit": self.proc.returncode, "ended_by": self.ended_by,
                "started_at": self.started_at, "ended_at": self.ended_at,
                "output": text, "output_cut": size > OUTPUT_BYTES}


def _start(p: Program, transport: str, st: object, servers: object) -> Running:
    out = tempfile.TemporaryFile()  # noqa: SIM115 - read after the program ends
    argv = hostprog.argv(st, f"h{p.host}", transport, servers, list(p.argv))
    # its own session: ended with its children (the shell, chrt, env and the program)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)
    return Running(p, proc, out, time.monotonic())


def _wait_ready(r: Running, ns_pid: int, before: set[int], until: float,
                halt: threading.Event) -> str | None:
    """None once `r` is ready to be followed; else why the workload cannot go on."""
    while r.program.ready == "listen":
        if (new := netns.listening_on(ns_pid) - before):
            r.listened = sorted(new)
            return None
        if r.proc.poll() is not None:
            return (f"h{r.program.host}: '{r.program.argv[0]}' ended (exit "
                    f"{r.proc.returncode}) before it listened on a TCP port")
        if halt.is_set() or time.monotonic() > until:
            return f"h{r.program.host}: '{r.program.argv[0]}' never listened on a TCP port"
        time.sleep(POLL_S)
    return None


def _reaped(running: list[Running]) -> bool:
    """Note when each program that ended did; whether all have."""
    now = time.monotonic()
    for r in running:
        if r.ended_at is None and r.proc.poll() is not None:
            r.ended_at = now
    return all(r.ended_at is not None for r in running)


def _end(running: list[Running], why: str) -> None:
    """End what still runs: SIGTERM to each program's session, SIGKILL after a grace."""
    alive = [r for r in running if r.proc.poll() is None]
    for r in alive:
        r.ended_by = why
        _signal(r, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_S
    for r in alive:
        try:
            r.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(r, signal.SIGKILL)
            r.proc.wait()


def _signal(r: Running, sig: int) -> None:
    try:
        os.killpg(r.proc.pid, sig)
    except ProcessLookupError:
        pass


def run(programs: tuple[Program, ...], transport: str, until: float,
        halt: threading.Event) -> tuple[bool, list[dict], str | None]:
    """Start the programs in order, each once the one before is ready, and wait for all
    to end, or `until` (monotonic), or `halt`. (all ended with exit 0, their records,
    why the workload stopped short or None)."""
    st = state.require_state()
    servers = of_running(st)
    running: list[Running] = []
    problem = None
    try:
        for p in programs:
            ns_pid = st.nodes[f"h{p.host}"]
            before = netns.listening_on(ns_pid)
            running.append(_start(p, transport, st, servers))
            if (problem := _wait_ready(running[-1], ns_pid, before, until, halt)):
                break
        while problem is None and not _reaped(running):
            if halt.is_set():
                problem = "interrupted"
            elif time.monotonic() > until:
                problem = "the scenario's time limit"
            else:
                time.sleep(POLL_S)
    finally:
        _end(running, problem or "interrupted")
        _reaped(running)
    ok = problem is None and len(running) == len(programs) and all(
        r.proc.returncode == 0 for r in running)
    return ok, [r.record() for r in running], problem
