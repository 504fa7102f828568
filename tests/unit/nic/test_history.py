"""The daemon's record of a connection's events stays bounded and answers lookups."""

from __future__ import annotations

from mrcemu.nic.history import History
from mrcemu.nic.ops import EvChange, PathChange
from mrcemu.transport.events import (
    ConnectionFailed,
    EvStateChanged,
    MessageCompleted,
    MessageReceived,
    PathRehashed,
)


class Conn:
    """A connection reduced to what History needs: queued events, live messages."""

    def __init__(self, events: list) -> None:
        self.events = list(events)

    def next_event(self):
        return self.events.pop(0) if self.events else None

    def message(self, msn: int):
        return None


def test_drain_sorts_each_event_into_its_record_in_order():
    evs = [EvStateChanged(1.0, 0xA, "GOOD", "ASSUMED_BAD", "x", 0.9),
           MessageCompleted(0, 100, 1, 0.5, 1.1), PathRehashed(2.0, 1, 2),
           MessageReceived(3, None, 2.1), ConnectionFailed(3.0, "r")]
    h, seen = History(), []
    h.drain(Conn(evs), seen.append)
    assert seen == evs
    assert h.ev_change_rows() == [EvChange(1.0, 0xA, "GOOD", "ASSUMED_BAD", "x", 0.9)]
    assert h.path_change_rows() == [PathChange(2.0, 1, 2)]
    assert h.ev_change_rows()[0].lost_sent == 0.9
    assert h.received == 1 and h.failed == evs[-1]
    assert h.message(Conn([]), 0) == {"msn": 0, "size": 100, "acked_pkts": 1, "npkts": 1,
                                      "posted_at": 0.5, "done_at": 1.1}
    assert h.message(Conn([]), 1) is None


def test_records_stop_growing_at_their_limits_and_count_what_went():
    h = History(done_limit=3, change_limit=2)
    h.drain(Conn([MessageCompleted(i, 1, 1, 0.0, 1.0) for i in range(5)]
                 + [EvStateChanged(float(i), i, "GOOD", "SKIP", "") for i in range(4)]))
    assert list(h.done) == [2, 3, 4]
    assert [r[1] for r in h.ev_change_rows()] == [2, 3]
    assert h.dropped == 2 + 2


def test_ev_changes_are_numbered_and_those_let_go_are_counted():
    from mrcemu.nic.history import History
    from mrcemu.transport.events import EvStateChanged

    h = History(change_limit=3)
    for i in range(5):
        h.absorb(EvStateChanged(float(i), i, "GOOD", "ASSUMED_BAD", "loss"))
    rows, nxt, dropped = h.ev_changes_since(0)
    assert [r.ev for r in rows] == [2, 3, 4] and nxt == 5 and dropped == 2
    rows, nxt, dropped = h.ev_changes_since(3)
    assert [r.ev for r in rows] == [3, 4] and dropped == 0
    assert h.ev_changes_since(5) == ([], 5, 0)
    assert h.ev_changes_since(9) == ([], 5, 0)  # past the end: nothing, nothing dropped
