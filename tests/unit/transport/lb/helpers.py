from __future__ import annotations

from mrcemu.topology import load
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.evs import EvProfile
from mrcemu.transport.profiles import profile


def profile_with(policy: str, seed: int = 1, **cfg_kw) -> EvProfile:
    """h0's profile toward h7 on `default` (8 planes, 4 spines, one active EV a spine)."""
    cfg = TransportConfig(seed=seed, load_balancing=policy, **cfg_kw)
    return profile(load("default"), 0, 7, cfg)


def plane_evs(prof: EvProfile, plane: int) -> list:
    """The plane's usable EVs, in profile order (what `choose` is given)."""
    return [e for e in prof.evs.values() if e.path.plane == plane and prof.usable(e)]
