"""A scenario's `kind: exec` workload: real programs on emulated hosts, one command line
a program, the server first. Pure: parsed and checked here, started by
`scenario/program_run.py`.

Each program after the first starts once the one before it is ready: by default once it
listens on a TCP port it did not before (a perftest server, ready to take its client's
handshake on the out-of-band network), or at once (`ready: start`)."""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from typing import Any

from mrcemu import yamlfile
from mrcemu.errors import ConfigError
from mrcemu.topology import Topology

READY = ("listen", "start")
MAX_PROGRAMS = 64
FIELDS: dict[str, str] = {
    "host": "the host it runs on, e.g. `h7`; **required**",
    "run": "its command line, e.g. `ib_write_bw -s 65536 -n 2000` (the server first; a "
           "client names its server, `... h7`); **required**",
    "ready": "when the next program starts: `listen`, once this one listens on a TCP port "
             "(default, but for the last), or `start`, at once",
}


@dataclass(frozen=True)
class Program:
    host: int
    argv: tuple[str, ...]
    ready: str = "listen"

    @property
    def command(self) -> str:
        return shlex.join(self.argv)


def parse(source: str, data: Any, topo: Topology,
          host: Any) -> tuple[Program, ...]:
    """`workload.programs`: a list of {host, run, ready}. `host` parses a host name (the
    model's own check, so its errors read the same)."""
    if not isinstance(data, list) or not data:
        raise ConfigError(source, "workload.programs", data, "must be a non-empty list",
                          "e.g. programs: [{host: h7, run: ib_write_bw}, "
                          "{host: h0, run: ib_write_bw h7}]")
    if len(data) > MAX_PROGRAMS:
        raise ConfigError(source, "workload.programs", f"{len(data)} programs",
                          f"is more than {MAX_PROGRAMS}", "run fewer programs")
    out = []
    for i, p in enumerate(data):
        where = f"workload.programs[{i}]"
        p = yamlfile.fields(source, where, p, FIELDS,
                            "give host and run, e.g. {host: h0, run: ib_write_bw h7}")
        for k in ("host", "run"):
            if k not in p:
                raise ConfigError(source, f"{where}.{k}", None, "is required",
                                  "give host and run, e.g. {host: h0, run: ib_write_bw h7}")
        out.append(Program(host(source, f"{where}.host", p["host"], topo),
                           _argv(source, f"{where}.run", p["run"]),
                           _ready(source, f"{where}.ready",
                                  p.get("ready", "listen" if i < len(data) - 1 else "start"))))
    return tuple(out)


def _argv(source: str, where: str, run: Any) -> tuple[str, ...]:
    if isinstance(run, list) and run and all(isinstance(a, str) for a in run):
        argv = tuple(run)
    elif isinstance(run, str):
        try:
            argv = tuple(shlex.split(run))
        except ValueError as e:
            raise ConfigError(source, where, run, f"is not a command line ({e})",
                              "close the quote") from None
    else:
        argv = ()
    if not argv:
        raise ConfigError(source, where, run, "is not a command line",
                          "give the program and its arguments, e.g. ib_write_bw -s 65536 h7")
    if shutil.which(argv[0]) is None:
        raise ConfigError(source, where, argv[0], "is not a program found on PATH",
                          "install it (perftest: make install) or give its full path")
    return argv


def _ready(source: str, where: str, value: Any) -> str:
    if value not in READY:
        raise ConfigError(source, where, value, "is not a readiness",
                          "use listen (once it listens on a TCP port) or start (at once)")
    return value


def pairs(programs: tuple[Program, ...]) -> list[tuple[int, int, int]]:
    """The (src, dst, bytes) writes the programs are assumed to make, for the pace a
    fabric needs (`--slowdown auto`): each later program writes at line rate to the first,
    as a perftest client to its server. Their sizes are not known: 0."""
    first = programs[0].host
    return [(p.host, first, 0) for p in programs[1:] if p.host != first]


def _perftest(text: str) -> dict | None:
    """What perftest measured, if the output is perftest's: as the program measured it,
    in units the report's full-speed conversion reads (`_s` seconds, `_mbps` rates)."""
    from mrcemu.verbs import perftest

    try:
        b = perftest.bandwidth(text)
        return {"kind": "bandwidth", "size": b.size, "iterations": b.iterations,
                "average_mbps": round(b.average_mbps, 3), "peak_mbps": round(b.peak_mbps, 3)}
    except perftest.NotAResult:
        pass
    try:
        lat = perftest.latency(text)
        return {"kind": "latency", "size": lat.size, "iterations": lat.iterations,
                "typical_one_way_s": lat.typical_us / 1e6,
                "average_one_way_s": lat.average_us / 1e6, "p99_one_way_s": lat.p99_us / 1e6}
    except perftest.NotAResult:
        return None


def results(records: list[dict], t0: float) -> list[dict]:
    """The report's view of each program's run: when it started (from the run's start)
    and how long it ran, its exit, what it printed, and perftest's own figures."""
    return [{"host": r["host"], "command": r["command"], "exit": r["exit"],
             "ended_by": r["ended_by"], "started_at_s": round(r["started_at"] - t0, 6),
             "ran_s": round(r["ended_at"] - r["started_at"], 6),
             "perftest": _perftest(r["output"]), "output": r["output"],
             "output_cut": r["output_cut"]} for r in records]
