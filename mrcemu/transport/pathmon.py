"""Path health: the one place where facts about packets become EV states.

The white paper's rules (the white paper, 2.1; docs/transport.md, path health), one small method
each, every one driven with an explicit `now`:

| fact (from the data path)               | verdict                                       |
| CE echoed (SACK m = SKIP_ONCE)          | the load balancer's (MRC's: SKIP for          |
|                                         | `ce_skip_rotations`; transport/lb)            |
| trimmed mid-path (NACK TRIMMED)         | the same (MRC's: `trim_skip_rotations`)       |
| trimmed at the last hop                 | none: incast at the receiver is no path's     |
| the EV's oldest packet late against the | STOPPED: no new data on it, a probe sent on   |
| EV's own round trips (its stop age: RTT | it in the control class and one in the data   |
| plus one deviation plus the slack)      | class; past the overdue age (six deviations)  |
|                                         | the sender sends the packet again elsewhere   |
| feedback from a STOPPED EV about a      | GOOD again: the path is slow, not broken      |
| packet sent as late as the overdue one  |                                               |
| (no hole pending on it), or its probe   |                                               |
| answered                                |                                               |
| a STOPPED EV's probe unanswered for the | ASSUMED_BAD at once, replaced from the same   |
| connection's RTT plus four deviations   | plane's backups, probed in the background;    |
| plus the hosts' slack                   | its packets in flight go again (UNANSWERED)   |
| the answer to the data-class probe sent | the same (but only that packet goes again):   |
|                                         | the probe went behind every packet            |
| on it when stopped reports the overdue  | on the EV (one path is FIFO), so that packet  |
| packet missing (and no NACK said it was | was lost (SLEEK's proof, per EV: a tail too)  |
| trimmed on that EV)                     |                                               |
| lost by per-EV order: a later packet on | the same, once `ack_slack` has passed with no |
| its EV arrived, it did not              | NACK saying it was trimmed (a trimmed header  |
|                                         | overtakes, and its NACK may trail the SACK)   |
| the RTO fired, nothing sent on its EV   | STOPPED, as an overdue EV: a timeout proves   |
| as late or later known to have arrived  | nothing, the probes decide                    |
| the peer's SACK m = ALWAYS_SKIP         | the same                                      |
| `probes_to_restore` probes answered     | GOOD again (SKIP if the last one was marked)  |

Stopping is cheap (a duplicate costs a packet) and needs no proof; retiring does. A
stopped EV gets two probes: one in the control class, which crosses its queues'
priority lane and so tells a broken path from a slow one within a round trip, and one
in the data class, behind the EV's packets, whose answer proves whether the overdue one
arrived. A slow path is overdue later than a fast one (its own round trips are long),
and when it is stopped anyway its control probe is answered and its data probe finds
the packet arrived: it is never retired for being slow. (The data probe's answer can
only prove a loss while the packet's copy sent elsewhere has not arrived yet; when that
copy wins the race the answer proves nothing, and nothing is retired.)

A SKIP that comes again soon after one ends lasts longer (EvProfile.skip doubles the
EV's `skip_len`, and halves it for each round trip the path stays unmarked), so a path
that stays hot sheds most of its share. Nothing here excuses a loss: a host that loses
or delays packets itself is what the fidelity monitor reports (mrcemu/fidelity.py), not
what a rule hides.

The monitor holds no clock and no I/O: the connection feeds it what its data path
found, and asks it which EVs to probe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mrcemu.transport.config import TransportConfig
from mrcemu.transport.evs import Ev, EvProfile, EvState
from mrcemu.transport.lb import Feedback
from mrcemu.wire.constants import LossKind

LOSS_HOLE = LossKind.HOLE
LOSS_RTO = LossKind.RTO
LOSS_OVERDUE = LossKind.OVERDUE
# The verdict that says a path forwards nothing at all (its control-class probe, which
# crosses every queue in the priority lane, went unanswered): its other packets are lost
# too. A proven loss (per-EV order, the data probe) says only that one packet was.
UNANSWERED = "lost: probe unanswered"


@dataclass
class _Stop:
    at: float  # when the EV was stopped
    sent: float  # the overdue packet's send time
    probe_at: float | None = None  # its control-class probe, once sent


@dataclass
class _Proof:
    probe_id: int  # the data-class probe sent behind the EV's packets when it stopped
    psn: int  # the overdue packet
    sent: float


class PathMonitor:
    def __init__(self, profile: EvProfile, cfg: TransportConfig) -> None:
        self.profile = profile
        self.probes_to_restore = cfg.probes_to_restore
        self.probe_interval = cfg.probe_interval
        self.slack = cfg.ack_slack
        self._answered: dict[int, int] = {}  # EV in ASSUMED_BAD -> probes answered since
        self._holes: dict[int, tuple[int, float, float]] = {}  # PSN -> EV, sent, verdict due
        self._stops: dict[int, _Stop] = {}  # EV in STOPPED -> the stop
        self._proofs: dict[int, _Proof] = {}  # EV -> its data probe's answer awaited
        self.losses = 0  # losses reported (per-EV order confirmed, and the RTO)
        self.losses_ignored = 0  # RTO losses on an EV a later packet crossed
        self.holes_trimmed = 0  # per-EV order losses a trailing NACK said were trims
        self.stops = 0  # EVs stopped as overdue
        self.stops_cleared = 0  # of those, back in use (heard from, or probe answered)
        self.probe_timeouts = 0  # of those, retired: the probe went unanswered
        self.probe_proofs = 0  # of those, retired: the data probe's answer proved a loss

    def ce_echoed(self, ev: int, now: float) -> None:
        """The receiver echoed a CE mark: a switch on the path is queueing."""
        self._hear(ev, Feedback.ECN, now)

    def trimmed(self, ev: int, now: float, last_hop: bool) -> None:
        """A switch trimmed the packet to its header. Mid-path, the path is congested;
        at the receiver's own leaf it is the receiver's incast, which no other path
        avoids (B4)."""
        if not last_hop:
            self._hear(ev, Feedback.TRIM, now)

    def _hear(self, ev: int, what: Feedback, now: float) -> None:
        """Congestion feedback is the load balancer's to act on (MRC's: a SKIP)."""
        e = self.profile.evs.get(ev)
        if e is not None:
            policy = self.profile.policy
            if policy.steers:  # which EVs are active is the profile's, not the policy's
                self.profile.congested(e, now)
            policy.hear(e, what, now)

    def lost(self, ev: int, sent: float, now: float) -> None:
        """A packet sent on `ev` at `sent` was proven lost, not trimmed: the path failed
        (B1)."""
        self.losses += 1
        e = self.profile.evs.get(ev)
        if e is not None:
            self._retire(e, now, "lost: SACK hole", sent)

    def timed_out(self, ev: int, sent: float, now: float) -> bool:
        """The RTO fired for a packet sent on `ev` at `sent`: no proof of a loss (a path
        slowed to a quarter queues longer than the RTO's floor), so its EV is stopped as
        an overdue one is and its probes decide, unless a packet sent on it as late or
        later arrived: the path carries packets, and the timeout is the window's (a tail
        with nothing after it). True if it was stopped and wants its probes."""
        self.losses += 1
        e = self.profile.evs.get(ev)
        if e is None:
            return False
        if e.heard_sent >= sent:
            self.losses_ignored += 1
            return False
        self.profile.policy.hear(e, Feedback.TIMEOUT, now)
        return self.overdue(ev, sent, now, "RTO")

    def hole(self, ev: int, psn: int, sent: float, now: float) -> None:
        """Per-EV order found the packet `psn` lost: its verdict waits `ack_slack` for a
        NACK (a trimmed header overtakes the data behind it, but its NACK and the SACK
        that reported the later packet cross the reverse path on different EVs)."""
        self._holes[psn] = (ev, sent, now + self.slack)

    def nacked(self, psn: int, ev: int | None = None) -> None:
        """A NACK named `psn` (trimmed on `ev`, when the NACK says): if per-EV order had
        called it lost, it was trimmed. Nor is it a stop's proof any more: a trimmed
        packet is missing at the receiver until its copy arrives, so the data probe's
        answer would report it missing, and a path that queues deep enough to trim
        was retired for it (paper experiment E8: the pinned flow's EV, at its first trim)."""
        if self._holes.pop(psn, None) is not None:
            self.holes_trimmed += 1
        proof = self._proofs.get(ev) if ev is not None else None
        if proof is not None and proof.psn == psn:
            del self._proofs[ev]

    def overdue(self, ev: int, sent: float, now: float, why: str = "overdue") -> bool:
        """The EV's oldest packet, sent at `sent`, is overdue against the EV's own round
        trips: stop using it (its outstanding packets already go again elsewhere). True
        if it was stopped and wants its probes."""
        if not self.profile.stop(ev, now, why, sent):
            return False
        self.stops += 1
        self._stops[ev] = _Stop(now, sent)
        return True

    def probes_sent(self, ev: int, now: float, data_probe_id: int, psn: int) -> None:
        """The stopped EV's two probes went: the control one now, the data one (its
        answer awaited for `psn`, the overdue packet) behind the EV's packets."""
        if (s := self._stops.get(ev)) is not None:
            s.probe_at = now
            self._proofs[ev] = _Proof(data_probe_id, psn, s.sent)

    @property
    def quiet(self) -> bool:
        """No EV stopped and no hole awaiting its verdict: no acknowledgement can change
        anything here (heard() has nothing to do)."""
        return not self._stops and not self._holes

    def heard(self, now: float) -> None:
        """Feedback came from a STOPPED EV (an ack of data sent on it, a SACK or NACK it
        carried) about a packet sent on it as late as the overdue one or later: the path
        delivers, late. Called after each batch of acks.

        Feedback about an earlier packet proves nothing: it was queued ahead of the
        overdue one, and a path that failed after it left the queue delivers it all the
        same (a late ack of it put a dead path back in use, and data onto it, until its
        probes retired it). Nor does a later packet's while per-EV order has the
        overdue one as a hole awaiting its verdict: that is the proof of a loss.

        (The late packets' round trips reach the EV's own estimate in the data path,
        which knows from a SACK's reflected EV which copy of a packet sent twice
        arrived. Not the overdue packet's age: it may have been lost, and as a sample
        its age, never less than the patience it exceeded, ran a path's estimate up to
        tens of seconds and, the RTO waiting on it, stalled a connection for as long.)"""
        holes = {ev for ev, _, _ in self._holes.values()}
        for ev in [ev for ev, s in self._stops.items()
                   if (e := self.profile.evs[ev]).last_feedback > s.at
                   and e.heard_sent >= s.sent and ev not in holes]:
            self._resume(ev, now, "heard from")

    def _resume(self, ev: int, now: float, why: str) -> None:
        del self._stops[ev]
        self.stops_cleared += 1
        self.profile.resume(ev, now, why)

    def check(self, now: float, rtt: float) -> None:
        """Confirm the per-EV order losses whose slack has passed with no NACK, and
        retire the STOPPED EVs whose probe went unanswered for `rtt` (the connection's
        smoothed RTT plus four deviations) plus the slack."""
        for psn in [p for p, (_, _, due) in self._holes.items() if due <= now]:
            ev, sent, _ = self._holes.pop(psn)
            # An ack meanwhile excuses nothing: the hole sent the packet again at once,
            # and an ack cannot say which copy arrived. One path is FIFO, so the one on
            # this EV, behind which a later packet arrived, was lost unless trimmed, and
            # a trim's NACK has had the slack to say so.
            self.lost(ev, sent, now)
        limit = rtt + self.slack
        for ev in [ev for ev, s in self._stops.items()
                   if s.probe_at is not None and s.probe_at + limit <= now]:
            s = self._stops[ev]
            self.probe_timeouts += 1
            self._retire(self.profile.evs[ev], now, UNANSWERED, s.sent)

    def next_deadline(self, rtt: float) -> float | None:
        """When `check` next has something to decide (`rtt` as `check` has it)."""
        due = [d for _, _, d in self._holes.values()]
        # as `check` sums it: (probe_at + rtt) + slack may round above probe_at + limit,
        # a deadline `check` then never reaches, and a timer due for ever
        limit = rtt + self.slack
        due += [s.probe_at + limit for s in self._stops.values() if s.probe_at is not None]
        return min(due) if due else None

    @property
    def pending(self) -> bool:
        """A verdict waits on time: the connection needs its timer."""
        return bool(self._holes or self._stops)

    def remote_bad(self, ev: int, now: float) -> None:
        """The peer's SACK said never to use this EV again (m = ALWAYS_SKIP)."""
        e = self.profile.evs.get(ev)
        if e is not None:
            self._retire(e, now, "SACK ALWAYS_SKIP", None)

    def _retire(self, e: Ev, now: float, why: str, lost_sent: float | None) -> None:
        # Whatever else retired it (its plane went down), its stop is over: a stop left
        # behind would keep its probe deadline, in the past, for ever.
        self._stops.pop(e.ev, None)
        self._proofs.pop(e.ev, None)
        if e.state is EvState.ASSUMED_BAD:
            return
        self.profile.assume_bad(e.ev, now, why, lost_sent)
        if e.state is EvState.ASSUMED_BAD:
            self._answered[e.ev] = 0

    def probe_answered(self, ev: int, now: float, marked: bool, probe_id: int = -1,
                       missing: Callable[[int], bool] = lambda _psn: False) -> None:
        """A probe came back; `missing(psn)`: its answer reports `psn` not received. The
        data probe of a stop proves its overdue packet lost if the answer reports it
        missing: ASSUMED_BAD. Otherwise, on a STOPPED EV the path forwards: back in use.
        On an ASSUMED_BAD one, after enough of them, the path is trusted again (B1:
        "restored when enough probes succeed")."""
        proof = self._proofs.get(ev)
        if proof is not None and proof.probe_id == probe_id:
            del self._proofs[ev]
            if missing(proof.psn):
                self.probe_proofs += 1
                self._retire(self.profile.evs[ev], now, "lost: probe proved", proof.sent)
                return
        if ev in self._stops:
            self._resume(ev, now, "probe answered")
            return
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
        due = [max(e.last_probe + self.probe_interval, e.probe_from) for e in
               self.profile.needs_probe(float("inf"), 0.0)]
        return min(due) if due else None
