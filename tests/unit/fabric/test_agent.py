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
