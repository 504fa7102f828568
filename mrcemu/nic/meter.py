"""What a NIC daemon measures about itself, so that a run can say whether the emulated
network or this host's CPU set its pace (docs/fidelity.md, after Mininet-HiFi).

- kernel drops at each port's AF_PACKET socket (PACKET_STATISTICS): frames the
  network delivered that we never read;
- how late timers, paced sends and the delay line's releases (the scale model's
  latency) ran against their due time, and the frames the delay line had no room for;
- on ports with frames waiting, the rate achieved against the rate paced;
- the daemon's CPU time;
- the interpreter's garbage collections, which stop the loop while they run.

`mrcemu.fidelity` turns these into the run's verdict.
"""

from __future__ import annotations

import math
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

SOL_PACKET = 263
PACKET_STATISTICS = 6
_TPACKET_STATS = struct.Struct("II")  # tp_packets, tp_drops (the kernel resets on read)
_STEPS_PER_OCTAVE = 8  # histogram resolution: 2**(1/8) = 9% per bucket


class Lateness:
    """A log-bucket histogram of lateness (seconds); the maximum is kept exactly."""

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.n = 0
        self.max = 0.0

    @staticmethod
    def bucket(late: float) -> int:
        us = late * 1e6
        return 0 if us < 1 else int(math.log2(us) * _STEPS_PER_OCTAVE) + 1

    def add(self, late: float) -> None:
        k = self.bucket(late)
        self.buckets[k] = self.buckets.get(k, 0) + 1
        self.n += 1
        if late > self.max:
            self.max = late

    @classmethod
    def of(cls, buckets: dict[int, int], n: int, max_late: float) -> Lateness:
        """A histogram kept elsewhere with the same buckets (ports.c: the paced sends)."""
        h = cls()
        h.buckets, h.n, h.max = dict(buckets), n, max_late
        return h

    def merged(self, other: Lateness) -> Lateness:
        """Both histograms' samples as one."""
        h = Lateness()
        h.buckets = dict(self.buckets)
        for k, v in other.buckets.items():
            h.buckets[k] = h.buckets.get(k, 0) + v
        h.n, h.max = self.n + other.n, max(self.max, other.max)
        return h

    def quantile(self, q: float) -> float:
        """The upper edge of the bucket holding the q-quantile (0 with no samples)."""
        if not self.n:
            return 0.0
        need, seen = q * self.n, 0
        for k in sorted(self.buckets):
            seen += self.buckets[k]
            if seen >= need:
                edge = 1e-6 if k == 0 else 2 ** (k / _STEPS_PER_OCTAVE) * 1e-6
                return min(edge, self.max)
        return self.max  # pragma: no cover - seen reaches n

    def to_json(self) -> dict:
        return {"n": self.n, "p50_s": round(self.quantile(0.5), 6),
                "p99_s": round(self.quantile(0.99), 6), "max_s": round(self.max, 6)}


class PortLoad:
    """Time a port had frames waiting, and the bytes it sent meanwhile."""

    def __init__(self, rate: float, backlogged_s: float = 0.0, sent: int = 0) -> None:
        self.rate = rate  # paced, bytes per second
        self.backlogged_s = backlogged_s
        self.sent = sent

    def to_json(self) -> dict:
        want = self.rate * self.backlogged_s
        return {"backlogged_s": round(self.backlogged_s, 4), "sent_bytes": self.sent,
                "paced_bps": round(self.rate * 8), "achieved": round(self.sent / want, 4)
                if want else None}


class Pacer(Protocol):
    """What the meter reads of the ports that pace a daemon's sends (datapath.Ports)."""

    def reset_meter(self) -> None: ...
    def send_late(self) -> tuple[dict[int, int], int, float]: ...
    def release_late(self) -> tuple[dict[int, int], int, float] | None: ...
    def timer_late(self) -> tuple[dict[int, int], int, float]: ...
    def delay_counters(self) -> dict | None: ...
    def load(self) -> dict[int, tuple[float, int]]: ...


class PauseMeter(Protocol):
    """What the meter reads of the garbage collector's pauses (collector.Pauses)."""

    hist: Lateness

    def reset(self) -> None: ...


