"""Oblivious spraying: every packet on an EV drawn uniformly at random from the plane's
usable ones, whatever feedback says (uet-htsim's `UecMpOblivious` draws from a shuffled
sweep instead; the issue asks for the plain uniform draw, the textbook baseline)."""

from __future__ import annotations

from mrcemu.transport.lb.base import Ev, LoadBalancer


class Oblivious(LoadBalancer):
    name = "oblivious"
    steers = False  # deaf to congestion, by definition

    def choose(self, plane: int, usable: list[Ev], now: float) -> list[int]:
        return [self.rng.choice(usable).ev for _ in usable]
