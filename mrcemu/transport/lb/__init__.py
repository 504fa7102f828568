"""Load-balancing policies, by name: which EV each packet takes (docs/load-balancing.md).

`mrc` is MRC's own EV profile and the default; the others are the baselines a
researcher compares it with. A fifth is one module with a subclass of LoadBalancer,
and one line below."""

from __future__ import annotations

import random

from mrcemu.transport.lb.base import Feedback, LoadBalancer, Settings
from mrcemu.transport.lb.bitmap import Bitmap
from mrcemu.transport.lb.mrc import MrcProfile
from mrcemu.transport.lb.oblivious import Oblivious
from mrcemu.transport.lb.reps import Reps

POLICIES: dict[str, type[LoadBalancer]] = {
    p.name: p for p in (MrcProfile, Oblivious, Reps, Bitmap)}
DEFAULT = "mrc"

__all__ = ["DEFAULT", "POLICIES", "Feedback", "LoadBalancer", "make"]


def make(name: str, cfg: Settings, rng: random.Random) -> LoadBalancer:
    """The policy `name`, for one connection's profile; ValueError for an unknown one."""
    try:
        return POLICIES[name](cfg, rng)
    except KeyError:
        raise ValueError(f"unknown load-balancing policy {name!r}: use one of "
                         f"{', '.join(POLICIES)}") from None
