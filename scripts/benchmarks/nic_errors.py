"""`make bench`, section "What a NIC tells a program": how soon a program learns that its
peer refused a WRITE (one byte past the region, a key it does not know), over MRC and
RoCE, in the pair's round trips; and how soon a WRITE to a peer whose NIC daemon was
killed ends, against the QP's retry limit."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.common import MRCEMU, ROOT, BenchError, mrcemu

TITLE = "What a NIC tells a program"
PROGRAMS = ROOT / "tests" / "integration" / "programs"
SIZE = 16 << 10  # a few packets: the NAK comes a round trip after the last
KILL_SIZE, PORTS = 4 << 20, ("18611", "18612", "18613")
RUNS = 3  # the killed-peer run, each on a fabric of its own
LOG = Path("/run/mrcemu/logs/nic-h0.jsonl")


def _compile(src: Path, out: Path) -> Path:
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-o", str(out), str(src), "-libverbs"],
                   check=True)
    return out


def _exec(host: str, transport: str, *cmd: str) -> subprocess.Popen:
    return subprocess.Popen([*MRCEMU, "exec", "--transport", transport, host, "--", *cmd],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _serve(host: str, port: str, srv: subprocess.Popen) -> subprocess.Popen:
    from mrcemu.fabric import state
    from mrcemu.fabric.netns import listening

    st = state.load_state()
    deadline = time.monotonic() + 60
    while not listening(st.nodes[host], int(port)):
        if srv.poll() is not None or time.monotonic() > deadline:
            raise BenchError(f"the server on {host} never listened: "
                             f"{(srv.stderr.read() if srv.stderr else '')[-300:]}")
        time.sleep(0.05)
    return srv


def _end(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def _srtt() -> float:
    """h0's MRC round trip to h3 as its connection smoothed it (wall clock, seconds)."""
    from mrcemu.nic.control import request

    r = request("h0", "stats", peer=3, transport="mrc", missing_ok=True)
    if not r["stats"] or r.get("srtt") is None:
        raise BenchError("h0's MRC connection to h3 has no round trip measured")
    return r["srtt"]


def _refusals(exe: Path, transport: str, port: str) -> dict[str, float]:
    """errors_check's requests over `transport`: each one's time to its completion (us)."""
    srv = _serve("h3", port, _exec("h3", transport, str(exe), "server", port, str(SIZE)))
    cli = _exec("h0", transport, str(exe), "client", "h3", port, str(SIZE))
    try:
        out, err = cli.communicate(timeout=300)
        sout, serr = srv.communicate(timeout=60)
    finally:
        _end(srv, cli)
    if cli.returncode or srv.returncode:
        raise BenchError(f"errors_check over {transport} failed: {(err + out)[-300:]} "
                         f"{(serr + sout)[-300:]}")
    return {m[1]: float(m[2]) for m in re.finditer(r"errors_check: ([^:\n]+): [^\n]* in "
                                                   r"(\d+) us", out)} | {
        "outside": float(re.search(r"(\d+) bytes written outside", sout)[1])}


def _killed_peer(exe: Path, port: str) -> tuple[float, float, float, str]:
    """write_check to h3 until h3's NIC daemon is killed: the seconds from the kill to h0's
    NIC failing the QP (its log's time: the program's own exit and `exec`'s verdict after
    it are not the NIC's), the QP's retry limit (seconds, wall clock) and how the write
    ended."""
    from mrcemu.fabric import state
    from mrcemu.nic.control import request
    from mrcemu.transport.config import retry_budget

    budget = retry_budget(14, 7, _slowdown())  # write_check's timeout and retry_cnt
    srv = _serve("h3", port, _exec("h3", "mrc", str(exe), "server", port, str(KILL_SIZE)))
    cli = _exec("h0", "mrc", str(exe), "client", "h3", port, str(KILL_SIZE), "1000")
    try:
        deadline = time.monotonic() + 120
        while (request("h3", "stats", peer=0, transport="mrc", missing_ok=True)["stats"]
               or {}).get("rx_bytes", 0) < KILL_SIZE:
            if time.monotonic() > deadline or cli.poll() is not None:
                raise BenchError("write_check's writes never got under way")
            time.sleep(0.05)
        t0 = time.monotonic()  # the daemons' clock too: CLOCK_MONOTONIC is the machine's
        os.kill(state.load_state().nics["h3"], signal.SIGKILL)
        _out, err = cli.communicate(timeout=600)
    finally:
        _end(srv, cli)
    failed = [e for e in map(json.loads, LOG.read_text().splitlines())
              if e["event"] == "qp_failed" and e["peer"] == "h3" and e["t"] >= t0]
    took = failed[0]["t"] - t0 if failed else float("inf")
    # the NIC's own count: from the last acknowledgement it heard (acks already in flight
    # when the peer died arrive up to a round trip after the kill, and count, as on a NIC)
    silent = (float(re.search(r"for ([\d.]+) s", failed[0]["why"])[1]) if failed
              else float("inf"))
    how = ("retry exceeded" if "transport retry counter exceeded" in err
           else f"exit {cli.returncode}: {err.strip()[-80:]}")
    return took, silent, budget, how


