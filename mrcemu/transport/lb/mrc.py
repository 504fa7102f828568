"""MRC's EV profile as the white paper describes it (the white paper, 2.1; docs/transport.md):
each rotation sprays every usable EV of a plane once, in a fresh random order, and a
path that says it queues (a CE mark, a mid-path trim) sits out rotations in SKIP. The
SKIP's length and memory are the profile's mechanism (EvProfile.skip); this policy
decides when to ask for one."""

from __future__ import annotations

from mrcemu.transport.lb.base import Ev, Feedback, LoadBalancer


class MrcProfile(LoadBalancer):
    name = "mrc"

    def choose(self, plane: int, usable: list[Ev], now: float) -> list[int]:
        order = [e.ev for e in usable]
        self.rng.shuffle(order)
        return order

    def hear(self, e: Ev, what: Feedback, now: float, count: int = 1) -> None:
        if self.profile is None:
            return
        if what is Feedback.ECN:
            self.profile.skip(e.ev, now, "ECN echoed", self.cfg.ce_skip_rotations)
        elif what is Feedback.TRIM:
            self.profile.skip(e.ev, now, "NACK trimmed", self.cfg.trim_skip_rotations)
