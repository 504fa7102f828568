"""Which connections the NIC loop visits, and when: the ones whose timer falls due, and
the ones that ran out of send budget and wait for a port to drain.

A connection's next timer changes only when its state does (a frame received, a timer
run, packets sent, a write posted, a port or EV changed), and the daemon reschedules it
after each of those. So the loop keeps the due times in a heap and wakes for the
earliest, instead of asking every connection for its timer twice a round: with seven
busy connections and a wake-up per frame, that scan cost more than the frames did.

Pure: fed times, never reads a clock.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from mrcemu.wire.constants import MAX_TIMER_DEFER_S

C = TypeVar("C", bound=Hashable)


class Wakeups(Generic[C]):
    def __init__(self) -> None:
        # (due, tie-breaker, connection): the counter keeps connections from ever being
        # compared. An entry whose due time is no longer the connection's is stale and
        # skipped when it reaches the top (rescheduling never searches the heap).
        self._heap: list[tuple[float, int, C]] = []
        self._due: dict[C, float] = {}
        self._seq = itertools.count()
        # Connections that had more to send than the ports would take, oldest first:
        # the next to get budget when a port drains (round robin between them).
        self._starved: dict[C, None] = {}

    def schedule(self, c: C, due: float | None, now: float) -> None:
        """The connection's next timer is now `due` (None: it has none), computed at
        `now`. A deadline already past wakes at once, and is counted late (the fidelity
        monitor's timer lateness) from when the loop first knew something was due: an
        overdue wake-up of this connection that has not run yet, or else `now`. A
        deadline first known late (a probe due since the EV's last probe) is then not
        the host's delay, while a stall that kept a known timer waiting still is."""
        if due is None:
            self._due.pop(c, None)
            return
        if due < now:
            prev = self._due.get(c)
            due = max(due, prev) if prev is not None and prev <= now else now
        if self._due.get(c) == due:
            return
        self._due[c] = due
        heapq.heappush(self._heap, (due, next(self._seq), c))

    def _prune(self) -> None:
        heap = self._heap
        while heap and self._due.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)

    def next_due(self) -> float | None:
        """The earliest timer of any connection."""
        self._prune()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[tuple[C, float]]:
        """Connections whose timer is due at `now`, each with the time it fell due,
        earliest first. They are unscheduled: run the timer, then schedule again."""
        out: list[tuple[C, float]] = []
        while (due := self.next_due()) is not None and due <= now:
            _, _, c = heapq.heappop(self._heap)
            del self._due[c]
            out.append((c, due))
        return out

    def starve(self, c: C) -> None:
        """The connection had more to send than the budget allowed: last in line."""
        self._starved.pop(c, None)
        self._starved[c] = None

    def fed(self, c: C) -> None:
        """The connection sent all it could within its windows: no longer waiting."""
        self._starved.pop(c, None)

    def starved(self) -> Iterator[C]:
        """The connections waiting for send budget, longest-waiting first (a copy: the
        caller feeds them, which reorders the line)."""
        return iter(list(self._starved))

    def __len__(self) -> int:
        """Connections the loop will visit: a timer pending, or waiting for budget."""
        return len(self._due.keys() | self._starved.keys())


class TimerHold:
    """Whether the NIC's timers may run now. They judge silence, so they wait while the
    loop left frames unread (those frames may answer it), but for at most `limit_s`
    from the first round that left some: an input flood must not starve SACKs and
    RTOs. The compiled loop (datapath/loop.c) keeps the same rule for the timers it
    runs itself."""

    def __init__(self, limit_s: float = MAX_TIMER_DEFER_S) -> None:
        self.limit_s = limit_s
        self._since: float | None = None  # when frames were first left unread

    def may_run(self, left: bool, now: float) -> bool:
        """After a loop round at `now` that left frames unread or not (`left`)."""
        if not left:
            self._since = None
            return True
        if self._since is None:
            self._since = now
        if now - self._since < self.limit_s:
            return False
        self._since = None  # they run; a flood that goes on is held again from now
        return True
