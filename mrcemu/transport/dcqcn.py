"""DCQCN for the RoCE baseline, sans-IO: the rate a QP may send at, from CNPs.

DCQCN (Zhu et al., SIGCOMM 2015) is how the white paper's RoCE fabric controls
congestion: switches mark ECN, the responder (the notification point, NP) answers
CE-marked data with at most one CNP a QP per `cnp_interval`, and the requester (the
reaction point, RP) cuts its rate on each CNP and climbs back on timers and bytes sent:
fast recovery towards the rate it had, then additive, then hyper increase.

Its parameters are DCQCN's reference ones, as uet-htsim runs them (the simulator this
project cross-checks against): a CNP at most every 50 us a QP, alpha's decay and the
rate-increase timer every 55 us, the byte counter every 10 MB, g = 1/256, additive and
hyper increase a twentieth and a tenth of line rate. Its times are the paper fabric's,
so the scale model stretches them as it does every fixed latency (TransportConfig, from
the topology's time scale): each stays the same number of round trips as on the fabric
it stands for, a few, where the NP's 50 us at 1:5000 is 250 ms against a 65 ms round
trip. Bytes need no stretching: a scale model slows rates as much as it stretches times.

Only the policy is here: the NP's CE count is the compiled responder's (`rx_ce`), the
CNP's framing is RoceConnection's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Increase stages before additive (then hyper) increase: DCQCN's F.
FAST_RECOVERY_STEPS = 5
# The reference's clocks, in the paper fabric's microseconds, and its byte counter.
CNP_INTERVAL_US = 50.0  # the NP: at most one CNP a QP this often
ALPHA_INTERVAL_US = 55.0  # K
INCREASE_INTERVAL_US = 55.0  # T
INCREASE_BYTES = 10_000_000  # B


@dataclass
class DcqcnParams:
    line_rate: float  # bytes per second: the port's
    alpha_interval: float  # K: alpha decays once per interval without a CNP
    increase_interval: float  # T: the rate increase timer
    increase_bytes: int  # B: the byte counter's increase step
    g: float = 1 / 256
    ai_share: float = 1 / 20  # additive increase, a share of line rate
    hai_share: float = 1 / 10  # hyper increase, a share of line rate
    min_share: float = 1 / 100  # the rate never falls below this share of line rate


@dataclass
class Dcqcn:
    """One QP's reaction point. `allowed(now, cost)` says how many packets of `cost`
    bytes the rate lets go now; `sent(n, cost)` takes them off; `next_time()` is when
    it next needs a call to `on_time`: a timer or the next packet's tokens."""

    p: DcqcnParams
    rc: float = 0.0  # current rate, bytes/s
    rt: float = 0.0  # target rate
    alpha: float = 1.0
    cnps: int = 0
    cuts: int = 0  # rate cuts (at most one per CNP)
    _tokens: float = 0.0
    _token_t: float | None = None
    _alpha_at: float | None = None  # when alpha next decays (None: at line rate, idle)
    _increase_at: float | None = None
    _timer_stage: int = 0
    _byte_stage: int = 0
    _bytes: int = 0
    _burst: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.rc = self.rt = self.p.line_rate

    @property
    def limited(self) -> bool:
        """Below line rate: a CNP cut the rate and it has not climbed all the way back."""
        return self.rc < self.p.line_rate

    def _refill(self, now: float, cost: int) -> None:
        # A burst of 4 packets: enough that the NIC's pacer, not this bucket, spaces the
        # packets at line rate; no more, so a cut rate is not dodged by a saved-up burst.
        cap = 4 * cost
        if self._token_t is None:
            self._tokens = cap
        else:
            self._tokens = min(cap, self._tokens + (now - self._token_t) * self.rc)
        self._token_t = now

    def allowed(self, now: float, cost: int) -> int:
        if not self.limited:
            return 1 << 30  # at line rate the NIC's own pacing is the limit
        self._refill(now, cost)
        # A hair of slack: at the time next_time() named, float rounding may leave the
        # bucket a nanobyte short of a packet, and nothing would ever go.
        return int(self._tokens / cost + 1e-9)

    def sent(self, n: int, cost: int, now: float) -> None:
        if not n:
            return
        if self.limited:
            self._refill(now, cost)
            self._tokens -= n * cost
        self._bytes += n * cost
        while self._bytes >= self.p.increase_bytes and self.limited:
            self._bytes -= self.p.increase_bytes
            self._byte_stage += 1
            self._increase(now)

    def on_cnp(self, now: float) -> None:
        """A CNP: cut the rate and raise alpha (DCQCN's RP, on a congestion notification)."""
        self.cnps += 1
        self.cuts += 1
        self.rt = self.rc
        self.rc = max(self.p.line_rate * self.p.min_share, self.rc * (1 - self.alpha / 2))
        self.alpha = (1 - self.p.g) * self.alpha + self.p.g
        self._alpha_at = now + self.p.alpha_interval
        self._increase_at = now + self.p.increase_interval
        self._timer_stage = self._byte_stage = self._bytes = 0
        if self._token_t is None:
            self._token_t, self._tokens = now, 0.0

    def _increase(self, now: float) -> None:
        stage = min(self._timer_stage, self._byte_stage)
        if max(self._timer_stage, self._byte_stage) >= FAST_RECOVERY_STEPS:
            if stage >= FAST_RECOVERY_STEPS:  # hyper increase
                k = stage - FAST_RECOVERY_STEPS + 1
                self.rt += k * self.p.hai_share * self.p.line_rate
            else:  # additive increase
                self.rt += self.p.ai_share * self.p.line_rate
        self.rt = min(self.rt, self.p.line_rate)
        self.rc = min(self.p.line_rate, (self.rt + self.rc) / 2)  # fast recovery's step
        if self.rc >= self.p.line_rate * 0.999:
            self.rc = self.rt = self.p.line_rate
            self._increase_at = None
            self._token_t = None

    def on_time(self, now: float) -> None:
        """Run the alpha and rate-increase timers that are due."""
        while self._alpha_at is not None and now >= self._alpha_at:
            self.alpha *= 1 - self.p.g
            self._alpha_at += self.p.alpha_interval
            if self.alpha < 1e-3 and not self.limited:
                self._alpha_at = None
        while self._increase_at is not None and now >= self._increase_at:
            self._increase_at += self.p.increase_interval
            self._timer_stage += 1
            self._increase(now)

    def next_time(self, cost: int, want_to_send: bool) -> float | None:
        """When `on_time` (or another try to send) is next due."""
        due = [t for t in (self._alpha_at, self._increase_at) if t is not None]
        if want_to_send and self.limited and self._token_t is not None and self._tokens < cost:
            due.append(self._token_t + (cost - self._tokens) / self.rc)
        return min(due, default=None)