def socket_stats(s: socket.socket) -> tuple[int, int]:
    """(packets, drops) since the last call: the kernel resets them on read."""
    raw = s.getsockopt(SOL_PACKET, PACKET_STATISTICS, _TPACKET_STATS.size)
    return _TPACKET_STATS.unpack(raw)


class Meter:
    """One daemon's measurements since the last `reset`."""

    def __init__(self, ports: dict[int, socket.socket], rates: dict[int, float],
                 now: float, pacer: Pacer | None = None, pauses: PauseMeter | None = None) -> None:
        self.ports = ports
        self.rates = rates
        self.pacer = pacer  # the compiled ports that pace sends (datapath.Ports), if any
        self.pauses = pauses  # the garbage collector's (collector.py), if measured
        self.reset(now)

    def reset(self, now: float) -> None:
        for s in self.ports.values():
            socket_stats(s)  # zero the kernel's counters
        self.t0 = now
        self.cpu0 = _cpu()
        self.timers = Lateness()  # the policy's timers (the loop's own: loop_timers)
        self.loop_timers = Lateness()
        self.sends = Lateness()
        self.releases = Lateness()
        self.load = {p: PortLoad(r) for p, r in self.rates.items()}
        # the delay line's drops before this reset (its counter runs for the daemon's life)
        self.delay_dropped0 = self._delay_dropped()
        if self.pacer is not None:
            self.pacer.reset_meter()
        if self.pauses is not None:
            self.pauses.reset()
        self.drops = {p: 0 for p in self.ports}
        self.packets = {p: 0 for p in self.ports}
        # Loop rounds (each one wait for a timer, a frame or a request): with socket
        # packets, what a wakeup costs and how many frames each one serves.
        self.wakeups = 0
        # CPU spent on the test harness's work, not the NIC's: filling and hashing source
        # buffers, allocating and hashing memory regions. Per-packet costs exclude it.
        self.harness_cpu = 0.0

    @contextmanager
    def harness(self) -> Iterator[None]:
        """Count the CPU the block uses as harness work (see `reset`)."""
        c0 = _cpu()
        try:
            yield
        finally:
            self.harness_cpu += _cpu() - c0

    def poll_sockets(self) -> None:
        for p, s in self.ports.items():
            n, d = socket_stats(s)
            self.packets[p] += n
            self.drops[p] += d

    def _delay_dropped(self) -> int:
        c = self.pacer.delay_counters() if self.pacer is not None else None
        return c["dropped"] if c else 0

    def _take_pacer(self) -> None:
        """The paced sends' and the delay line's figures, from the ports that keep them."""
        if self.pacer is None:
            return
        self.sends = Lateness.of(*self.pacer.send_late())
        self.loop_timers = Lateness.of(*self.pacer.timer_late())
        released = self.pacer.release_late()
        if released is not None:
            self.releases = Lateness.of(*released)
        for p, (backlogged_s, sent) in self.pacer.load().items():
            self.load[p] = PortLoad(self.rates[p], backlogged_s, sent)

    def to_json(self, now: float) -> dict:
        self.poll_sockets()
        self._take_pacer()
        return {"wall_s": round(now - self.t0, 4), "cpu_s": round(_cpu() - self.cpu0, 4),
                "harness_cpu_s": round(self.harness_cpu, 4), "wakeups": self.wakeups,
                "timer_late": self.timers.merged(self.loop_timers).to_json(),
                "send_late": self.sends.to_json(),
                "release_late": self.releases.to_json(),
                "delay_dropped": self._delay_dropped() - self.delay_dropped0,
                **({"gc_pause": self.pauses.hist.to_json()} if self.pauses is not None
                   else {}),
                "ports": {str(p): {"socket_packets": self.packets.get(p, 0),
                                   "socket_drops": self.drops.get(p, 0),
                                   **self.load[p].to_json()}
                          for p in self.load}}


def _cpu() -> float:
    """This process's user plus system seconds, to the nanosecond (os.times counts
    10 ms ticks: too coarse for one hash of a small buffer)."""
    return time.process_time()
