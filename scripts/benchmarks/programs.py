"""`make bench`, section "RDMA programs on emulated hosts": Debian's perftest run
unmodified through the verbs shim (`mrcemu exec`), against mrcemu's own figures for the
same transfer on the same fabric."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from benchmarks.common import MRCEMU, BenchError, mrcemu

TITLE = "RDMA programs on emulated hosts"
BW_SIZE, BW_ITERS = 1 << 20, 40
LAT_ITERS = 30
PAIRS = {"within a leaf": ("h0", "h1"), "across": ("h0", "h7")}
# the paper's one-way latency for each pair (the scale model's input, which E0 measures)
PAPER_US = {"within a leaf": "PAPER_ONE_WAY_LOCAL_US", "across": "PAPER_ONE_WAY_CROSS_US"}


def _pair(server: str, client: str, cmd: list[str], transport: str = "mrc") -> str:
    """perftest's `cmd` as a server on `server` and a client on `client`: the client's
    output."""
    srv = subprocess.Popen([*MRCEMU, "exec", "--transport", transport, server, "--", *cmd],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        _listening(server, srv)
        r = subprocess.run([*MRCEMU, "exec", "--transport", transport, client, "--", *cmd,
                            server], capture_output=True, text=True, timeout=900)
        srv.wait(timeout=120)
    finally:
        if srv.poll() is None:
            os.killpg(srv.pid, signal.SIGKILL)
    if r.returncode:
        raise BenchError(f"`{' '.join(cmd)}` from {client} to {server} failed: "
                         f"{(r.stderr + r.stdout)[-400:]}")
    return r.stdout + r.stderr


def _listening(host: str, srv: subprocess.Popen, limit: float = 60.0) -> None:
    """Until perftest's server on `host` listens: a client started before would find no
    one and fail, and the server would then wait for a client forever."""
    import time

    from mrcemu.fabric import state
    from mrcemu.fabric.netns import listening
    from mrcemu.verbs.perftest import PORT

    st = state.load_state()
    assert st is not None
    deadline = time.monotonic() + limit
    while not listening(st.nodes[host], PORT):
        if srv.poll() is not None or time.monotonic() > deadline:
            raise BenchError(f"perftest's server on {host} never listened: "
                             f"{(srv.stderr.read() if srv.stderr else '')[-400:]}")
        time.sleep(0.05)


def _slowdown() -> float:
    from mrcemu.fabric import state
    from mrcemu.topology import load

    st = state.load_state()
    assert st is not None
    return load("default").host_link_mbps / st.topo().host_link_mbps


TRIES = 3  # a latency pair at the fabric's pick, then slower while it is not faithful


def _latency(name: str, a: str, b: str, k: float) -> str:
    """One pair's ib_write_lat on a fabric slowed `k` times, then slower while the NICs
    were not faithful over the program's run (the pace rule: a spinning program asks more
    of two cores than `auto`'s one pair at line rate); its table row."""
    from mrcemu.slowdown import next_slowdown
    from mrcemu.topology import latency, load
    from mrcemu.verbs import perftest

    for _ in range(TRIES):
        r = mrcemu("up", "default", "--slowdown", f"{k:g}", timeout=1800)
        if r.returncode:
            raise BenchError(f"`mrcemu up default --slowdown {k:g}` failed: {r.stderr[-300:]}")
        try:
            out = _pair(b, a, ["ib_write_lat", "-s", "2", "-n", str(LAT_ITERS)])
        finally:
            mrcemu("down")
        if "were faithful" in out:
            break
        k = next_slowdown(k)
    lat = perftest.latency(out)
    on_paper = lat.full_speed_us(k) / latency.time_scale(load("default"))
    paper = getattr(latency, PAPER_US[name])
    return (f"| {name} | {k:g} | {lat.typical_us / 1e3:.2f} ms | "
            f"{lat.full_speed_us(k) / 1e3:.2f} ms | {on_paper:.2f} us | {paper:.2f} us | "
            f"**{on_paper / paper:.2f}** | {'yes' if 'were faithful' in out else '**no**'} |")


def _bandwidth(k: float | None) -> tuple[float, list[str], bool]:
    """ib_write_bw beside `mrcemu send`, both transports, on a fabric slowed `k` times
    (None: as `up --slowdown auto` picks): the slowdown, the table's rows, and whether
    every run was faithful."""
    from mrcemu.verbs import perftest

    pace = "auto" if k is None else f"{k:g}"
    r = mrcemu("up", "default", "--slowdown", pace, timeout=1800)
    if r.returncode:
        raise BenchError(f"`mrcemu up default --slowdown {pace}` failed: {r.stderr[-300:]}")
    try:
        k = _slowdown()
        rows, faithful = [], True
        for transport in ("mrc", "roce"):
            out = _pair("h7", "h0", ["ib_write_bw", "-s", str(BW_SIZE), "-n", str(BW_ITERS),
                                     "--report_gbits"], transport)
            bw = perftest.bandwidth(out)
            s = mrcemu("send", "h0", "h7", "--size", str(BW_SIZE * BW_ITERS), "--transport",
                       transport, "--json", timeout=900)
            if s.returncode:
                raise BenchError(f"`mrcemu send` failed: {s.stderr[-300:]}")
            # both on the wall clock of one slowed fabric; shown at full speed (x k)
            ref = json.loads(s.stdout)["goodput_mbps"]
            faithful &= "were faithful" in out
            rows.append(f"| {transport} | {k:g} | {bw.average_mbps * k:.0f} Mb/s | "
                        f"{ref * k:.0f} Mb/s | **{bw.average_mbps / ref:.2f}** | "
                        f"{'yes' if 'were faithful' in out else '**no**'} |")
    finally:
        mrcemu("down")
    return k, rows, faithful


def run() -> str:
    from mrcemu.slowdown import next_slowdown

    mrcemu("clean")
    k, rows, faithful = _bandwidth(None)
    picked = k
    for _ in range(TRIES - 1):
        if faithful:
            break
        k, more, faithful = _bandwidth(next_slowdown(k))
        rows += more
    lat_rows = [_latency(name, a, b, picked) for name, (a, b) in PAIRS.items()]
    return (f"What it runs: `mrcemu up default --slowdown auto` "
            f"(it picked {picked:g}), then perftest through `mrcemu exec`, unmodified: "
            f"`ib_write_bw -s {BW_SIZE} -n {BW_ITERS} --report_gbits` from h0 to h7, over "
            "MRC and over RoCE, beside `mrcemu send h0 h7` of the same bytes (within "
            "10 %), on a fabric slower while either was not faithful; and `ib_write_lat -s "
            "2` within a leaf and across, each on a fabric slowed as `auto` picked, then "
            "slower while the NICs were not faithful over its run. (`up` does not know the "
            "programs to come, so its pick is for one pair's packets: a scenario of "
            "programs at `auto` measures them, \"A pace for programs\".)\n\n"
            "| transport | slowdown | ib_write_bw average, at full speed | mrcemu send, at "
            "full speed | ratio | faithful |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n\n"
            "| pair | slowdown | ib_write_lat one way, typical (wall clock) | at full speed | "
            "at the paper's scale | the paper's one way | ratio | "
            "faithful |\n|---|---|---|---|---|---|---|---|\n" + "\n".join(lat_rows) + "\n")
