"""The one NIC client against fake daemons (no root): batching, and nothing left
registered when a write is refused or a workload is given up."""

from __future__ import annotations

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.nic import client as client_mod
from mrcemu.nic import ops
from mrcemu.nic.client import NicClient


class FakeDaemons:
    def __init__(self, refuse_write_on: int | None = None, corrupt: bool = False) -> None:
        self.refuse_write_on = refuse_write_on
        self.corrupt = corrupt
        self.regions: dict[int, set[int]] = {}  # host -> live rkeys
        self.next_rkey = 100
        self.batches: list[tuple[str, int]] = []
        self.holds: list[tuple[str, int, float]] = []  # host, messages, timeout

    def __call__(self, host: str, op: str | ops.Op, timeout: float = 10.0,
                 **args: object) -> dict:
        if isinstance(op, ops.Wait):
            self.holds.append((host, len(op.msgs), op.timeout))
            return {"ok": True, "replies": [self.one(int(host[1:]), q.to_json())
                                            for q in op.requests()]}
        assert op == "batch"
        self.batches.append((host, len(args["requests"])))
        h = int(host[1:])
        return {"ok": True, "replies": [self.one(h, r) for r in args["requests"]]}

    def one(self, h: int, req: dict) -> dict:
        op = req["op"]
        if op == "register":
            self.next_rkey += 1
            self.regions.setdefault(h, set()).add(self.next_rkey)
            return {"ok": True, "rkey": self.next_rkey, "va": 0x1000}
        if op == "free":
            self.regions.get(h, set()).discard(req["rkey"])
            return {"ok": True}
        if op == "write":
            if h == self.refuse_write_on:
                return {"ok": False, "error": "over the NIC memory budget"}
            return {"ok": True, "msn": 7, "sha256": "abc"}
        if op == "msg":
            return {"ok": True, "posted_at": 1.0, "done_at": 2.0, "failed": False, "why": None,
                    "acked_pkts": 4, "npkts": 4}
        if op == "hash":
            return {"ok": True, "sha256": "zzz" if self.corrupt else "abc"}
        raise AssertionError(op)


def writes(n: int) -> list[dict]:
    return [{"src": s, "dst": 7, "size": 4096, "transport": "mrc", "seed": s} for s in range(n)]


def test_requests_go_one_batch_per_host(monkeypatch):
    fake = FakeDaemons()
    monkeypatch.setattr(client_mod, "request", fake)
    with NicClient(range(8)) as c:
        ws = c.post(writes(3))
    # One register batch at h7 (three requests), then one write batch at each source.
    assert fake.batches[0] == ("h7", 3)
    assert sorted(fake.batches[1:]) == [("h0", 1), ("h1", 1), ("h2", 1)]
    assert [w["msn"] for w in ws] == [7, 7, 7] and all(w["rkey"] > 100 for w in ws)


def test_a_refused_write_frees_every_region_already_registered(monkeypatch):
    fake = FakeDaemons(refuse_write_on=1)
    monkeypatch.setattr(client_mod, "request", fake)
    with NicClient(range(8)) as c, pytest.raises(MrcemuError, match="h1: over the NIC memory"):
        c.post(writes(3))
    assert fake.regions[7] == set()


def test_verify_compares_hashes_and_frees(monkeypatch):
    for corrupt in (False, True):
        fake = FakeDaemons(corrupt=corrupt)
        monkeypatch.setattr(client_mod, "request", fake)
        with NicClient(range(8)) as c:
            ws = c.post(writes(2))
            assert c.wait(ws, give_up=lambda: False)
            c.verify(ws)
        assert all(w["ok"] is (not corrupt) for w in ws)
        assert fake.regions[7] == set()


def test_wait_stops_when_told_to_give_up(monkeypatch):
    monkeypatch.setattr(client_mod, "request", FakeDaemons())
    with NicClient(range(8)) as c:
        ws = c.post(writes(1))
        assert c.wait(ws, give_up=lambda: True) is False
        assert "done_at" not in ws[0]  # never polled


