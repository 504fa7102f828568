"""REPS, recycled entropies (Bonato et al., "REPS: Recycled Entropy Packet Spraying",
2024; uet-htsim's `UecMpReps`): an EV whose packet was acknowledged unmarked is a path
known to be good now, so it is used again; with none in hand, a random one is tried.

Per plane, a ring of the last `RING` good EVs heard, each used once: a packet takes the
oldest fresh entry whose EV is still usable, else explores a usable EV at random. A
good EV is one whose packet an unmarked SACK newly acknowledged (the compiled sender
counts them per EV: a CE mark sends its SACK at once, marked, so the packets an
unmarked one acknowledges all crossed unmarked). A marked or trimmed packet's EV is
simply not recycled. A ring a plane, not one a connection: the NIC stripes the planes'
ports, and each plane's EVs are its own.

The ring holds a rotation's worth at least: uet-htsim refills its buffer of 8 at each
ack and empties it at each packet, one at a time; a rotation here is a plane's usable
EVs at once, chosen from the acks heard since the last. With 60 EVs a plane
(`ev_per_path` 15) a ring of 8 would recycle 8 of each 60 packets and explore the rest,
which makes REPS nearly oblivious on a degraded spine.

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
        # plane -> its fresh good EVs, oldest first (a full ring drops its oldest)
        self.rings: dict[int, deque[int]] = {}
        self.explored = 0  # packets sent on an EV drawn at random
        self.recycled = 0  # packets sent on an EV an unmarked ack returned

    def counters(self) -> dict[str, int]:
        return {"recycled": self.recycled, "explored": self.explored}

    def hear(self, e: Ev, what: Feedback, now: float, count: int = 1) -> None:
        if what is not Feedback.ACK:
            return
        ring = self.rings.setdefault(e.path.plane, deque(maxlen=RING))
        ring.extend([e.ev] * min(count, ring.maxlen or RING))

    def choose(self, plane: int, usable: list[Ev], now: float) -> list[int]:
        ring = self.rings.get(plane)
        size = max(RING, len(usable))
        if ring is None or (ring.maxlen or 0) < size:
            ring = self.rings[plane] = deque(ring or (), maxlen=size)
        ok = {e.ev for e in usable}
        out: list[int] = []
        for _ in usable:
            while ring and ring[0] not in ok:
                ring.popleft()  # its EV was stopped or retired since
            if ring:
                out.append(ring.popleft())
                self.recycled += 1
            else:
                out.append(self.rng.choice(usable).ev)
                self.explored += 1
        return out
