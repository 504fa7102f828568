"""The runner against fake NIC daemons (no root): how a run that stops is reported."""

from __future__ import annotations

import threading
import time

import pytest

from mrcemu.nic import client, ops
from mrcemu.scenario import analysis, runner
from mrcemu.scenario.model import load
from mrcemu.topology import Layout


@pytest.fixture(autouse=True)
def _no_running_fabric(monkeypatch):
    """The fake daemons stand for every host here, whatever fabric this machine runs
    (its state would split the hosts over its servers)."""
    monkeypatch.setattr(runner, "split_servers", lambda: None)


class FakeNics:
    """Answers the runner's requests as daemons would; `qp_fails` makes every message
    end as a RoCE QP does past its retry count: failed, never done."""

    def __init__(self, qp_fails: bool) -> None:
        self.qp_fails = qp_fails
        self.regions = 0

    def __call__(self, host: str, op: str | ops.Op, timeout: float = 10.0,
                 **args: object) -> dict:
        if isinstance(op, ops.Wait):  # answered at once, as a daemon does at its timeout
            return {"ok": True, "replies": [self.one(q.to_json()) for q in op.requests()]}
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
                    "failed": self.qp_fails, "acked_pkts": 0, "npkts": 1,
                    "why": "no ack" if self.qp_fails else None}
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


class StreamNics(FakeNics):
    """Each write is done on the second time the runner asks after it; counts what each
    direction has in flight."""

    def __init__(self) -> None:
        super().__init__(qp_fails=False)
        self.msn = 0
        self.asked: dict[int, int] = {}
        self.peer: dict[int, tuple[str, int]] = {}
        self.inflight: dict[tuple[str, int], int] = {}
        self.most = 0
        self.hashed = 0
        self.settings: dict[tuple[str, int], list] = {}  # per direction, per write

    def __call__(self, host: str, op: str | ops.Op, timeout: float = 10.0,
                 **args: object) -> dict:
        self.host = host
        return super().__call__(host, op, timeout, **args)

    def one(self, req: dict) -> dict:
        if req["op"] == "write":
            self.msn += 1
            key = (self.host, req["peer"])
            self.settings.setdefault(key, []).append(req.get("settings"))
            self.peer[self.msn] = key
            self.inflight[key] = self.inflight.get(key, 0) + 1
            self.most = max(self.most, self.inflight[key])
            return {"ok": True, "msn": self.msn, "sha256": "same"}
        if req["op"] == "msg":
            n = self.asked[req["msn"]] = self.asked.get(req["msn"], 0) + 1
            if n == 2:
                self.inflight[self.peer[req["msn"]]] -= 1
            return {"ok": True, "posted_at": 1.0, "done_at": 1.5 if n >= 2 else None,
                    "failed": False, "acked_pkts": 0, "npkts": 1, "why": None}
        if req["op"] == "hash":
            self.hashed += 1
        return super().one(req)


def test_a_stream_keeps_its_depth_in_flight_each_way_until_its_duration(monkeypatch, tmp_path):
    nics = StreamNics()
    monkeypatch.setattr(client, "request", nics)
    p = tmp_path / "s.yaml"
    p.write_text("topology: small\nworkload: {kind: stream, size: 64KiB, pairs: [h0-h3], "
                 "both_ways: true, duration: 0.3, depth: 3, pair_transport: "
                 "{h0-h3: {ev_planes: [1], ev_set_per_plane: 1}}}\ntransports: [mrc]\n")
    sc = load(p)
    layout = Layout(sc.topology)
    raw = runner.run_transport(sc, "mrc", layout, {}, lambda *_: None, threading.Event())
    (rec,) = raw["iterations"]
    flows = rec["flows"]
    assert rec["complete"] and raw["completed"]
    assert {(f["src"], f["dst"]) for f in flows} == {(0, 3), (3, 0)}
    # Never more than the depth in flight in a direction, and the stream went on past
    # its first window: writes were posted as earlier ones completed.
    assert nics.most == 3 and len(flows) > 2 * 3
    # Every write was hashed at its destination (which frees its region).
    assert nics.hashed == len(flows) == nics.regions and all(f["ok"] for f in flows)
    assert all(v == 0 for v in nics.inflight.values())
    # The pinned direction's every write carries its settings (the daemon makes its
    # connection with them); the other direction's none.
    pinned = {"ev_planes": [1], "ev_set_per_plane": 1}
    assert set(map(str, nics.settings[("h0", 3)])) == {str(pinned)}
    assert set(nics.settings[("h3", 0)]) == {None}


class QpNics(FakeNics):
    """Records each write's QP and size."""

    def __init__(self) -> None:
        super().__init__(qp_fails=False)
        self.writes: list[tuple[str, int, int, int]] = []

    def __call__(self, host: str, op: str | ops.Op, timeout: float = 10.0,
                 **args: object) -> dict:
        self.host = host
        return super().__call__(host, op, timeout, **args)

    def one(self, req: dict) -> dict:
        if req["op"] == "write":
            self.writes.append((self.host, req["peer"], req.get("qp", 0), req["size"]))
        return super().one(req)


def test_split_over_qps_keeps_every_byte_and_no_empty_write():
    assert runner.split_over_qps([(0, 1, 10)], 4) == [(0, 1, 3, 0), (0, 1, 3, 1),
                                                      (0, 1, 2, 2), (0, 1, 2, 3)]
    assert runner.split_over_qps([(0, 1, 2)], 4) == [(0, 1, 1, 0), (0, 1, 1, 1)]
    assert runner.split_over_qps([(0, 1, 7)], 1) == [(0, 1, 7, 0)]


