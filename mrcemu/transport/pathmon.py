"""Path health: the one place where facts about packets become EV states.

The white paper's rules (PAPER.md B1-B4, DESIGN.md section 12), one small method each,
every one driven with an explicit `now`:

| fact (from the data path)              | verdict                                       |
| CE echoed (SACK m = SKIP_ONCE)         | SKIP for `ce_skip_rotations`                  |
| trimmed mid-path (NACK TRIMMED)        | SKIP for `trim_skip_rotations`                |
| trimmed at the last hop                | none: incast at the receiver is no path's     |
| lost, not trimmed: a SACK hole past the | ASSUMED_BAD at once, replaced from the same   |
| reorder window                          | plane's backups, probed in the background     |
| lost at the RTO, nothing sent on its EV | the same                                      |
| as late or later known to have arrived  |                                               |
| the peer's SACK m = ALWAYS_SKIP         | the same                                      |
| `probes_to_restore` probes answered     | GOOD again (SKIP if the last one was marked)  |

A SKIP that comes again soon after one ends lasts longer (EvProfile.skip doubles the
EV's `skip_len`, which unmarked SACKs halve), so a path that stays hot sheds most of its
share. Nothing here excuses a loss: a host that loses or delays packets itself is
what the fidelity monitor reports (mrcemu/fidelity.py), not what a rule hides.

The monitor holds no clock and no I/O: the connection feeds it what its data path
found, and asks it which EVs to probe.
"""

from __future__ import annotations

from mrcemu.transport.config import TransportConfig
from mrcemu.transport.evs import Ev, EvProfile, EvState

LOSS_HOLE = 0  # datapath: MRC_LOSS_HOLE
LOSS_RTO = 1  # datapath: MRC_LOSS_RTO


class PathMonitor:
    def __init__(self, profile: EvProfile, cfg: TransportConfig) -> None:
        self.profile = profile
        self.ce_skip = cfg.ce_skip_rotations
        self.trim_skip = cfg.trim_skip_rotations
        self.probes_to_restore = cfg.probes_to_restore
        self.probe_interval = cfg.probe_interval
        self._answered: dict[int, int] = {}  # EV in ASSUMED_BAD -> probes answered since
        self.losses = 0  # losses reported
        self.losses_ignored = 0  # RTO losses on an EV a later packet crossed

    def ce_echoed(self, ev: int, now: float) -> None:
        """The receiver echoed a CE mark: a switch on the path is queueing."""
        self.profile.skip(ev, now, "ECN echoed", self.ce_skip)

    def trimmed(self, ev: int, now: float, last_hop: bool) -> None:
        """A switch trimmed the packet to its header. Mid-path, the path is congested;
        at the receiver's own leaf it is the receiver's incast, which no other path
        avoids (B4)."""
        if not last_hop:
            self.profile.skip(ev, now, "NACK trimmed", self.trim_skip)

    def lost(self, ev: int, sent: float, now: float, how: int) -> None:
        """A packet sent on `ev` at `sent` was lost and not trimmed: the path failed
        (B1). A SACK hole condemns it at once. The RTO condemns it only if the EV was
        not otherwise heard from: a packet sent on it as late or later that arrived
        proves the path carries packets, and the timeout is then the window's (a tail
        with nothing after it to open a hole), not the path's."""
        self.losses += 1
        e = self.profile.evs.get(ev)
        if e is None:
            return
        if how == LOSS_RTO and e.heard_sent >= sent:
            self.losses_ignored += 1
            return
        why = "lost: SACK hole" if how == LOSS_HOLE else "lost: RTO"
        self._retire(e, now, why, sent)

    def remote_bad(self, ev: int, now: float) -> None:
        """The peer's SACK said never to use this EV again (m = ALWAYS_SKIP)."""
        e = self.profile.evs.get(ev)
        if e is not None:
            self._retire(e, now, "SACK ALWAYS_SKIP", None)

    def _retire(self, e: Ev, now: float, why: str, lost_sent: float | None) -> None:
        if e.state is EvState.ASSUMED_BAD:
            return
        self.profile.assume_bad(e.ev, now, why, lost_sent)
        if e.state is EvState.ASSUMED_BAD:
            self._answered[e.ev] = 0

    def probe_answered(self, ev: int, now: float, marked: bool) -> None:
        """A probe on an ASSUMED_BAD EV came back: after enough of them, the path is
        trusted again (B1: "restored when enough probes succeed")."""
        e = self.profile.evs.get(ev)
        if e is None or e.state is not EvState.ASSUMED_BAD:
            return
        n = self._answered.get(ev, 0) + 1
        if n < self.probes_to_restore:
            self._answered[ev] = n
            return
        self._answered.pop(ev, None)
        self.profile.restore(ev, now, marked)

    def probes_due(self, now: float) -> list[Ev]:
        """The ASSUMED_BAD EVs whose next probe is due."""
        return self.profile.needs_probe(now, self.probe_interval)

    def next_probe_at(self) -> float | None:
        due = [e.last_probe + self.probe_interval for e in
               self.profile.needs_probe(float("inf"), 0.0)]
        return min(due) if due else None
