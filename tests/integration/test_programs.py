"""Unmodified RDMA programs on emulated hosts (`mrcemu exec` with the verbs shim): Debian's
perftest between two hosts over MRC and over RoCE, the bytes counted by the NICs, and a
program killed mid-transfer leaving nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mrcemu.fabric import oob
from mrcemu.nic.control import request
from tests.integration.conftest import mrcemu, wait_for

pytestmark = pytest.mark.skipif(shutil.which("ib_write_bw") is None,
                                reason="perftest is not installed: make install")
SIZE, ITERS = 65536, 200


def _exec(host: str, *cmd: str, transport: str = "mrc") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mrcemu", "exec", "--transport",
                             transport, host, "--", *cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _serving(host: str, server: subprocess.Popen) -> subprocess.Popen:
    """`server` once perftest listens on `host` (a client started before finds no one,
    fails, and leaves the server waiting for ever)."""
    from mrcemu.fabric import state
    from mrcemu.fabric.netns import listening
    from mrcemu.verbs.perftest import PORT

    st = state.load_state()
    assert st is not None
    wait_for(lambda: listening(st.nodes[host], PORT) or server.poll() is not None, 60)
    assert server.poll() is None, server.communicate()
    assert listening(st.nodes[host], PORT)
    return server


def _rx_bytes(host: str, peer: int = 0, transport: str = "mrc") -> int:
    """Payload bytes `host`'s NIC placed from `peer` (its first QP of the pair)."""
    st = request(host, "stats", peer=peer, transport=transport, missing_ok=True)["stats"]
    return st["rx_bytes"] if st else 0


@pytest.mark.parametrize("transport", ["mrc", "roce"])
def test_ib_write_bw_runs_unmodified_between_two_hosts(fabric, transport):
    before = _rx_bytes("h3", transport=transport)
    server = _serving("h3", _exec("h3", "ib_write_bw", "-s", str(SIZE), "-n", str(ITERS),
                                  transport=transport))
    try:
        client = subprocess.run(
            [sys.executable, "-m", "mrcemu", "exec", "--transport", transport, "h0", "--",
             "ib_write_bw", "-s", str(SIZE), "-n", str(ITERS), "h3"],
            capture_output=True, text=True, timeout=240)
        out, err = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
    assert client.returncode == 0, client.stderr + client.stdout
    assert server.returncode == 0, err + out
    assert "mrcemu0" in client.stdout
    assert "mrcemu: the emulated NICs were" in client.stderr  # the verdict, after it
    rows = [ln.split() for ln in client.stdout.splitlines()
            if ln.split()[:2] == [str(SIZE), str(ITERS)]]
    assert len(rows) == 1, client.stdout  # its result: size, iterations, BW peak, ...
    # every WRITE placed at h3's NIC
    assert _rx_bytes("h3", transport=transport) - before >= SIZE * ITERS


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
        for p in (server, client):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
    r = mrcemu("clean")
    assert r.returncode == 0, r.stderr
    assert not Path(f"/run/netns/{oob.NS}").exists()