def test_wait_polls_hosts_on_other_servers_at_the_interval_it_is_given(monkeypatch):
    fake = FakeDaemons()
    slept: list[float] = []
    monkeypatch.setattr(client_mod.time, "sleep", slept.append)
    with NicClient(range(8), FakeRelay(fake)) as c:  # hosts 4-7 on another server
        ws = c.post([{"src": 4, "dst": 7, "size": 4096, "transport": "mrc", "seed": 1}])
        assert c.wait(ws, give_up=lambda: False, every=0.4)
    assert slept == [0.4] and ws[0]["done_at"] == 2.0  # done at the first poll
    assert fake.holds == []  # a relay answers batches only


def test_the_poll_interval_follows_slower_links_only():
    from mrcemu.nic.client import POLL, poll_interval

    assert poll_interval(20) == POLL
    assert poll_interval(1) == pytest.approx(20 * POLL)  # a fabric slowed 20 times
    assert poll_interval(10_000) == POLL  # never more often than on 20 Mb/s links


class FakeRelay:
    """Hosts 4-7 on a server "srv1", reached through it: one call a server a batch."""

    def __init__(self, daemons: FakeDaemons, down: str | None = None) -> None:
        self.daemons, self.down = daemons, down
        self.calls: list[tuple[str, list[str]]] = []

    def via(self, host: str) -> str | None:
        return "srv1" if int(host[1:]) >= 4 else None

    def relay(self, via, batches, timeout):
        self.calls.append((via, sorted(batches)))
        return {h: ({"ok": False, "error": f"server {via}: the NIC daemon of {h} does not "
                                           "answer"} if h == self.down
                    else self.daemons(h, "batch", timeout, requests=rs))
                for h, rs in batches.items()}


def test_hosts_on_another_server_are_asked_through_its_relay_one_call_a_batch(monkeypatch):
    fake = FakeDaemons()
    monkeypatch.setattr(client_mod, "request", fake)
    relay = FakeRelay(fake)
    with NicClient(range(8), relay) as c:
        ws = c.post([{"src": s, "dst": d, "size": 4096, "transport": "mrc", "seed": s}
                     for s, d in ((0, 5), (6, 1), (7, 4))])
        # registrations at h5, h1 and h4; writes at h0, h6 and h7: those on srv1 in one
        # relayed call each time, the rest by their sockets here
        assert relay.calls == [("srv1", ["h4", "h5"]), ("srv1", ["h6", "h7"])]
        assert sorted(h for h, _ in fake.batches if int(h[1:]) < 4) == ["h0", "h1"]
        assert [w["msn"] for w in ws] == [7, 7, 7]
        # replies come back in the order asked, whichever way they went
        c.poll(ws)
        assert all(w["done_at"] == 2.0 for w in ws)


def test_a_daemon_the_relay_cannot_reach_is_one_error_naming_server_and_host(monkeypatch):
    fake = FakeDaemons()
    monkeypatch.setattr(client_mod, "request", fake)
    with NicClient(range(8), FakeRelay(fake, down="h6")) as c, \
            pytest.raises(MrcemuError, match="server srv1: the NIC daemon of h6 does not"):
        c.ask_each(ops.Msg(peer=1, msn=7))


def test_waiting_is_one_held_wait_a_source_host_not_a_poll(monkeypatch):
    fake = FakeDaemons()
    monkeypatch.setattr(client_mod, "request", fake)
    with NicClient(range(8)) as c:
        ws = c.post(writes(3) + [{"src": 0, "dst": 6, "size": 4096, "transport": "mrc",
                                  "seed": 9}])
        before = len(fake.batches)
        assert c.wait(ws, give_up=lambda: False, every=0.01)
    # Every write done in one round: a wait at each source (h0 holding two), held at
    # most HOLD seconds, and no batch of polls.
    assert sorted(fake.holds) == [("h0", 2, client_mod.HOLD), ("h1", 1, client_mod.HOLD),
                                  ("h2", 1, client_mod.HOLD)]
    assert len(fake.batches) == before
    assert all(w["done_at"] == 2.0 and w["acked_pkts"] == 4 for w in ws)


def test_a_message_the_nic_does_not_know_is_an_error_naming_the_host(monkeypatch):
    fake = FakeDaemons()
    monkeypatch.setattr(client_mod, "request", fake)
    monkeypatch.setattr(fake, "one", lambda h, r: {"ok": False, "error": "no message 7"})
    with NicClient(range(8)) as c, pytest.raises(MrcemuError, match="h2: no message 7"):
        c.hold([{"src": 2, "dst": 7, "transport": "mrc", "msn": 7}], 0.25)