@pytest.mark.parametrize("transport", ["roce", "mrc"])
def test_a_sweep_runs_each_size_in_turn_and_roce_splits_over_its_qps(monkeypatch, tmp_path,
                                                                     transport):
    nics = QpNics()
    monkeypatch.setattr(client, "request", nics)
    p = tmp_path / "s.yaml"
    p.write_text("topology: small\nworkload: {kind: all-to-all, size: [4KiB, 64KiB], "
                 "iterations: 2, qps: 4}\ntransports: [mrc, roce]\n")
    sc = load(p)
    layout = Layout(sc.topology)
    raw = runner.run_transport(sc, transport, layout, {}, lambda *_: None, threading.Event())
    assert [it["size"] for it in raw["iterations"]] == [4096, 4096, 65536, 65536]
    assert raw["completed"]
    pairs = 4 * 3
    qps = 4 if transport == "roce" else 1
    assert len(nics.writes) == 4 * pairs * qps
    # each message's bytes, over the pair's QPs: every QP used, every byte posted
    assert {q for *_, q, _n in nics.writes} == set(range(qps))
    assert sum(n for *_, n in nics.writes) == 2 * pairs * (4096 + 65536)
    s = analysis.summarize(raw, layout, 64)
    assert sorted(s["per_size"]) == ["4096", "65536"]
    assert s["per_size"]["65536"]["iterations"] == 2
    assert s["per_size"]["65536"]["host_bytes"] == 3 * 65536  # n-1 messages a host
    # the fake completes each write 0.5 s after posting: busbw = bytes a host sent / 0.5 s
    assert s["per_size"]["65536"]["busbw_mbps"] == pytest.approx(3 * 65536 * 8 / 0.5 / 1e6,
                                                                 abs=0.01)


class StepFaultNics(FakeNics):
    """Completes each write at once, except while the timeline has a fault due in the
    step: the step's writes then wait (a while at most) for it to be injected, as a
    step longer than its fault's moment would."""

    def __init__(self, injected: threading.Event) -> None:
        super().__init__(qp_fails=False)
        self.injected = injected
        self.hold = False

    def one(self, req: dict) -> dict:
        if req["op"] == "msg" and self.hold:
            assert self.injected.wait(5), "the step's fault was never injected"
        return super().one(req)


def test_a_steps_fault_acts_from_its_steps_start_and_heals_at_its_end(monkeypatch, tmp_path):
    events: list[tuple[str, str]] = []
    injected = threading.Event()
    nics = StepFaultNics(injected)
    monkeypatch.setattr(client, "request", nics)

    def fake_inject(layout, pids, fault):
        events.append(("inject", fault.target))
        injected.set()
        return runner.replace(fault, at=time.monotonic())

    def fake_heal(layout, pids, key):
        events.append(("heal", key.split(":", 1)[1]))
        return [type("Healed", (), {"dropped": None})()]

    monkeypatch.setattr(runner.inject, "inject", fake_inject)
    monkeypatch.setattr(runner.inject, "heal", fake_heal)
    # The switch counters as read at the barriers: the r-th read finds r squared packets
    # on one port of p0l0-p0s0 and none on the other, so each step's count differs.
    reads = iter(range(100))
    monkeypatch.setattr(runner.StepPorts, "read", lambda self: {
        "p0l0-s0": next(reads) ** 2, "p0s0-l0": 0})
    started = runner.Timeline.step_started

    def hold_step_1(self, step, t):
        nics.hold = step == 1
        started(self, step, t)

    monkeypatch.setattr(runner.Timeline, "step_started", hold_step_1)
    p = tmp_path / "s.yaml"
    p.write_text("topology: default\nworkload: {kind: permutation, steps: 2, repeat: 2}\n"
                 "transports: [mrc]\nmap_interval_ms: 0\nfaults:\n"
                 "  - {step: 1, at: 0, kind: link-down, target: p0l0-p0s0}\n"
                 "  - {step: 3, at: 1000, kind: gray, target: p1l0-p1s1}\n")
    sc = load(p)
    layout = Layout(sc.topology)
    raw = runner.run_transport(sc, "mrc", layout, {}, lambda *_: None, threading.Event())
    assert raw["completed"]
    # injected inside step 1, healed when it ended: before step 2's writes went out
    assert events == [("inject", "p0l0-p0s0"), ("heal", "p0l0-p0s0")]
    down, gray = raw["faults"]
    assert down["t_step"] is not None and not down["error"]
    assert down["t_heal"] < raw["t_end"]  # by the step's end, not by the run's
    # a fault due after its step ended never acts, and says so
    assert gray["t_inject"] is None and "step ended before it was due" in gray["error"]
    assert [s["step"] for s in raw["step_ports"]] == [0, 1, 2, 3]
    s = analysis.summarize(raw, layout, 64)
    first, second = s["step_faults"]
    assert (first["step"], first["kind"], first["error"]) == (1, "link-down", None)
    assert first["at_s"] is not None and first["healed_s"] >= first["at_s"]
    assert second["at_s"] is None and second["healed_s"] is None
    # the packets over each fault's link in its step and the one before, from the reads
    per_step = [s["packets"] for s in raw["step_ports"]]
    assert first["link_packets"] == sum(per_step[1].values())
    assert first["link_packets_step_before"] == sum(per_step[0].values())
