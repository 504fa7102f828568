"""A deterministic simulated multi-path network for the sans-IO cores (no root, no clock).

Each path (source host, plane, spine) has its own delay, loss, duplication,
jitter, blackhole and trimming; the clock is virtual, so a test of seconds of traffic
runs in milliseconds and gives the same result every time. Like the fabric's, a path
is FIFO for data: jitter reorders packets across paths, never two data packets of one
path (a trimmed header and control packets go in the priority class, and may overtake).
It does what the fabric does to a packet: consume the uSIDs (the DA becomes
the delivered host address), trim (headers only, DSCP TRIMMED) and mark CE.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from ipaddress import IPv6Address
from typing import Protocol

from mrcemu.topology.addressing import container, container_usids
from mrcemu.topology.paths import ev_fields
from mrcemu.wire import codec
from mrcemu.wire.constants import MRC_DATA, ROCE_DATA, Dscp
from mrcemu.wire.layout import IPV6_DST, bth_at


class Core(Protocol):
    def receive(self, pkt: bytes, now: float) -> None: ...
    def timer(self, now: float) -> None: ...
    def packets_to_send(self, now: float) -> list[tuple[int, bytes]]: ...
    def next_timer(self) -> float | None: ...


@dataclass
class PathProps:
    delay: float = 0.0005
    loss: float = 0.0
    dup: float = 0.0
    jitter: float = 0.0  # uniform extra delay: reordering
    blackhole: bool = False
    drop_data: bool = False  # data dropped, control forwarded (a path that drops big packets)
    trim: float = 0.0
    trim_lasthop: float = 0.0  # trimmed at the receiver's own leaf (incast)
    ce: float = 0.0
    delivered: int = 0
    dropped: int = 0
    data_at: float = 0.0  # when the path's last data packet arrives: FIFO


@dataclass
class SimNet:
    seed: int = 1
    now: float = 0.0
    default: PathProps = field(default_factory=PathProps)
    paths: dict[tuple[str, int, int | None], PathProps] = field(default_factory=dict)
    sent_log: list[tuple[float, str, int, int]] = field(default_factory=list)  # t, src, ev, op
    _q: list = field(default_factory=list)
    _seq: int = 0
    _nodes: dict[str, tuple[Core, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def attach(self, name: str, core: Core, peer: str) -> None:
        self._nodes[name] = (core, peer)

    def path(self, src: str, plane: int, spine: int | None) -> PathProps:
        key = (src, plane, spine)
        if key not in self.paths:
            self.paths[key] = replace(self.default, delivered=0, dropped=0, data_at=0.0)
        return self.paths[key]

    def deliver(self, pkt: bytes) -> bytes:
        """The packet as the fabric delivers it: its (outer) DA the last uSID's address."""
        b = bytearray(pkt)
        last = container_usids(IPv6Address(bytes(b[IPV6_DST])))[-1]
        b[IPV6_DST] = container(last).packed
        return bytes(b)

    def _transmit(self, src: str, ev: int, pkt: bytes) -> None:
        plane, spine = ev_fields(ev)
        props = self.path(src, plane, spine)
        op = pkt[bth_at(pkt)]
        self.sent_log.append((self.now, src, ev, op))
        if (props.blackhole or (props.drop_data and (op in MRC_DATA or op in ROCE_DATA))
                or self.rng.random() < props.loss):
            props.dropped += 1
            return
        pkt = self.deliver(pkt)
        fifo = op in MRC_DATA or op in ROCE_DATA
        if op in MRC_DATA:  # data: the only trimmable kind
            if self.rng.random() < props.trim:
                pkt, fifo = codec.trim(pkt, Dscp.TRIMMED), False
            elif props.trim_lasthop and self.rng.random() < props.trim_lasthop:
                pkt, fifo = codec.trim(pkt, Dscp.TRIMMED_LASTHOP), False
            elif self.rng.random() < props.ce:
                pkt = codec.mark_ce(pkt)
        elif op in ROCE_DATA and (pkt[1] >> 4) & 3 and self.rng.random() < props.ce:
            pkt = codec.mark_ce(pkt)  # ECN-capable RoCE data (DCQCN)
        copies = 2 if self.rng.random() < props.dup else 1
        _core, peer = self._nodes[src]
        for _ in range(copies):
            t = self.now + props.delay + self.rng.random() * props.jitter
            if fifo:
                t = props.data_at = max(t, props.data_at)
            self._seq += 1
            heapq.heappush(self._q, (t, self._seq, peer, pkt))
        props.delivered += 1

    def _flush(self, name: str) -> None:
        core, _ = self._nodes[name]
        for ev, pkt in core.packets_to_send(self.now):
            self._transmit(name, ev, pkt)

    def run(self, until: float, stop: Callable[[], bool] = lambda: False,
            on_step: Callable[[float], None] | None = None) -> float:
        for name in self._nodes:
            self._flush(name)
        while self.now < until and not stop():
            timers = [(t, n) for n, (c, _) in self._nodes.items()
                      if (t := c.next_timer()) is not None]
            t_pkt = self._q[0][0] if self._q else float("inf")
            t_tmr = min(timers)[0] if timers else float("inf")
            t = min(t_pkt, t_tmr, until)
            self.now = max(self.now, t)
            if t == float("inf") or t >= until:
                self.now = until
                break
            if t_pkt <= t_tmr:
                _, _, dst, pkt = heapq.heappop(self._q)
                self._nodes[dst][0].receive(pkt, self.now)
                self._flush(dst)
            else:
                for n, (c, _) in self._nodes.items():
                    nt = c.next_timer()
                    if nt is not None and nt <= self.now:
                        c.timer(self.now)
                        self._flush(n)
            if on_step:
                on_step(self.now)
        return self.now
