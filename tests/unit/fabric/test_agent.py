"""The per-server agent's protocol (mrcemu/fabric/agent.py): no root, no fabric."""

from __future__ import annotations

import json
import subprocess
import sys

from mrcemu.fabric import agent


def test_a_known_op_answers_with_its_result():
    assert agent.handle({"op": "ping"}) == {"ok": True, "result": "pong"}
    assert agent.handle({"op": "ping", "args": {}}) == {"ok": True, "result": "pong"}


def test_bad_requests_are_answers_that_say_what_is_wrong_never_a_crash():
    for req, words in ((["ping"], "unknown op None"), ({"op": "format"}, "unknown op 'format'"),
                       ({"op": "ping", "args": [1]}, "args must be an object"),
                       ({"op": "ping", "args": {"x": 1}}, "TypeError")):
        answer = agent.handle(req)
        assert answer["ok"] is False and words in answer["error"], answer
    assert "known: " in agent.handle({"op": "nope"})["error"]


def test_an_op_that_fails_reports_its_error():
    answer = agent.handle({"op": "path_loss", "args": {"port_mac": "02:00:00:00:00:01",
                                                       "src": "zz", "dst": "", "ev_hi": 0,
                                                       "percent": 1.0}})
    assert answer["ok"] is False and answer["error"].startswith("ValueError"), answer


def test_the_module_answers_one_line_per_request_line_in_order():
    lines = [json.dumps({"op": "ping"}), "{not json", "", json.dumps({"op": "nope"})]
    r = subprocess.run([sys.executable, "-m", "mrcemu.fabric.agent"],
                       input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    answers = [json.loads(x) for x in r.stdout.splitlines()]
    assert [a["ok"] for a in answers] == [True, False, False]
    assert answers[0]["result"] == "pong" and "not JSON" in answers[1]["error"]
    assert "unknown op 'nope'" in answers[2]["error"]


def test_a_relayed_batch_answers_for_every_host_even_one_whose_daemon_is_gone(tmp_path,
                                                                              monkeypatch):
    """The NIC relay: each host's batch to its daemon's socket here, the answers by host;
    a daemon that does not answer is that host's error, not the whole call's."""
    import socket
    import threading

    from mrcemu import rundir

    monkeypatch.setattr(rundir, "RUN_DIR", tmp_path)
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(rundir.nic_socket("h1")))
    srv.listen(1)

    def daemon() -> None:  # one batch, answered as a NIC daemon answers it
        conn, _ = srv.accept()
        with conn:
            req = json.loads(conn.makefile().readline())
            conn.sendall(json.dumps({"ok": True, "replies": [
                {"ok": True, "op": r["op"]} for r in req["requests"]]}).encode() + b"\n")

    t = threading.Thread(target=daemon)
    t.start()
    try:
        answer = agent.handle({"op": "nic", "args": {"timeout": 5, "batches": {
            "h1": [{"op": "stats"}, {"op": "msg"}], "h2": [{"op": "stats"}]}}})
    finally:
        t.join(timeout=10)
        srv.close()
    assert answer["ok"], answer
    got = answer["result"]
    assert got["h1"] == {"ok": True, "replies": [{"ok": True, "op": "stats"},
                                                 {"ok": True, "op": "msg"}]}
    assert got["h2"]["ok"] is False and "the NIC daemon of h2 does not answer" in \
        got["h2"]["error"]


def test_the_agent_says_which_processes_run_and_names_a_daemon_that_died_at_start():
    import os

    dead = subprocess.Popen(["true"])
    dead.wait()
    answer = agent.handle({"op": "alive", "args": {"pids": [os.getpid(), dead.pid]}})
    assert answer == {"ok": True, "result": {str(os.getpid()): True, str(dead.pid): False}}
    answer = agent.handle({"op": "nic_ready", "args": {"nics": {"h4": dead.pid},
                                                       "timeout": 5}})
    assert answer["ok"] is False and "the NIC daemon of h4 exited at start" in \
        answer["error"], answer


def test_an_interface_is_up_only_when_it_carries_packets():
    states = {"h0": {"h0-p0": ("UP", "veth"), "h0-p1": ("UNKNOWN", "veth"),
                     "lo": ("UNKNOWN", None)},
              "p0l0": {"p0l0-h0": ("DOWN", "veth"), "p0l0-p0s0": ("UNKNOWN", "vxlan")}}
    expected = {"h0": ["h0-p0", "h0-p1", "h0-p2"], "p0l0": ["p0l0-h0", "p0l0-p0s0"]}
    # a veth still UNKNOWN (its carrier not yet reported) and a DOWN one are not up; a
    # VXLAN port has no carrier and is up at UNKNOWN; an interface not there is named
    assert agent.not_up(states, expected) == [
        "h0:h0-p1 (UNKNOWN)", "h0:h0-p2 (MISSING)", "p0l0:p0l0-h0 (DOWN)"]
    assert agent.not_up(states, {"h0": ["h0-p0"], "p0l0": ["p0l0-p0s0"]}) == []
    assert agent.not_up({}, {"p1l0": ["p1l0-h0"]}) == ["p1l0:p1l0-h0 (MISSING)"]


def test_the_kernels_drops_are_read_per_interface_from_proc_net_dev_and_tc():
    dev = "\n".join([
        "Inter-|   Receive                |  Transmit",
        " face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop",
        "    lo: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
        "p0l0-s1: 4096 10 0 2 0 0 0 0 8192 20 0 5 0 0 0 0"])
    assert agent.dev_drops(dev) == {"lo": 0, "p0l0-s1": 7}  # received and sent
    tc = [{"kind": "htb", "dev": "p0l0-s1", "root": True, "drops": 3},
          {"kind": "clsact", "dev": "p0l0-s1", "parent": "ffff:fff1", "drops": 9},
          {"kind": "noqueue", "dev": "lo", "root": True, "drops": 0}]
    # a clsact's drops are the switch program's own, counted in its map: not a queue's
    assert agent.root_qdisc_drops(tc) == {"p0l0-s1": 3, "lo": 0}
