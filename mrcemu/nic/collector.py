"""The interpreter's garbage collector, kept off the NIC's loop.

A daemon holds a large, long-lived heap (its topology, its connections' EV tables and
paths) and makes short-lived objects per event (decoded control packets, events). Left
to itself, CPython's collector walks the whole heap at each full collection, and the
loop, timers and delay line included, stands still meanwhile. `freeze` moves what is
alive now out of the collector's view (gc.freeze): call it once the long-lived part has
been made. `Pauses` measures every collection's pause, so a run can say what it cost.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from mrcemu.nic.meter import Lateness


class Pauses:
    """Every collection's pause, in seconds, as a Lateness histogram, from `install`
    until `close`."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.hist = Lateness()
        self._t: float | None = None

    def __call__(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._t = self.clock()
        elif self._t is not None:
            self.hist.add(self.clock() - self._t)
            self._t = None

    def reset(self) -> None:
        self.hist = Lateness()

    def install(self) -> Pauses:
        gc.callbacks.append(self)
        return self

    def close(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)


def freeze() -> None:
    """What is alive now is long-lived: no collection walks it again (gc.freeze)."""
    gc.freeze()


def thaw() -> None:
    """Something long-lived was let go (a connection made again): collect it, with
    everything else, before the next `freeze` hides it for good."""
    gc.unfreeze()
    gc.collect()
