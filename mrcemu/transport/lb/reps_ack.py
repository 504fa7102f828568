"""REPS as uet-htsim runs it: an unmarked ACK returns one EV to the ring, not one for
each packet it acknowledges.

uet-htsim's sink acknowledges every 16 KiB (`UecSink::_bytes_unacked_threshold`: four
of its 4,150-byte packets), and `UecMpReps::processEv` recycles the ACK's own EV, so
one good EV in four comes back and the other three packets explore. `reps` recycles
every packet an unmarked SACK acknowledged; this policy recycles one in `sack_every`
(a SACK's share here), counted a plane at a time. Not the SACK's own reflected EV: the
planes are interleaved eight a rotation and a SACK comes every fourth packet, so its
trigger is on the same two planes every time, and the other planes' rings would stay
empty. The comparison of the two is the cost of coalesced acks to REPS.
"""

from __future__ import annotations

from mrcemu.transport.lb.base import Ev, Feedback
from mrcemu.transport.lb.reps import Reps


class RepsPerAck(Reps):
    name = "reps_ack"

    def __init__(self, *args, **kw) -> None:  # noqa: ANN002, ANN003 - LoadBalancer's
        super().__init__(*args, **kw)
        self.owed: dict[int, int] = {}  # plane -> good packets heard since its last EV

    def hear(self, e: Ev, what: Feedback, now: float, count: int = 1) -> None:
        if what is not Feedback.ACK:
            return
        every = max(1, self.cfg.sack_every)
        plane = e.path.plane
        n, self.owed[plane] = divmod(self.owed.get(plane, 0) + count, every)
        if n:
            super().hear(e, what, now, n)
