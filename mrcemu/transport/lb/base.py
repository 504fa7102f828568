"""The load-balancing policy: which EV each packet takes, from what feedback said.

A policy is sans-IO and holds no clock: it is told the time with every call. It never
judges a path's health. The path monitor (transport/pathmon.py) alone stops, retires and
restores EVs, and a policy only ever chooses among the EVs the monitor leaves usable;
it hears of a retirement or a restoration as feedback, like any other.

It chooses a rotation at a time, not a packet at a time: the compiled sender (sender.c)
sprays each rotation's order and asks for the next at its end, so no Python runs per
data packet. For each plane the policy returns the EVs of that plane's next rotation
in sending order (an EV may repeat); the profile interleaves the planes, because a
host's ports are striped by the NIC, not by the policy (each plane's port has its own
line rate). Feedback that came during a rotation is heard before the next one is
chosen, so a policy acts on it within one rotation (a fraction of a round trip).

Feedback, as uet-htsim's `UecMultipath::processEv` hears it:
- ACK: packets on the EV that an unmarked SACK newly acknowledged, heard in bulk
  before each rotation, only by a policy with `wants_acks`;
- ECN: a SACK echoed a CE mark on the EV;
- TRIM: a switch mid-path trimmed a packet on it (a last-hop trim says nothing about
  the path, the white paper, 2.1, and is heard by no policy);
- TIMEOUT: the RTO fired for a packet sent on it;
- RETIRED, RESTORED: the path monitor took it out of use for a loss, or brought it back.
"""

from __future__ import annotations

import enum
import random
from typing import Any, ClassVar, Protocol

# What a policy sees of the transport, as protocols: the policies sit below the EV
# profile and the config (both import this package), so they name neither.


class Settings(Protocol):
    """The transport config's fields the policies read (TransportConfig has them)."""

    ce_skip_rotations: int
    trim_skip_rotations: int
    sack_every: int


class Ev(Protocol):
    """One EV as the profile holds it (evs.Ev): its number, its path (`.plane`,
    `.spine`), its state and the data path's facts (`fb`: `.acks`, `.rtt_raw`, ...)."""

    @property
    def ev(self) -> int: ...

    path: Any
    fb: Any


class Profile(Protocol):
    """The EV profile (evs.EvProfile), for a policy that uses its mechanisms."""

    def skip(self, ev: int, now: float, why: str, rotations: int = 1) -> None: ...


class Feedback(enum.Enum):
    ACK = "ack"
    ECN = "ecn"
    TRIM = "trim"
    TIMEOUT = "timeout"
    RETIRED = "retired"
    RESTORED = "restored"


class LoadBalancer:
    """Subclass, name it, and implement `choose`; override `hear` for feedback."""

    name: ClassVar[str] = ""
    # Whether `hear` wants ACK feedback: counting it costs a scan of the EVs a rotation.
    wants_acks: ClassVar[bool] = False
    # Whether congestion on a path moves load for this policy at all: False (oblivious),
    # and the profile does not act on it either (a backup beside a path's own EV stays).
    steers: ClassVar[bool] = True

    def __init__(self, cfg: Settings, rng: random.Random) -> None:
        self.cfg = cfg
        self.rng = rng
        self.profile: Profile | None = None

    def bind(self, profile: Profile) -> None:
        """The profile whose EVs this policy chooses among (set once, by the profile)."""
        self.profile = profile

    def choose(self, plane: int, usable: list[Ev], now: float) -> list[int]:
        """The EVs (by number) of `plane`'s next rotation, in sending order, from
        `usable` (never empty; in profile order). Return only EVs from `usable`."""
        raise NotImplementedError

    def hear(self, e: Ev, what: Feedback, now: float, count: int = 1) -> None:
        """Feedback on EV `e`; `count` of them (ACKs are heard in bulk)."""

    def counters(self) -> dict[str, int]:
        """What the policy counts of its own choices, for the connection's stats (and a
        run's report, summed as `lb_<name>`); none by default."""
        return {}

    def repeats(self, usable: dict[int, list[Ev]]) -> bool:
        """Whether every rotation from this usable set is the same order, so that the
        compiled sender may spray it again without asking: true when no plane has a
        choice to make. A policy whose order from one EV a plane can differ (none here)
        says False."""
        return all(len(v) <= 1 for v in usable.values())
