"""Unmodified RDMA programs on emulated hosts (`mrcemu exec` with the verbs shim): Debian's
perftest (ib_write_bw, ib_write_lat) between two hosts over MRC and over RoCE, the bytes
counted by the NICs; a program of our own writing through a spine failure while the Python
API reads its connection's EV events; and a program killed mid-transfer leaving nothing
behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mrcemu.fabric import idlegroup, oob
from mrcemu.nic.control import request
from tests.integration.conftest import mrcemu, wait_for

pytestmark = pytest.mark.skipif(shutil.which("ib_write_bw") is None,
                                reason="perftest is not installed: make install")
SIZE, ITERS = 65536, 200


def _exec(host: str, *cmd: str, transport: str = "mrc") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mrcemu", "exec", "--transport",
                             transport, host, "--", *cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _serving(host: str, server: subprocess.Popen, port: int | None = None
             ) -> subprocess.Popen:
    """`server` once it listens on `port` (perftest's by default) on `host` (a client
    started before finds no one, fails, and leaves the server waiting for ever)."""
    from mrcemu.fabric import state
    from mrcemu.fabric.netns import listening
    from mrcemu.verbs.perftest import PORT

    port = port or PORT
    st = state.load_state()
    assert st is not None
    wait_for(lambda: listening(st.nodes[host], port) or server.poll() is not None, 60)
    assert server.poll() is None, server.communicate()
    assert listening(st.nodes[host], port)
    return server


def _kill(*procs: subprocess.Popen) -> None:
    """Each program still running, with its process group (exec's and the program's)."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def _rx_bytes(host: str, peer: int = 0, transport: str = "mrc") -> int:
    """Payload bytes `host`'s NIC placed from `peer` (its first QP of the pair)."""
    st = request(host, "stats", peer=peer, transport=transport, missing_ok=True)["stats"]
    return st["rx_bytes"] if st else 0


def _perftest(cmd: list[str], transport: str) -> subprocess.CompletedProcess:
    """perftest's `cmd` as a server on h3, then its client on h0 once it listens: the
    client's run, after both succeeded."""
    server = _serving("h3", _exec("h3", *cmd, transport=transport))
    try:
        client = subprocess.run(
            [sys.executable, "-m", "mrcemu", "exec", "--transport", transport, "h0", "--",
             *cmd, "h3"], capture_output=True, text=True, timeout=240)
        out, err = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
    assert client.returncode == 0, client.stderr + client.stdout
    assert server.returncode == 0, err + out
    return client


@pytest.mark.parametrize("transport", ["mrc", "roce"])
def test_ib_write_bw_runs_unmodified_between_two_hosts(fabric, transport):
    before = _rx_bytes("h3", transport=transport)
    client = _perftest(["ib_write_bw", "-s", str(SIZE), "-n", str(ITERS)], transport)
    assert "mrcemu0" in client.stdout
    assert "mrcemu: the emulated NICs were" in client.stderr  # the verdict, after it
    rows = [ln.split() for ln in client.stdout.splitlines()
            if ln.split()[:2] == [str(SIZE), str(ITERS)]]
    assert len(rows) == 1, client.stdout  # its result: size, iterations, BW peak, ...
    # every WRITE placed at h3's NIC
    assert _rx_bytes("h3", transport=transport) - before >= SIZE * ITERS


@pytest.mark.parametrize("transport", ["mrc", "roce"])
def test_ib_write_lat_runs_unmodified_its_buffer_polled_as_the_nic_places_each_write(
        fabric, transport):
    """ib_write_lat polls its registered buffer for the peer's write: the NIC places the
    payload straight into the program's memory, where its polling sees it."""
    from mrcemu.verbs import perftest

    iters = 20
    client = _perftest(["ib_write_lat", "-s", "2", "-n", str(iters)], transport)
    lat = perftest.latency(client.stdout)
    assert (lat.size, lat.iterations) == (2, iters)
    # a round trip crosses the fabric twice: at least the base round trip's fixed latency
    # (the delay line's), whatever the machine's speed
    from mrcemu.fabric import state
    from mrcemu.topology import latency

    rtt = latency.base_rtt_s(state.load_state().topo(), 0, 3)
    assert lat.typical_us * 2 >= rtt * 1e6 * 0.99, (lat, rtt)


