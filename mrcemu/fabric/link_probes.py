"""Clustermapper's probing on one server: sends its hosts' self-probes
(`topology.selfprobe`) through the real fabric and feeds what comes back to a `LinkMap`.

One process does it for every host of the server, as `mrcemu check` does: the sockets
are opened inside each host's namespace and stay bound to it. `fabric/mapper.py` puts
the servers of a split fabric together (each other server's agent runs one of these).

A probe is a plain IPv6/UDP packet in the CONTROL class, sent through the host's kernel
routes (a raw socket, so the DA can be the loop's uSID container) and received back by
an ordinary UDP socket: its UDP checksum is computed for the address it arrives at, the
host's own.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable, Iterable

from mrcemu.fabric.netns import inside
from mrcemu.topology import Layout
from mrcemu.topology.addressing import host_address
from mrcemu.topology.selfprobe import LinkMap, loops
from mrcemu.wire.codec import IP6, UDPH, udp_checksum
from mrcemu.wire.constants import Dscp

MAP_PORT = 47911
MAGIC = b"MRCMAP"
PAYLOAD = struct.Struct("!6sIQ")  # magic, loop index, sequence number
SO_TIMESTAMPNS = 35  # not exported by Python's socket module; also the cmsg type
TIMESPEC = struct.Struct("qq")
STALL = 0.01  # a probe that left this much later than recorded is timed from its send


def probe_bytes(src: bytes, dst: bytes, home: bytes, loop: int, seq: int) -> bytes:
    """IPv6/UDP to the container `dst`, its checksum for `home` (where it arrives)."""
    body = PAYLOAD.pack(MAGIC, loop, seq)
    ulen = UDPH.size + len(body)
    ck = udp_checksum(src, home, UDPH.pack(MAP_PORT, MAP_PORT, ulen, 0) + body)
    vtf = (6 << 28) | (Dscp.CONTROL << 22)
    return (IP6.pack(vtf, ulen, 17, 64, src, dst) + UDPH.pack(MAP_PORT, MAP_PORT, ulen, ck)
            + body)


# A link with no answered probe over WINDOW_S is bad; a probe unanswered after
# TIMEOUT_S is lost (both for 20 Mb/s links: a slowed run scales them).
WINDOW_S = 0.5
TIMEOUT_S = 0.3


class LinkProbes:
    """Self-probes every `interval` seconds from each of `hosts` (default: every host);
    `map` holds what they found. Use as a context manager: the sockets close on exit."""

    def __init__(self, layout: Layout, pids: dict[str, int], interval: float = 0.05,
                 window: float = WINDOW_S, timeout: float = TIMEOUT_S,
                 hosts: Iterable[int] | None = None) -> None:
        mine = set(range(layout.topo.hosts) if hosts is None else hosts)
        self.map = LinkMap([lp for lp in loops(layout) if lp.host in mine], window=window,
                           timeout=timeout)
        self.interval = interval
        self.senders: dict[int, socket.socket] = {}
        self.receivers: dict[int, socket.socket] = {}
        try:
            for h in sorted(mine):
                with inside(pids[f"h{h}"]):
                    self.senders[h] = socket.socket(socket.AF_INET6, socket.SOCK_RAW,
                                                    socket.IPPROTO_RAW)
                    rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                    # The kernel's arrival time, not ours: a probe read late because
                    # this process did not get the CPU still came back in time.
                    rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                    rx.bind(("::", MAP_PORT))
                    rx.setblocking(False)
                    self.receivers[h] = rx
        except BaseException:
            self.close()
            raise
        self.fd_host = {s.fileno(): h for h, s in self.receivers.items()}
        self.next_round = 0.0
        self.sent = self.answered = self.unsendable = 0
        if self.receivers:
            self._await_stamps(pids)

    def _await_stamps(self, pids: dict[str, int]) -> None:
        """The kernel turns receive timestamps on lazily (deferred work), and stamps what
        arrives before that when it is read: a first round would look late. Wait until a
        datagram over loopback comes back stamped before we read it (at most 1 s)."""
        h, rx = next(iter(self.receivers.items()))
        with inside(pids[f"h{h}"]):
            tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            for _ in range(100):
                tx.sendto(b"stamp?", ("::1", MAP_PORT))
                time.sleep(0.01)
                read_at = time.time()
                try:
                    _data, anc, _flags, _addr = rx.recvmsg(64, 64)
                except BlockingIOError:
                    continue
                stamps = [TIMESPEC.unpack(v[:TIMESPEC.size]) for lvl, kind, v in anc
                          if lvl == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS]
                if stamps and stamps[0][0] + stamps[0][1] * 1e-9 < read_at - 0.005:
                    return
        finally:
            tx.close()

    def __enter__(self) -> LinkProbes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for s in [*self.senders.values(), *self.receivers.values()]:
            s.close()
        self.senders.clear()
        self.receivers.clear()

    def _round(self, now: float) -> None:
        for i, lp in enumerate(self.map.loops):
            home = host_address(lp.plane, lp.host).packed
            seq = self.map.sent(i, now)
            pkt = probe_bytes(home, lp.container.packed, home, i, seq)
            try:
                self.senders[lp.host].sendto(pkt, (str(lp.container), 0))
                self.sent += 1
            except OSError:  # the port is down: the kernel has no route; the probe is lost
                self.unsendable += 1
            if (after := time.monotonic()) - now > STALL:
                self.map.restamp(i, seq, after)  # we stalled, not the link

    def _read(self, wait: float) -> None:
        ready, _, _ = select.select(list(self.receivers.values()), [], [], max(0.0, wait))
        # The kernel stamps arrivals on the real-time clock; probes are sent on the
        # monotonic one.
        offset = time.time() - time.monotonic()
        for s in ready:
            while True:
                try:
                    data, anc, _flags, _addr = s.recvmsg(64, 64)
                except BlockingIOError:
                    break
                if len(data) != PAYLOAD.size:
                    continue
                arrived = time.monotonic()
                for level, kind, value in anc:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        sec, ns = TIMESPEC.unpack(value[:TIMESPEC.size])
                        arrived = min(arrived, sec + ns * 1e-9 - offset)
                magic, loop, seq = PAYLOAD.unpack(data)
                if magic == MAGIC and self.map.answered(loop, seq, arrived):
                    self.answered += 1

    def step(self) -> float:
        """Send a round if one is due, read what came back; returns the time."""
        now = time.monotonic()
        if now >= self.next_round:
            self._round(now)
            self.next_round = max(self.next_round + self.interval, now)
        self._read(min(self.next_round - time.monotonic(), 0.05))
        return time.monotonic()

    def run(self, duration: float, on_tick: Callable[[float], None] | None = None,
            tick: float = 0.25) -> None:
        """Probe for `duration` seconds (forever if None); `on_tick(now)` every `tick`.
        The last `timeout` seconds only wait for answers: every probe gets decided."""
        start = time.monotonic()
        last_tick = start
        while duration is None or time.monotonic() - start < duration:
            now = self.step()
            if on_tick is not None and now - last_tick >= tick:
                last_tick = now
                on_tick(now)
        end = time.monotonic() + self.map.timeout
        while (now := time.monotonic()) < end:
            self._read(end - now)
