"""NSCC, UEC's sender congestion control, as its reference simulator has it (docs/transport.md,
NSCC): the readable reference that datapath/nscc.c mirrors step for step.

Each ack brings the bytes it newly acknowledges, whether the packet was ECN-marked, and
(when it carries one) an RTT sample, whose excess over the base RTT is the queueing
delay. The sample's delay and the mark choose a quadrant:

| ECN | delay vs target | reaction                                                  |
|-----|-----------------|-----------------------------------------------------------|
| no  | below           | proportional increase, in proportion to (target - delay)  |
| no  | at or above     | fair increase: the same bytes per acked byte for every flow |
| yes | at or above     | multiplicative decrease on the averaged delay, once a base RTT |
| yes | below           | no change: the mark moves the path, not the window        |

Increases are not applied per ack: they accumulate in `inc_bytes`, and a fulfill
adjustment (every 8 packets acknowledged, or once a network RTT) adds `inc_bytes / cwnd`
to the window. Over a round trip, when about a window is acknowledged, that is a fixed
number of bytes whatever the window: an additive increase, which with a multiplicative
decrease is what brings flows that share a queue to equal windows. Once a network RTT a
small `eta` is added too.

Quick adapt: a trim, a loss or an averaged delay past four targets raises a flag. At the
end of each period (base RTT + target) with the flag up, if what was acknowledged in the
period is under the gate (`qa_gate`: the reference's share of what the period carries at
line rate, which on its fabric is an eighth of its maximum window), the window becomes
just that, and the marks on the bytes then in flight are not acted on (they say what the
old window did). This stops a collapsing flow at once.

A NACK for a trimmed packet takes its bytes off the window (unless quick adapt just set
it) and flags quick adapt. A packet lost untrimmed (a broken path: per-EV order, or sent
again when overdue) takes its bytes off the window and nothing more: on a trimming
fabric congestion shows as trims and marks, not as vanished packets (docs/transport.md, loss
recovery). An RTO flags quick adapt.

The constants scale with the fabric as the reference's do: by the host's BDP over the
reference's (100 Gb/s x 12 us) and by the target over the network RTT (the reference's
own RTT in its units; the scaled fabric has no microseconds of its own).
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field

REFERENCE_BDP = 100e9 / 8 * 12e-6  # bytes: 100 Gb/s over 12 us, the reference's scale
DELAY_WEIGHT = 0.0125  # the averaged delay's EWMA weight
GAMMA = 0.8  # how much of the averaged delay's excess a decrease takes off
# Quick adapt only when a period acknowledged less than this share of what the period
# carries at line rate: the reference's gate, max_cwnd / 8 with its max_cwnd of 1.5 BDPs,
# over its period of base RTT + 0.75 network RTTs (1.75 BDPs at line rate): 3/28.
QA_SHARE = 1.5 / 8 / 1.75
ADJUST_PACKETS = 8  # a fulfill adjustment every this many packets acknowledged


@dataclass
class Nscc:
    cwnd: float
    mss: int
    min_cwnd: float
    max_cwnd: float
    target_delay: float  # the queueing delay aimed at
    network_rtt: float  # the fabric's longest base RTT: the adjustment period
    bdp: float  # bytes the host has in flight over the network RTT at line rate
    nack_delay: float  # the queueing delay a trim stands for (the trim threshold's)
    # The fixed round trip to this peer, where it is what an unloaded sample reads (the
    # scale model's latency dwarfs what the hosts add): the base RTT starts there and only
    # samples below it lower it, as the reference's configured RTT does. 0: unknown (the
    # hosts' processing is most of every round trip), and the first sample sets the base.
    known_rtt: InitVar[float] = 0.0
    # derived in __post_init__
    alpha: float = field(init=False)
    fair: float = field(init=False)
    eta: float = field(init=False)
    fast_scale: float = field(init=False)
    fast_delay: float = field(init=False)
    qa_threshold: float = field(init=False)
    # state
    base_rtt: float = field(init=False)
    # base_rtt is what an unloaded round trip reads (a sample, or the pair's known fixed
    # round trip): from then on only lower samples replace it
    sampled: bool = field(init=False, default=False)
    avg_delay: float = 0.0
    inc_bytes: float = 0.0
    received: float = 0.0
    achieved: float = 0.0
    to_ignore: float = 0.0
    ignored: float = 0.0
    qa_end: float = -1.0  # -1: no period started
    qa_flag: bool = False
    fast_count: float = 0.0
    fast: bool = False
    last_adjust: float = 0.0
    last_decrease: float = -1.0  # -1: never
    decreases: int = 0
    quick_adapts: int = 0

    def __post_init__(self, known_rtt: float) -> None:
        a = self.bdp / REFERENCE_BDP
        b = self.target_delay / self.network_rtt
        self.alpha = 4.0 * self.mss * a * b / self.target_delay  # per byte, per second
        self.fair = 5.0 * self.mss * a
        self.eta = 0.15 * self.mss * a
        self.fast_scale = 0.25 * a
        self.fast_delay = self.network_rtt / 12.0  # the reference's 1 us of its 12
        self.qa_threshold = 4.0 * self.target_delay
        self.base_rtt = known_rtt or self.network_rtt  # the latter until the first sample
        self.sampled = known_rtt > 0

    # ---- feedback ----------------------------------------------------------
    def on_ack(self, acked_bytes: int, rtt: float | None, ecn: bool, now: float,
               inflight: float) -> None:
        self.achieved += acked_bytes
        self.received += acked_bytes
        self.ignored += acked_bytes
        if rtt is not None:
            # The base RTT is the lowest round trip sampled, and the network's own
            # before that. With `known_rtt` (the scale model's latency) that is what an
            # unloaded sample reads, and a first sample above it held a queue:
            # in an incast a flow whose first packets queue behind the others' would
            # read the queue as base for the whole run, its delays low, and fall from
            # fair increase into proportional. Without it every sample also holds what
            # the hosts add (the emulated NICs' own processing), a floor the configured
            # RTT is far under; keeping it would count that processing as queueing, so
            # the first sample replaces it even if higher.
            self.base_rtt = min(self.base_rtt, rtt) if self.sampled else rtt
            self.sampled = True
            delay = rtt - self.base_rtt
            self._average(delay, ecn)
        else:
            delay = self.avg_delay
        if self._quick_adapt(False, ecn, delay, now, inflight):
            self._clamp()
            return
        if not ecn and delay >= self.target_delay:
            self.inc_bytes += self.fair * acked_bytes
        elif not ecn:
            self._proportional(acked_bytes, delay)
        elif delay >= self.target_delay:
            self._decrease(now)
        self._clamp()
        if self.received > ADJUST_PACKETS * self.mss or now - self.last_adjust > self.network_rtt:
            self._fulfill(now)
            self._clamp()

    def on_nack(self, nacked_bytes: int, now: float, inflight: float) -> None:
        """A switch trimmed one of our packets: its queue was full."""
        self.ignored += nacked_bytes
        self._average(self.nack_delay, True)
        self.qa_flag = True
        if not self._quick_adapt(True, True, 0.0, now, inflight):
            self.cwnd = max(self.cwnd - nacked_bytes, self.min_cwnd)

    def on_lost(self, lost_bytes: int) -> None:
        """A packet lost untrimmed, on a broken path: its bytes leave the window."""
        self.cwnd = max(self.cwnd - lost_bytes, self.min_cwnd)

    def on_rto(self) -> None:
        """Nothing heard for a timeout: what the next period delivers sets the window."""
        self.qa_flag = True

    # ---- the rules -----------------------------------------------------------
    def _average(self, delay: float, ecn: bool) -> None:
        # An unmarked sample over the target is a queue that marks nobody: counted as a
        # quarter of the base RTT, so it alone never drives the average over the target.
        sample = self.base_rtt * 0.25 if not ecn and delay > self.target_delay else delay
        self.avg_delay = DELAY_WEIGHT * sample + (1.0 - DELAY_WEIGHT) * self.avg_delay

    def _quick_adapt(self, loss: bool, ecn: bool, delay: float, now: float,
                     inflight: float) -> bool:
        done = False
        if self.ignored < self.to_ignore and ecn:
            done = True  # a mark on what the window before quick adapt sent
        elif now > self.qa_end:
            if (self.qa_end >= 0 and (self.qa_flag or loss or delay > self.qa_threshold)
                    and self.achieved < self.qa_gate()):
                self.cwnd = max(self.achieved, self.min_cwnd)
                self.to_ignore = inflight
                self.ignored = 0.0
                self.qa_flag = False
                self.quick_adapts += 1
                done = True
            self.achieved = 0.0
            self.qa_end = now + self.base_rtt + self.target_delay
        if done:
            self.inc_bytes = 0.0
            self.received = 0.0
        return done

    def qa_gate(self) -> float:
        """The bytes under which a period's acknowledgements call for quick adapt: the
        reference's share of what the period (base RTT + target) carries at line rate.
        On the reference's fabric (target 0.75 network RTTs) that is its max_cwnd / 8;
        where a trim-bounded queue holds less than a round trip (the target a share of
        it), the period is shorter, and max_cwnd / 8 would call a 7:1 incast's fair
        share a collapse: every period with a trim would reset the flows under it to
        what they delivered, and leave a flow that got above it alone to keep its
        lead. Only the network's part of the base RTT counts: without the scale model's
        latency a sampled base is mostly the hosts' own processing (several network
        RTTs at 10 Gb/s), time in which the line carries nothing of this flow's, and
        counting it would raise the gate over what a host that slow delivers in a
        period, so that every period with a loss would reset the window."""
        period = min(self.base_rtt, self.network_rtt) + self.target_delay
        return QA_SHARE * self.bdp * period / self.network_rtt

    def _proportional(self, acked_bytes: int, delay: float) -> None:
        # Fast increase: a whole window acknowledged with no queue at all grows the
        # window by a share of every ack at once, instead of through the adjustment.
        if delay < self.fast_delay:
            self.fast_count += acked_bytes
            if self.fast_count > self.cwnd or self.fast:
                self.cwnd += acked_bytes * self.fast_scale
                self.fast = True
                return
        else:
            self.fast_count = 0.0
        self.fast = False
        self.inc_bytes += self.alpha * acked_bytes * (self.target_delay - delay)

    def _decrease(self, now: float) -> None:
        self.fast = False
        self.fast_count = 0.0
        avg = self.avg_delay
        if avg > self.target_delay and now - self.last_decrease > self.base_rtt:
            self.cwnd *= max(1.0 - GAMMA * (avg - self.target_delay) / avg, 0.5)
            self.last_decrease = now
            self.decreases += 1

    def _fulfill(self, now: float) -> None:
        self.cwnd += self.inc_bytes / self.cwnd
        if now - self.last_adjust >= self.network_rtt:
            self.cwnd += self.eta
            self.last_adjust = now
        self.inc_bytes = 0.0
        self.received = 0.0

    def _clamp(self) -> None:
        self.cwnd = min(max(self.cwnd, self.min_cwnd), self.max_cwnd)
