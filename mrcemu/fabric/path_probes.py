"""`mrcemu check` on one server: its hosts' sockets, the probes they send and what
arrives at them (`fabric/check.py` judges every path; each other server of a split
fabric runs one of these in its agent).

Each probe is built as MRC data is, IPv6-in-IPv6: the outer header to the path's
uSID container, the inner one to the destination port. It is sent from the source
host's namespace through its kernel routes (a raw IPv6 socket, so the host's /36 plane
routes pick the port), and caught on the destination by an AF_PACKET socket, which
tells us the arriving interface, the outer DA and the hop limit as delivered.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable, Iterable

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from mrcemu.fabric.netns import inside
from mrcemu.nic.sink import protocol_sink
from mrcemu.topology import Topology
from mrcemu.topology.addressing import host_address
from mrcemu.topology.paths import Path, ev_flow_label, ev_udp_sport, paths
from mrcemu.wire.constants import IPPROTO_IPV6

CHECK_PORT = 47910
MAGIC = b"MRCEMU-CHECK"
PROBE = struct.Struct("!12sHHIQ")  # magic, src, dst, ev, nonce
HOP_LIMIT = 64
ETH_P_IPV6 = 0x86DD


def probe_bytes(topo: Topology, path: Path, nonce: int) -> bytes:
    src = str(host_address(path.plane, path.src))
    pkt = (IPv6(src=src, dst=str(path.container), hlim=HOP_LIMIT, fl=ev_flow_label(path.ev))
           / IPv6(src=src, dst=str(path.delivered), hlim=HOP_LIMIT, fl=ev_flow_label(path.ev))
           / UDP(sport=ev_udp_sport(path.ev), dport=CHECK_PORT)
           / Raw(PROBE.pack(MAGIC, path.src, path.dst, path.ev, nonce)))
    return bytes(pkt)


def parse_arrival(frame: bytes) -> tuple[int, int, int, int, bytes, int] | None:
    """(src, dst, ev, nonce, delivered outer DA, hop limit) of a probe frame, or None."""
    if len(frame) < 14 + 80 + 8 + PROBE.size or frame[12:14] != b"\x86\xdd":
        return None
    ip = frame[14:]
    if ip[6] != IPPROTO_IPV6 or ip[46] != 17:
        return None
    udp = ip[80:]
    if struct.unpack("!H", udp[2:4])[0] != CHECK_PORT:
        return None
    magic, src, dst, ev, nonce = PROBE.unpack(udp[8:8 + PROBE.size])
    if magic != MAGIC:
        return None
    return src, dst, ev, nonce, ip[24:40], ip[7]


Key = tuple[int, int, int]  # src, dst, ev
# What arrived at a host: src, dst, ev, the host it reached, its interface, the outer
# DA as delivered (hex) and the hop limit. JSON-able: an agent sends it back as it is.
Arrival = tuple[int, int, int, int, str, str, int]


def expected_paths(topo: Topology, srcs: Iterable[int]) -> dict[Key, Path]:
    """Every path from the hosts `srcs` to every other host."""
    out = {}
    for a in srcs:
        for b in range(topo.hosts):
            if a != b:
                for p in paths(topo, a, b):
                    out[(a, b, p.ev)] = p
    return out


class Probes:
    """One server's share of a check: its hosts' sockets, opened in their namespaces
    from here, the probes they send, and what arrives at them. Close it (or use it as
    a context manager) to close the sockets."""

    def __init__(self, topo: Topology, pids: dict[str, int], hosts: Iterable[int]) -> None:
        self.topo, self.hosts = topo, list(hosts)
        self.senders: dict[int, socket.socket] = {}
        self.listeners: dict[int, socket.socket] = {}
        self.sinks: list[socket.socket] = []
        try:
            for h in self.hosts:
                with inside(pids[f"h{h}"]):
                    self.senders[h] = socket.socket(socket.AF_INET6, socket.SOCK_RAW,
                                                    socket.IPPROTO_RAW)
                    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                       socket.htons(ETH_P_IPV6))
                    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                    rx.setblocking(False)
                    self.listeners[h] = rx
                    self.sinks.append(protocol_sink(IPPROTO_IPV6))  # no ICMP param problem
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Probes:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def send(self, nonce: int, progress: Callable[[int, int], None] | None = None
             ) -> dict[Key, str]:
        """One probe on every path from these hosts; the paths it could not send on, and
        why."""
        expected = expected_paths(self.topo, self.hosts)
        unsendable: dict[Key, str] = {}
        for sent, (key, p) in enumerate(expected.items(), 1):
            try:
                self.senders[key[0]].sendto(probe_bytes(self.topo, p, nonce),
                                            (str(p.container), 0))
            except OSError as e:  # e.g. the plane's port is down: the kernel has no route
                unsendable[key] = f"not sent: {e.strerror}"
            if progress and (sent % 64 == 0 or sent == len(expected)):
                progress(sent, len(expected))
        return unsendable

    def collect(self, nonce: int, expect: int, timeout: float) -> list[Arrival]:
        """What arrives at these hosts until `expect` probes of this check have, or
        `timeout` seconds pass; a probe counted once."""
        out: list[Arrival] = []
        seen: set[Key] = set()
        deadline = time.monotonic() + timeout
        fd_host = {s.fileno(): h for h, s in self.listeners.items()}
        while len(seen) < expect and time.monotonic() < deadline and self.listeners:
            ready, _, _ = select.select(list(self.listeners.values()), [], [], 0.1)
            for s in ready:
                h = fd_host[s.fileno()]
                while True:
                    try:
                        frame, addr = s.recvfrom(65535)
                    except BlockingIOError:
                        break
                    got = parse_arrival(frame)
                    if got is None or got[3] != nonce:
                        continue
                    src, dst, ev, _, da, hlim = got
                    if (src, dst, ev) in seen:
                        continue
                    seen.add((src, dst, ev))
                    out.append((src, dst, ev, h, addr[0], da.hex(), hlim))
        return out

    def close(self) -> None:
        for s in [*self.senders.values(), *self.listeners.values(), *self.sinks]:
            s.close()
        self.senders.clear()
        self.listeners.clear()
        self.sinks.clear()


