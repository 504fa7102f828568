"""The reverse EV set (the white paper, 2.4): the EVs a connection's control packets go on.

SACKs, NACKs, cumulative ACKs, probe answers and endpoint messages go to the peer on a
small set of our EVs toward it, one a plane, not sprayed over every data EV. Spraying
them over EVs nobody vouches for loses the acks of a connection that only receives:
its data EVs carry nothing, so a path that died under them is never found, and a share
of its acks goes into the dead path for as long as the fault lasts (the sender then
takes the acks' loss for its data's, and retires good EVs).

How the set stays fresh, one rule each:
- **Data flowing:** every SACK or NACK names the EV its data went on, and the compiled
  sender stamps that EV's `last_feedback`. At most once a `refresh` interval, a plane
  whose EV was not heard from within it takes the plane's EV heard from last.
- **Only receiving:** nothing stamps our EVs, so every interval (an RTT: our data's,
  else our probes') one EV is probed, the planes in turn and a random EV of the plane
  on another path than the one in use, and adopted for its plane when the probe is
  answered. An unanswered probe changes nothing.
- **Retired:** an EV the path monitor retires (ASSUMED_BAD, DENIED) leaves the set at
  once, for the plane's EV heard from last among the rest.
- A plane that is down (our port or the peer's) is left out; with no plane left, the
  caller falls back to any EV in a live plane (anything beats silence).

Pure: no clock, no I/O; `now` and the intervals come from the connection.
"""

from __future__ import annotations

import random

from mrcemu.transport.evs import Ev, EvProfile, EvState

# Out of the reverse set: retired, or stopped as overdue (its forward path is suspect).
RETIRED = (EvState.STOPPED, EvState.ASSUMED_BAD, EvState.DENIED)


class ReverseEvs:
    def __init__(self, profile: EvProfile, rng: random.Random) -> None:
        self.profile = profile
        self._rng = rng
        self.chosen: dict[int, Ev] = {}  # plane -> the EV its control packets take
        self.confirmed: dict[int, float] = {}  # plane -> when that EV was last vouched for
        self.pending: dict[int, float] = {}  # EV -> when our probe on it went out
        self.last_probe = float("-inf")
        self.last_refresh = float("-inf")
        self.changes = 0  # EVs adopted after the first choice
        self.rtt: float | None = None  # smoothed, from our probes' answers
        self.probes = 0
        self._turn = 0
        self._rr = 0
        by_plane = self._by_plane()
        for plane in profile.planes:
            self._pick(plane, by_plane)
        self.changes = 0

    def _by_plane(self) -> dict[int, list[Ev]]:
        """The EVs that may carry control packets, by plane, in profile order."""
        out: dict[int, list[Ev]] = {p: [] for p in self.profile.planes}
        for e in self.profile.evs.values():
            if e.state not in RETIRED and e.path.plane in out:
                out[e.path.plane].append(e)
        return out

    def _adopt(self, e: Ev, at: float) -> bool:
        plane = e.path.plane
        old = self.chosen.get(plane)
        self.chosen[plane] = e
        self.confirmed[plane] = at
        if old is not e:
            self.changes += 1
            return True
        return False

    def _pick(self, plane: int, by_plane: dict[int, list[Ev]]) -> bool:
        """The plane's EV heard from last (the first in profile order on a tie)."""
        cands = by_plane.get(plane, [])
        if not cands:
            return self.chosen.pop(plane, None) is not None
        best = max(cands, key=lambda e: e.last_feedback)
        return self._adopt(best, best.last_feedback)

    def evs(self) -> list[Ev]:
        """The set, in plane order, without planes that are down."""
        down = self.profile.planes_down
        return [e for p, e in sorted(self.chosen.items()) if p not in down]

    def next(self) -> Ev | None:
        """One EV of the set, taken in turn: a single control packet's."""
        evs = self.evs()
        if not evs:
            return None
        self._rr = (self._rr + 1) % len(evs)
        return evs[self._rr]

    def retired(self, ev: int) -> bool:
        """The path monitor (or an admin) retired `ev`: if it was in the set, its plane
        takes another. True if the set changed."""
        e = self.profile.evs.get(ev)
        if e is None or self.chosen.get(e.path.plane) is not e:
            return False
        self.pending.pop(ev, None)
        # Told as the state changes (EvProfile._set emits first): leave it out by name.
        by_plane = self._by_plane()
        by_plane[e.path.plane] = [x for x in by_plane[e.path.plane] if x is not e]
        return self._pick(e.path.plane, by_plane)

    def refresh(self, now: float, interval: float) -> bool:
        """Data is flowing: each plane whose EV was not heard from within `interval`
        takes the plane's EV heard from last, if that one was heard from since. At most
        once an interval. True if the set changed."""
        if now < self.last_refresh + interval:
            return False
        self.last_refresh = now
        changed = False
        by_plane = self._by_plane()
        for plane, cands in by_plane.items():
            cur = self.chosen.get(plane)
            heard = -1.0 if cur is None else max(self.confirmed[plane], cur.last_feedback)
            if cur is not None and now - heard <= interval:
                if heard > self.confirmed[plane]:
                    self.confirmed[plane] = heard
                continue
            if not cands:
                continue
            best = max(cands, key=lambda e: e.last_feedback)
            if best.last_feedback > heard:
                changed |= self._adopt(best, best.last_feedback)
        return changed

    def probe_due(self, now: float, interval: float) -> Ev | None:
        """Only receiving: the EV to probe now, or None before `interval` has passed
        since the last probe. The live planes in turn, a random EV of the plane."""
        if now < self.last_probe + interval:  # as next_probe_at says: no rounding gap
            return None
        self.last_probe = now  # with nothing to probe too: the next try is an interval on
        # An answer later than this is not coming (the RTO is at most a few of these).
        self.pending = {ev: t for ev, t in self.pending.items() if now - t < 16 * interval}
        down = self.profile.planes_down
        planes = [p for p in self.profile.planes if p not in down]
        by_plane = self._by_plane()
        for _ in range(len(planes)):
            plane = planes[self._turn % len(planes)]
            self._turn += 1
            if cands := by_plane[plane]:
                # Another path than the one in use, where the plane has one: an answer
                # on the same path tells nothing new, and no answer there moves nothing.
                cur = self.chosen.get(plane)
                other = [x for x in cands if cur is None or x.path.spine != cur.path.spine]
                e = self._rng.choice(other or cands)
                self.pending[e.ev] = now
                self.probes += 1
                return e
        return None

    def next_probe_at(self, interval: float) -> float:
        return self.last_probe + interval

    def answered(self, ev: int, now: float) -> bool:
        """The peer answered our probe on `ev`: the EV carries packets to it now, so it
        becomes its plane's. True if the set changed."""
        sent = self.pending.pop(ev, None)
        if sent is None:
            return False
        # A connection that only receives has no RTT of its own data: its probes' is the
        # interval they go at.
        rtt = now - sent
        self.rtt = rtt if self.rtt is None else 0.875 * self.rtt + 0.125 * rtt
        e = self.profile.evs.get(ev)
        if e is None or e.state in RETIRED:
            return False
        return self._adopt(e, now)
