"""What the NIC daemon remembers of a connection's events, for its control clients.

The transport forgets: it only queues events. This keeps a bounded record of them:
the recent completions (looked up by MSN while a client waits for one) and the EV
and path changes (for reports). Past its limits the oldest go, and `dropped` counts
them, so a long-lived daemon's memory stays flat.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable

from mrcemu.nic.ops import EvChange, PathChange
from mrcemu.transport.base import Connection
from mrcemu.transport.events import (
    ConnectionFailed,
    Event,
    EvStateChanged,
    MessageCompleted,
    MessageFailed,
    MessageReceived,
    PathRehashed,
)

DONE_LIMIT = 4096  # completions kept for lookup: far more than a client has in flight
CHANGE_LIMIT = 50_000  # EV or path changes kept for reports


class History:
    def __init__(self, done_limit: int = DONE_LIMIT, change_limit: int = CHANGE_LIMIT) -> None:
        self.done: OrderedDict[int, MessageCompleted] = OrderedDict()
        self.done_limit = done_limit
        self.ev_changes: deque[EvStateChanged] = deque(maxlen=change_limit)
        self.path_changes: deque[PathRehashed] = deque(maxlen=change_limit)
        self.received = 0
        self.failed: ConnectionFailed | None = None
        self.refused: OrderedDict[int, MessageFailed] = OrderedDict()  # the peer's refusals
        self.dropped = 0  # records let go at the limits
        self.ev_seen = 0  # EV changes ever absorbed: the next one's number

    def absorb(self, ev: Event) -> None:
        if isinstance(ev, MessageCompleted):
            self.done[ev.msn] = ev
            if len(self.done) > self.done_limit:
                self.done.popitem(last=False)
                self.dropped += 1
        elif isinstance(ev, MessageReceived):
            self.received += 1
        elif isinstance(ev, EvStateChanged):
            self.dropped += len(self.ev_changes) == self.ev_changes.maxlen
            self.ev_changes.append(ev)
            self.ev_seen += 1
        elif isinstance(ev, PathRehashed):
            self.dropped += len(self.path_changes) == self.path_changes.maxlen
            self.path_changes.append(ev)
        elif isinstance(ev, ConnectionFailed):
            self.failed = ev
        elif isinstance(ev, MessageFailed):
            self.refused[ev.msn] = ev
            if len(self.refused) > self.done_limit:
                self.refused.popitem(last=False)
                self.dropped += 1

    def drain(self, c: Connection, also: Callable[[Event], None] | None = None) -> None:
        """Take every event the connection has queued; `also` sees each one too."""
        while (ev := c.next_event()) is not None:
            self.absorb(ev)
            if also is not None:
                also(ev)

    def message(self, c: Connection, msn: int) -> dict | None:
        """A message's state: still in the connection, or recently completed."""
        m = c.message(msn)
        if m is not None:
            return {"msn": m.msn, "size": m.size, "acked_pkts": m.acked, "npkts": m.npkts,
                    "posted_at": m.posted_at, "done_at": None}
        if (r := self.refused.get(msn)) is not None:  # done, as far as it will ever be
            return {"msn": msn, "size": 0, "acked_pkts": 0, "npkts": 0, "posted_at": r.t,
                    "done_at": None}
        d = self.done.get(msn)
        if d is None:
            return None
        return {"msn": d.msn, "size": d.size, "acked_pkts": d.npkts, "npkts": d.npkts,
                "posted_at": d.posted_at, "done_at": d.done_at}

    def ev_changes_since(self, since: int) -> tuple[list[EvChange], int, int]:
        """The EV changes numbered `since` and after (the first ever is 0), as rows; the
        number to ask from next; and how many of those asked for were let go."""
        first = self.ev_seen - len(self.ev_changes)
        start = min(max(since, first), self.ev_seen)
        rows = [EvChange(e.t, e.ev, e.old, e.new, e.why, e.lost_sent)
                for e in list(self.ev_changes)[start - first:]]
        return rows, self.ev_seen, max(0, first - since)

    def ev_change_rows(self) -> list[EvChange]:
        return [EvChange(e.t, e.ev, e.old, e.new, e.why, e.lost_sent) for e in self.ev_changes]

    def path_change_rows(self) -> list[PathChange]:
        return [PathChange(p.t, p.old_ev, p.new_ev) for p in self.path_changes]