def test_a_program_runs_at_idle_priority_in_the_idle_cpu_group(fabric):
    """A program spinning on its buffer must not hold up the NICs: idle priority, and a
    CPU group scheduled as idle (an autogroup would otherwise give its session an equal
    share with each NIC's)."""
    r = subprocess.run([sys.executable, "-m", "mrcemu", "exec", "h0", "--", "sh", "-c",
                        "cat /proc/self/cgroup; grep '^policy' /proc/self/sched"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^policy\s*:\s*5$", r.stdout, re.M), r.stdout  # SCHED_IDLE
    procs, why = idlegroup.ensure()
    if procs is None:
        pytest.skip(f"no idle CPU group on this machine: {why}")
    assert (procs.parent / "cpu.idle").read_text().strip() == "1"
    lines = [ln for ln in r.stdout.splitlines() if ln.endswith(f"/{idlegroup.NAME}")]
    assert lines, r.stdout  # the program's CPU cgroup is the idle group


WRITE_CHECK = Path(__file__).with_name("programs") / "write_check.c"
ERRORS_CHECK = Path(__file__).with_name("programs") / "errors_check.c"


def _compiled(src: Path, tmp_path: Path) -> Path:
    exe = tmp_path / src.stem
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-o", str(exe), str(src), "-libverbs"],
                   check=True)
    return exe


def test_our_own_program_writes_through_a_spine_failure_its_events_name_the_path(
        fabric, tmp_path):
    """A verbs program of ours (tests/integration/programs/write_check.c): h0 writes 4 MiB
    to h3 four times over while spine p1s1 dies; h3 checks the bytes landed, and the
    Python API reads the EV events of the program's queue pair's connection meanwhile."""
    from mrcemu.api import Fabric
    from mrcemu.topology.paths import ev_fields

    exe = _compiled(WRITE_CHECK, tmp_path)
    size, rounds, port = 4 << 20, 4, "18600"
    fab = Fabric.attach()
    since = fab.ev_events("h0", "h3").next
    before = _rx_bytes("h3")
    server = _serving("h3", _exec("h3", str(exe), "server", port, str(size)), int(port))
    client = _exec("h0", str(exe), "client", "h3", port, str(size), str(rounds))
    try:
        wait_for(lambda: _rx_bytes("h3") - before > size, 60)  # the writes are under way
        fab.fail("switch-down", "p1s1")
        seen = []
        while client.poll() is None:  # its connection's events, read while it runs
            got = fab.ev_events("h0", "h3", since)
            seen += got.events
            since = got.next
            wait_for(lambda: client.poll() is not None, 0.2)
        out, err = client.communicate(timeout=10)
        sout, serr = server.communicate(timeout=30)
    finally:
        fab.heal()
        _kill(server, client)
    assert client.returncode == 0, err + out
    assert server.returncode == 0 and "equal" in sout, serr + sout
    assert _rx_bytes("h3") - before >= size * rounds
    seen += fab.ev_events("h0", "h3", since).events
    # the policy core retired each EV through the dead spine it had used, as events say
    bad = {e.ev for e in seen if e.new == "ASSUMED_BAD"}
    assert bad and all(ev_fields(ev) == (1, 1) for ev in bad), seen


@pytest.mark.parametrize("transport", ["mrc", "roce"])
def test_requests_the_peer_refuses_end_with_remote_access_errors(fabric, tmp_path, transport):
    """tests/integration/programs/errors_check.c: a WRITE one byte past the peer's region
    and one with a key it does not know each end with IBV_WC_REM_ACCESS_ERR (the QP in
    error, what follows flushed), a good one on another QP lands, and nothing is written
    outside the region."""
    exe = _compiled(ERRORS_CHECK, tmp_path)
    size, port = str(256 << 10), "18601"
    server = _serving("h3", _exec("h3", str(exe), "server", port, size, transport=transport),
                      int(port))
    client = _exec("h0", str(exe), "client", "h3", port, size, transport=transport)
    try:
        out, err = client.communicate(timeout=120)
        sout, serr = server.communicate(timeout=60)
    finally:
        _kill(server, client)
    assert client.returncode == 0, err + out
    assert out.count("remote access error") == 2 and "Work Request Flushed Error" in out
    assert "in the error state" in out and "NOT" not in out
    assert server.returncode == 0, serr + sout
    assert "0 bytes written outside the region" in sout and "equal" in sout


def test_a_program_killed_mid_transfer_is_cleaned_up(fabric):
    server = _serving("h3", _exec("h3", "ib_write_bw", "-s", "1048576", "-n", "100000"))
    client = _exec("h0", "ib_write_bw", "-s", "1048576", "-n", "100000", "h3")
    try:
        log = Path("/run/mrcemu/logs/nic-h0.jsonl")
        wait_for(lambda: '"verbs_session"' in log.read_text(), 60)
        wait_for(lambda: _rx_bytes("h3") > 4 << 20, 60)
        os.killpg(client.pid, signal.SIGKILL)
        client.wait(timeout=10)
        wait_for(lambda: '"verbs_session_end"' in log.read_text(), 30)
        ends = [json.loads(x) for x in log.read_text().splitlines()
                if '"verbs_session_end"' in x]
        assert ends, "h0's NIC did not end the killed program's session"
        # the NIC goes on: its control socket answers, it holds none of the program's memory
        assert request("h0", "ping")["ok"]
    finally:
        _kill(server, client)
    r = mrcemu("clean")
    assert r.returncode == 0, r.stderr
    assert not Path(f"/run/netns/{oob.NS}").exists()
    assert not idlegroup.exists()  # the programs' CPU group too


def test_a_write_to_a_peer_whose_nic_was_killed_ends_with_retry_exceeded(fabric, tmp_path):
    """The peer's NIC daemon killed mid-transfer: MRC hears nothing on any path, and the
    program's WRITE ends with IBV_WC_RETRY_EXC_ERR once its QP's retry limit (timeout 14,
    retry_cnt 7, as write_check sets them) runs out, not a hang. Last in the module: a
    killed NIC means a fresh fabric for whatever follows."""
    from mrcemu.fabric import state

    exe = _compiled(WRITE_CHECK, tmp_path)
    size, port = str(4 << 20), "18602"
    before = _rx_bytes("h3")
    server = _serving("h3", _exec("h3", str(exe), "server", port, size), int(port))
    client = _exec("h0", str(exe), "client", "h3", port, size, "1000")
    try:
        wait_for(lambda: _rx_bytes("h3") - before > int(size), 60)  # under way
        os.kill(state.load_state().nics["h3"], signal.SIGKILL)
        out, err = client.communicate(timeout=120)
    finally:
        _kill(server, client)
    assert client.returncode == 1, err + out
    assert "transport retry counter exceeded" in err, err
    log = Path("/run/mrcemu/logs/nic-h0.jsonl").read_text()
    failed = [json.loads(x) for x in log.splitlines() if '"qp_failed"' in x]
    assert failed and "nothing acknowledged on any path" in failed[-1]["why"], failed