def _slowdown() -> float:
    from mrcemu.fabric import state
    from mrcemu.topology import load

    st = state.load_state()
    return load(st.topology).host_link_mbps / st.topo().host_link_mbps


def run() -> str:
    work = Path(tempfile.mkdtemp(prefix="mrcemu-bench-"))
    errors = _compile(PROGRAMS / "errors_check.c", work / "errors_check")
    writes = _compile(PROGRAMS / "write_check.c", work / "write_check")
    mrcemu("clean")
    rows, kills = [], []
    r = mrcemu("up", "small", timeout=1800)
    if r.returncode:
        raise BenchError(f"`mrcemu up small` failed: {r.stderr[-300:]}")
    try:
        got = {t: _refusals(errors, t, port) for t, port in (("mrc", PORTS[0]),
                                                               ("roce", PORTS[1]))}
        rtt_us = _srtt() * 1e6
    finally:
        mrcemu("down")
    for t, g in got.items():
        for what, label in (("a WRITE one byte past the region", "one byte past the region"),
                            ("a WRITE with a key the peer does not know", "a key unknown")):
            rows.append(f"| {t} | {label} | {g[what] / 1e3:.2f} ms | "
                        f"**{g[what] / rtt_us:.1f}** | {g['outside']:.0f} |")
    for _ in range(RUNS):
        r = mrcemu("up", "small", timeout=1800)
        if r.returncode:
            raise BenchError(f"`mrcemu up small` failed: {r.stderr[-300:]}")
        try:
            kills.append(_killed_peer(writes, PORTS[2]))
        finally:
            mrcemu("down")
            mrcemu("clean")
    # a run the retry limit did not end has no ratio to the limit: inf, a missed target
    krows = [f"| {i + 1} | {how} | {took:.3f} s | {silent:.3f} s | {budget:.3f} s | "
             f"**{silent / budget if how == 'retry exceeded' else float('inf'):.3f}** |"
             for i, (took, silent, budget, how) in enumerate(kills)]
    return (f"What it runs, on `mrcemu up small`: `errors_check` (a program of ours, "
            f"tests/integration/programs) posts a {SIZE // 1024} KiB WRITE one byte past "
            "its peer's region and one with a key the peer does not know, each on a queue "
            "pair of its own, from h0 to h3, over MRC and over RoCE; each request's time "
            "from its post to its error completion is set against the pair's round trip as "
            f"h0's MRC connection smoothed it ({rtt_us / 1e3:.2f} ms, wall clock). Then, "
            f"{RUNS} times on a fresh fabric, `write_check` writes to h3 over MRC until "
            "h3's NIC daemon is killed with -9: the time from the kill to h0's NIC failing "
            "the queue pair (its log), and the silence it counted by then (from the last "
            "acknowledgement it heard: those in flight at the kill come up to a round trip "
            "after it), against the QP's retry limit (timeout 14, retry_cnt 7, times the "
            "fabric's slowdown).\n\n"
            "| transport | the request | to its remote access error | in round trips | "
            "bytes written outside the region |\n|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n\n"
            "| run | how the WRITE ended | the NIC failed the QP, from the kill | nothing "
            "acknowledged for, by then | the retry limit | silence / limit |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(krows) + "\n")
