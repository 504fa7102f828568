"""REPS, recycled entropies (Bonato et al., "REPS: Recycled Entropy Packet Spraying",
2024; uet-htsim's `UecMpReps`): an EV whose packet was acknowledged unmarked is a path
known to be good now, so it is used again; with none in hand, a random one is tried.

Per plane, a ring of the last `RING` good EVs heard, each usable `sack_every` times: one
of our SACKs acknowledges that many packets and reflects one EV (uet-htsim's
`repsMaxLifetimeEntropy`, its knob for coalesced acks). A packet takes the oldest fresh
entry whose EV is still usable, else explores a usable EV at random. A marked or
trimmed packet's EV is simply not recycled.

Left out: REPS's freezing mode (on a timeout, keep reusing the ring's EVs whatever
their age, to ride out a failure): here the path monitor handles failures for every
policy, and an EV it retires is never chosen.
"""

from __future__ import annotations

from collections import deque

from mrcemu.transport.lb.base import Ev, Feedback, LoadBalancer

RING = 8  # entries a plane's ring holds: uet-htsim's repsBufferSize


class Reps(LoadBalancer):
    name = "reps"
    wants_acks = True

    def __init__(self, *args, **kw) -> None:  # noqa: ANN002, ANN003 - LoadBalancer's
        super().__init__(*args, **kw)
        # plane -> [EV, uses left], oldest first
        self.rings: dict[int, deque[list[int]]] = {}
        self.explored = 0  # packets sent on an EV drawn at random
        self.recycled = 0  # packets sent on an EV an unmarked ack returned

    def hear(self, e: Ev, what: Feedback, now: float, count: int = 1) -> None:
        if what is not Feedback.ACK:
            return
        ring = self.rings.setdefault(e.path.plane, deque(maxlen=RING))
        for _ in range(min(count, RING)):
            ring.append([e.ev, max(1, self.cfg.sack_every)])

    def choose(self, plane: int, usable: list[Ev], now: float) -> list[int]:
        ring = self.rings.get(plane)
        ok = {e.ev for e in usable}
        out: list[int] = []
        for _ in usable:
            while ring and ring[0][0] not in ok:
                ring.popleft()  # its EV was stopped or retired since
            if ring:
                entry = ring[0]
                out.append(entry[0])
                entry[1] -= 1
                if entry[1] <= 0:
                    ring.popleft()
                self.recycled += 1
            else:
                out.append(self.rng.choice(usable).ev)
                self.explored += 1
        return out
