"""The runner against fake NIC daemons (no root): how a run that stops is reported."""

from __future__ import annotations

import threading

import pytest

from mrcemu.nic import client
from mrcemu.scenario import analysis, runner
from mrcemu.scenario.model import load
from mrcemu.topology import Layout


class FakeNics:
    """Answers the runner's requests as daemons would; `qp_fails` makes every message
    end as a RoCE QP does past its retry count: failed, never done."""

    def __init__(self, qp_fails: bool) -> None:
        self.qp_fails = qp_fails
        self.regions = 0

    def __call__(self, host: str, op: str, timeout: float = 10.0, **args: object) -> dict:
        assert op == "batch"
        return {"ok": True, "replies": [self.one(r) for r in args["requests"]]}

    def one(self, req: dict) -> dict:
        op = req["op"]
        if op in ("trace_reset", "free"):
            return {"ok": True}
        if op == "trace":
            return {"ok": True, "conns": [], "rx_bin_s": 0.01, "rx_bins": {}, "malformed": {}}
        if op == "register":
            self.regions += 1
            return {"ok": True, "rkey": self.regions, "va": 0}
        if op == "write":
            return {"ok": True, "msn": 0, "sha256": "same"}
        if op == "msg":
            return {"ok": True, "posted_at": 1.0, "done_at": None if self.qp_fails else 1.5,
                    "failed": self.qp_fails, "acked_pkts": 0, "npkts": 1}
        if op == "hash":
            return {"ok": True, "sha256": "same"}
        raise AssertionError(op)


@pytest.mark.parametrize("qp_fails", [True, False])
def test_a_failed_qp_is_reported_failed_not_timed_out(monkeypatch, qp_fails):
    monkeypatch.setattr(client, "request", FakeNics(qp_fails))
    sc = load("incast")
    layout = Layout(sc.topology)
    raw = runner.run_transport(sc, "roce", layout, {}, lambda *_: None, threading.Event())
    s = analysis.summarize(raw, layout, 64)
    if qp_fails:
        assert s["failed"] and not s["timed_out"] and not s["completed"]
        assert s["failed_flows"] and all("->h7" in f for f in s["failed_flows"])
        assert raw["iterations"][0]["complete"] is False
    else:
        assert s["completed"] and not s["failed"] and not s["timed_out"]
        assert s["iterations_done"] == sc.workload.iterations
