"""Load-balancing policies, by name: which EV each packet takes (docs/load-balancing.md).

`mrc` is MRC's own EV profile and the default; the others are the baselines a
researcher compares it with. One more is one module in this folder holding a subclass of
LoadBalancer with a `name`: it is found at import, so every part of mrcemu (the NIC
daemons, `mrcemu send --lb`, a scenario's `load_balancing`) knows it by that name.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import random

from mrcemu.errors import MrcemuError
from mrcemu.transport.lb.base import Feedback, LoadBalancer, Settings
from mrcemu.transport.lb.bitmap import Bitmap
from mrcemu.transport.lb.mrc import MrcProfile
from mrcemu.transport.lb.oblivious import Oblivious
from mrcemu.transport.lb.reps import Reps
from mrcemu.transport.lb.reps_ack import RepsPerAck

BUILT_IN: tuple[type[LoadBalancer], ...] = (MrcProfile, Oblivious, Reps, RepsPerAck, Bitmap)
POLICIES: dict[str, type[LoadBalancer]] = {}
DEFAULT = "mrc"


class PolicyModuleError(MrcemuError):
    """A module in this folder that does not make a policy: named, with the fix."""

    exit_code = 2

__all__ = ["DEFAULT", "POLICIES", "Feedback", "LoadBalancer", "discover", "make"]


def discover() -> dict[str, type[LoadBalancer]]:
    """Every policy: the built-in ones, then one from each other module of this folder
    (in name order). Two policies of one name are an error that names both modules."""
    found = {p.name: p for p in BUILT_IN}
    known = {"base", *(p.__module__.rsplit(".", 1)[1] for p in BUILT_IN)}
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if mod in known:
            continue
        try:
            module = importlib.import_module(f"{__name__}.{mod}")
        except Exception as e:  # noqa: BLE001 - a researcher's module: say which, and why
            raise PolicyModuleError(f"{__path__[0]}/{mod}.py does not import "
                                    f"({type(e).__name__}: {e}): fix it, or move it out of "
                                    "the folder") from e
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (issubclass(cls, LoadBalancer) and cls.__module__ == module.__name__
                    and cls.name):
                if cls.name in found:
                    raise PolicyModuleError(
                        f"load-balancing policy {cls.name!r} is defined twice: in "
                        f"{found[cls.name].__module__} and {cls.__module__}; rename one")
                found[cls.name] = cls
    POLICIES.clear()
    POLICIES.update(found)
    return POLICIES


def make(name: str, cfg: Settings, rng: random.Random) -> LoadBalancer:
    """The policy `name`, for one connection's profile; ValueError for an unknown one."""
    cls = POLICIES.get(name)
    if cls is None:
        raise ValueError(f"unknown load-balancing policy {name!r}: use one of "
                         f"{', '.join(POLICIES)}")
    return cls(cfg, rng)  # a KeyError in a policy's own constructor is its own


discover()
