"""The typed control surface: every request parses to its Op or is refused with one
line naming the field; the dispatch table answers every op and survives any request."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcemu.nic import handlers, ops
from mrcemu.nic.control import Held

EXAMPLES: dict[str, object] = {
    "int": 7, "int | None": 3, "bool": True, "dict": {"pmtu": 4096},
    "dict | None": {"load_balancing": "oblivious"}, "list": [{"op": "ping"}],
    "Transport": "roce", "EvId": 0x10002, "Seconds": 0.25, "EvIds | None": [1, 0x10002],
}


def example(cls: type[ops.Op]) -> ops.Op:
    return cls(**{f.name: EXAMPLES[str(f.type)] for f in dataclasses.fields(cls)})


def test_every_field_of_every_op_has_a_check_and_every_op_a_handler():
    for cls in ops.OPS.values():
        for f in dataclasses.fields(cls):
            assert str(f.type) in ops.CHECKS, (cls.OP, f.name, f.type)
    assert set(handlers.HANDLERS) == set(ops.OPS.values())


@pytest.mark.parametrize("name", sorted(ops.OPS))
def test_each_op_goes_to_json_and_back_unchanged(name):
    op = example(ops.OPS[name])
    wire = json.loads(json.dumps(op.to_json()))
    assert wire["op"] == name
    assert ops.parse(wire) == op


def test_optional_fields_left_at_their_defaults_stay_off_the_wire():
    assert ops.Stats(peer=3).to_json() == {"op": "stats", "peer": 3}
    assert ops.parse({"op": "stats", "peer": 3}) == ops.Stats(3, "mrc", 0, False)


def refusal(req: object) -> str:
    with pytest.raises(ops.OpError) as e:
        ops.parse(req)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_an_unknown_op_is_named_with_the_ones_there_are():
    msg = refusal({"op": "explode"})
    assert "unknown op 'explode'" in msg and "ping" in msg and "write" in msg


def test_a_request_without_an_op_or_not_an_object_is_refused():
    assert "missing field 'op'" in refusal({"peer": 1})
    assert "not list" in refusal([1, 2])
    assert "unknown op 7" in refusal({"op": 7})


def test_a_missing_field_is_named():
    assert refusal({"op": "write", "peer": 1, "va": 0, "rkey": 1}) == \
        "op 'write': missing field 'size'"
    assert refusal({"op": "reconnect", "peer": 1}) == "op 'reconnect': missing field 'gen'"


@pytest.mark.parametrize("field,value,kind", [
    ("size", "4096", "a non-negative integer"),
    ("size", -1, "a non-negative integer"),
    ("size", True, "a non-negative integer"),
    ("size", 1.5, "a non-negative integer"),
    ("transport", "udp", "'mrc' or 'roce'"),
    ("settings", [1], "a JSON object or null"),
    ("imm", "x", "a non-negative integer or null"),
])
def test_a_value_of_the_wrong_type_names_the_field_and_what_it_takes(field, value, kind):
    req = {"op": "write", "peer": 1, "size": 64, "va": 0, "rkey": 1, field: value}
    msg = refusal(req)
    assert msg.startswith(f"op 'write': field {field!r} must be {kind}, not ")


def test_an_unknown_field_is_named_with_the_fields_it_takes():
    msg = refusal({"op": "free", "rkey": 1, "rkye": 2})
    assert msg == "op 'free': unknown field 'rkye' (it takes: rkey)"


def test_an_ev_is_taken_as_a_number_or_as_reports_print_it():
    assert ops.parse({"op": "deny", "peer": 1, "ev": "0x00010002"}).ev == 0x10002
    assert ops.parse({"op": "deny", "peer": 1, "ev": 65538}).ev == 0x10002
    assert "field 'ev' must be an EV" in refusal({"op": "deny", "peer": 1, "ev": "p2s0"})


def test_change_rows_read_by_name_old_rows_without_a_lost_packet_too():
    c = {"ev_changes": [[1.5, 7, "GOOD", "STOPPED", "overdue", 1.2],
                        [2.0, 7, "STOPPED", "ASSUMED_BAD", "rto"]],
         "path_changes": [[3.0, 7, 9]]}
    a, b = ops.ev_changes(c)
    assert (a.new, a.lost_sent, b.why, b.lost_sent) == ("STOPPED", 1.2, "rto", None)
    (p,) = ops.path_changes(c)
    assert (p.old_ev, p.new_ev) == (7, 9)
    assert json.loads(json.dumps([a])) == [c["ev_changes"][0]]  # rows stay lists on disk


class StubNic:
    """Only what ping and shutdown touch: dispatch must refuse the rest before any
    handler sees it."""

    name, host, malformed, delay_bytes, running = "h0", 0, {}, 0, True

    class cfg:  # noqa: N801 - stands in for a TransportConfig
        @staticmethod
        def to_json() -> dict:
            return {}

    class memory:  # noqa: N801
        used, budget = 0, 1 << 20

    class tx_ports:  # noqa: N801
        @staticmethod
        def delay_counters() -> dict:
            return {}

    def held_bytes(self) -> int:
        return 0


def test_dispatch_answers_a_bad_request_with_one_line_and_the_good_ones_still_work():
    nic = StubNic()
    for bad in ({"op": "nope"}, {"op": "register"}, {"op": "register", "size": "big"},
                {"op": "hash", "rkey": 1, "extra": 0}, "ping", None):
        r = handlers.dispatch(nic, bad)
        assert r["ok"] is False and "\n" not in r["error"]
    assert handlers.dispatch(nic, {"op": "ping"})["host"] == "h0"
    r = handlers.dispatch(nic, {"op": "batch", "requests": [
        {"op": "ping"}, {"op": "free"}, {"op": "batch", "requests": []}, {"op": "shutdown"}]})
    ok = [x["ok"] for x in r["replies"]]
    assert ok == [True, False, False, True]
    assert r["replies"][1]["error"] == "op 'free': missing field 'rkey'"
    assert nic.running is False


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.sampled_from(["op", "peer", "size", "rkey", "x"]),
                                      kids, max_size=4), max_leaves=12))
def test_dispatch_never_raises_whatever_a_request_holds(req):
    nic = StubNic()
    if isinstance(req, dict) and req.get("op") not in (None, "ping", "shutdown"):
        req = {**req, "op": "free"}  # the stub has no memory table: parse must refuse
        if "rkey" in req and type(req["rkey"]) is int and req["rkey"] >= 0 and len(req) == 2:
            return
    r = handlers.dispatch(nic, req)
    assert isinstance(r, dict) and isinstance(r["ok"], bool)
    if not r["ok"]:
        assert "\n" not in r["error"]


@pytest.mark.parametrize("timeout", [-0.1, 10.5, float("nan"), True, "1"])
def test_a_wait_holds_for_ten_seconds_at_most(timeout):
    assert refusal({"op": "wait", "msgs": [], "timeout": timeout}).startswith(
        "op 'wait': field 'timeout' must be a number of seconds from 0 to 10, not ")


def test_a_wait_names_the_message_that_is_not_a_msg_request():
    w = ops.parse({"op": "wait", "msgs": [{"peer": 1, "msn": 3}, {"peer": 1}]})
    with pytest.raises(ops.OpError, match=r"op 'wait': msgs\[1\]: op 'msg': missing field"):
        w.requests()
    w = ops.parse({"op": "wait", "msgs": [5]})
    with pytest.raises(ops.OpError, match=r"msgs\[0\] must be a JSON object"):
        w.requests()
    assert ops.parse({"op": "wait", "msgs": [{"peer": 1, "msn": 3, "qp": 2}]}).requests() == [
        ops.Msg(peer=1, msn=3, qp=2)]


class WaitingNic(StubNic):
    """One MRC connection to h1 with message 5 in flight, and a clock."""

    class Conn:
        failed = False

    class Hist:
        def __init__(self) -> None:
            self.done_at: float | None = None
            self.failed = None
            self.refused: dict = {}

        def message(self, c: object, msn: int) -> dict | None:
            if msn != 5:
                return None
            return {"msn": 5, "size": 64, "acked_pkts": 1, "npkts": 1, "posted_at": 1.0,
                    "done_at": self.done_at}

    def __init__(self) -> None:
        self.c, self.h = self.Conn(), self.Hist()
        self.conns = {(1, "mrc", 0): self.c}
        self.history = {(1, "mrc", 0): self.h}

    def now(self) -> float:
        return 10.0

    def drain_events(self, c: object) -> None:
        pass


def test_a_wait_is_held_until_its_messages_are_done_and_answered_at_once_otherwise():
    nic = WaitingNic()
    five = {"peer": 1, "msn": 5}
    held = handlers.dispatch(nic, {"op": "wait", "msgs": [five], "timeout": 2})
    assert isinstance(held, Held) and held.deadline == 12.0
    assert held.settled() is False
    nic.h.done_at = 3.5
    assert held.settled() is True
    assert held.answer()["replies"][0]["done_at"] == 3.5
    # Done already, or failed, or unknown, or not to be held: answered now.
    assert handlers.dispatch(nic, {"op": "wait", "msgs": [five], "timeout": 2})["ok"]
    nic.h.done_at, nic.c.failed = None, True
    assert handlers.dispatch(nic, {"op": "wait", "msgs": [five], "timeout": 2})["ok"]
    nic.c.failed = False
    six = {"peer": 1, "msn": 6}  # unknown: nothing more will happen to it
    r = handlers.dispatch(nic, {"op": "wait", "msgs": [six], "timeout": 2})
    assert r["replies"] == [{"ok": False, "error": "no message 6 (unknown, or completed "
                             "too long ago to be remembered)"}]
    # ...but beside one in flight it waits for that one
    assert isinstance(handlers.dispatch(nic, {"op": "wait", "msgs": [five, six],
                                              "timeout": 2}), Held)
    assert handlers.dispatch(nic, {"op": "wait", "msgs": [five]})["replies"][0]["done_at"] is None
    r = handlers.dispatch(nic, {"op": "batch", "requests": [
        {"op": "wait", "msgs": [five], "timeout": 2}]})
    assert r["replies"][0]["ok"] and r["replies"][0]["replies"][0]["done_at"] is None


def test_an_explicit_profile_takes_a_non_empty_list_of_evs_as_reports_print_them():
    assert ops.parse({"op": "ev_profile", "peer": 3, "evs": ["0x00010002", 5]}) == \
        ops.EvProfile(3, [0x10002, 5])
    assert ops.parse({"op": "ev_profile", "peer": 3}) == ops.EvProfile(3)
    for bad in ([], ["nope"], [-1], "0x1", [1] * (ops.MAX_EVS + 1)):
        assert "evs" in refusal({"op": "ev_profile", "peer": 3, "evs": bad})
