"""NSCC-style window congestion control: ECN and delay quadrants.

| ECN echoed | delay vs target | reaction                         |
| no         | below           | proportional increase            |
| no         | above           | fair (additive) increase         |
| yes        | above           | multiplicative decrease, once per RTT |
| yes        | below           | hold                             |
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Nscc:
    cwnd: float
    mss: int
    min_cwnd: int
    max_cwnd: int
    target_delay: float
    base_rtt: float = float("inf")
    last_decrease: float = -1.0
    decreases: int = 0

    def on_ack(self, acked_bytes: int, rtt: float | None, ecn: bool, now: float,
               srtt: float) -> None:
        if rtt is not None:
            self.base_rtt = min(self.base_rtt, rtt)
        delay = 0.0 if rtt is None or self.base_rtt == float("inf") else rtt - self.base_rtt
        high = delay > self.target_delay
        if not ecn and not high:
            self.cwnd += acked_bytes * (self.target_delay - delay) / self.target_delay
        elif not ecn:
            self.cwnd += self.mss * acked_bytes / max(self.cwnd, 1.0)
        elif high:
            if now - self.last_decrease >= srtt:
                factor = max(0.5, 1.0 - 0.5 * (delay - self.target_delay) / max(delay, 1e-9))
                self.cwnd *= factor
                self.last_decrease = now
                self.decreases += 1
        self.cwnd = min(max(self.cwnd, self.min_cwnd), self.max_cwnd)

    def on_trim(self, trimmed_bytes: int) -> None:
        """A switch trimmed one of our packets: a queue had no room for it, so the window
        gives its bytes up (every trim, not once a round trip). Halving once a round
        trip alone left a 7:1 incast's senders over the last hop's room for good: a
        trimmed packet is NACKed within a base RTT and sent again into the same full
        queue, so a window a few packets too large trimmed ~3 packets per one delivered
        (docs/switch.md)."""
        self.cwnd = max(self.cwnd - trimmed_bytes, self.min_cwnd)

    def on_loss(self, now: float, srtt: float) -> None:
        """A loss (RTO or RACK) means a queue overflowed: as ECN with high delay."""
        if now - self.last_decrease >= srtt:
            self.cwnd = max(self.min_cwnd, self.cwnd * 0.5)
            self.last_decrease = now
            self.decreases += 1
