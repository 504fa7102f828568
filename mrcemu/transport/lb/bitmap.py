"""The penalty bitmap of uet-htsim's `UecMpBitmap` (its default load balancer): EVs are
swept in a random order, redrawn at each wrap; feedback puts a penalty on an EV
(ECN +1, a mid-path trim +4, a timeout the maximum, 15), and a sweep that reaches a
penalized EV passes over it and takes one off. So an EV marked once sits out one sweep,
one trimmed four, and a path that keeps being marked keeps being passed over.

As in the reference, only the first penalized EV met on the way to a pick pays for it;
the pick after a run of penalized EVs is the next clean one, or after a whole sweep of
them the EV where the sweep stopped. A restored EV starts clean: the path monitor,
not the penalty, judged it.
"""

from __future__ import annotations

from mrcemu.transport.lb.base import Ev, Feedback, LoadBalancer

MAX_PENALTY = 15
PENALTY = {Feedback.ECN: 1, Feedback.TRIM: 4, Feedback.TIMEOUT: MAX_PENALTY}


class Bitmap(LoadBalancer):
    name = "bitmap"

    def __init__(self, *args, **kw) -> None:  # noqa: ANN002, ANN003 - LoadBalancer's
        super().__init__(*args, **kw)
        self.penalty: dict[int, int] = {}
        # plane -> (its usable EVs when the sweep was drawn, the sweep, where it is)
        self.sweeps: dict[int, tuple[frozenset[int], list[int], int]] = {}

    def hear(self, e: Ev, what: Feedback, now: float, count: int = 1) -> None:
        if what is Feedback.RESTORED:
            self.penalty.pop(e.ev, None)
        elif what in PENALTY:
            self.penalty[e.ev] = min(MAX_PENALTY,
                                     self.penalty.get(e.ev, 0) + PENALTY[what] * count)

    def choose(self, plane: int, usable: list[Ev], now: float) -> list[int]:
        ids = [e.ev for e in usable]
        key = frozenset(ids)
        held = self.sweeps.get(plane)
        if held is None or held[0] != key:  # a new usable set: a new sweep
            sweep = ids[:]
            self.rng.shuffle(sweep)
            held = (key, sweep, 0)
        _, sweep, pos = held
        out = []
        for _ in ids:
            ev, paid, passed = sweep[pos], False, 0
            while self.penalty.get(ev, 0) > 0 and passed <= len(sweep):
                if not paid:
                    self.penalty[ev] -= 1
                    paid = True
                passed += 1
                sweep, pos = self._advance(sweep, pos)
                ev = sweep[pos]
            out.append(ev)
            sweep, pos = self._advance(sweep, pos)
        self.sweeps[plane] = (key, sweep, pos)
        return out

    def _advance(self, sweep: list[int], pos: int) -> tuple[list[int], int]:
        pos += 1
        if pos == len(sweep):  # a new random order for the next sweep
            sweep = sweep[:]
            self.rng.shuffle(sweep)
            pos = 0
        return sweep, pos
