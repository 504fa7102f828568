"""The NIC spawner: each request answered with a daemon's PID or an error, the daemon
in the namespace asked for, in a session of its own, nobody's child, with nothing of the
spawner's open but its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# A stand-in for the daemon: it prints where it runs, then waits to be ended.
FAKE = """
import json, os, sys, time
from mrcemu.nic import spawner

def run(host, topology, transport):
    print(json.dumps({"host": host, "topology": topology, "transport": transport,
                      "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0),
                      "net": os.readlink("/proc/self/ns/net"),
                      "comm": open("/proc/self/comm").read().strip(),
                      "fds": sorted(int(f) for f in os.listdir("/proc/self/fd"))}),
          flush=True)
    time.sleep(60)
    return 0

sys.exit(spawner.serve(run))
"""


@pytest.fixture
def spawner(tmp_path):
    err = tmp_path / "err"
    with open(err, "w") as f:
        p = subprocess.Popen([sys.executable, "-c", FAKE], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=f, text=True)
    started: list[int] = []

    def ask(line: str) -> dict:
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(line + "\n")
        p.stdin.flush()
        answer = json.loads(p.stdout.readline())
        if "pid" in answer:
            started.append(answer["pid"])
        return answer

    yield ask, err, p.pid
    assert p.stdin is not None
    p.stdin.close()
    assert p.wait(timeout=10) == 0  # it ends at the end of its input
    for pid in started:
        os.kill(pid, 9)


def request(host: int, netns_pid: int) -> str:
    return json.dumps({"host": host, "netns_pid": netns_pid, "topology": "{}",
                       "transport": '{"seed": 1}'})


def printed(err: Path, n: int) -> list[dict]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rows = [json.loads(x) for x in err.read_text().splitlines() if x.startswith("{")]
        if len(rows) >= n:
            return rows
        time.sleep(0.02)
    raise AssertionError(err.read_text())


def test_a_bad_request_or_a_namespace_that_is_gone_is_an_answer_and_the_next_is_served(
        spawner):
    ask, _, _ = spawner
    assert "bad request" in ask("not json")["error"]
    assert "bad request" in ask('{"host": 1}')["error"]
    gone = ask(request(1, 2**22 + 12345))  # above pid_max's default: no such process
    assert "FileNotFoundError" in gone["error"] and "pid" not in gone
    assert "bad request" in ask('{"host": "x", "netns_pid": 1, "topology": "", '
                                '"transport": ""}')["error"]


@pytest.mark.skipif(os.geteuid() != 0, reason="entering a namespace needs root")
def test_a_daemon_runs_in_the_namespace_asked_for_on_its_own(spawner, tmp_path):
    ask, err, spawner_pid = spawner
    # a namespace of its own, as a host's shell has
    ns = subprocess.Popen(["unshare", "--net", "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{ns.pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        a, b = ask(request(3, ns.pid)), ask(request(4, os.getpid()))
        rows = {r["host"]: r for r in printed(err, 2)}
        assert rows[3]["pid"] == a["pid"] and rows[4]["pid"] == b["pid"]
        assert rows[3]["net"] == os.readlink(f"/proc/{ns.pid}/ns/net")
        assert rows[4]["net"] == os.readlink("/proc/self/ns/net")
        for r in rows.values():
            assert r["topology"] == "{}" and r["transport"] == '{"seed": 1}'
            assert r["sid"] != os.getsid(0)  # a session of its own, not the spawner's
            assert r["ppid"] not in (spawner_pid, os.getpid())  # nobody's child here
            assert r["fds"] == [0, 1, 2, 3]  # 3: the listing's own
            assert r["comm"] == f"mrcemu-nic-h{r['host']}"
    finally:
        ns.kill()
        ns.wait()
