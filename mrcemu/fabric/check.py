"""`mrcemu check`: one Scapy-crafted probe on every path of every ordered host pair.

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
from collections.abc import Callable
from dataclasses import dataclass, field

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


@dataclass
class PairResult:
    src: int
    dst: int
    total: int
    ok: int = 0
    failures: list[dict] = field(default_factory=list)


@dataclass
class CheckResult:
    pairs: list[PairResult]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(p.ok == p.total for p in self.pairs)

    @property
    def probes(self) -> int:
        return sum(p.total for p in self.pairs)

    def to_json(self) -> dict:
        return {"ok": self.ok, "probes": self.probes,
                "delivered": sum(p.ok for p in self.pairs), "seconds": round(self.seconds, 3),
                "pairs": [p.__dict__ for p in self.pairs]}


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


def run_check(topo: Topology, pids: dict[str, int], timeout: float = 5.0,
              progress: Callable[[int, int], None] | None = None) -> CheckResult:
    t0 = time.monotonic()
    hosts = range(topo.hosts)
    senders, listeners, sinks = {}, {}, []
    try:
        for h in hosts:
            with inside(pids[f"h{h}"]):
                senders[h] = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
                rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
                rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                rx.setblocking(False)
                listeners[h] = rx
                sinks.append(protocol_sink(IPPROTO_IPV6))  # no ICMP parameter problem
        expected: dict[tuple[int, int, int], Path] = {}
        results: dict[tuple[int, int], PairResult] = {}
        for a in hosts:
            for b in hosts:
                if a != b:
                    ps = paths(topo, a, b)
                    results[(a, b)] = PairResult(a, b, len(ps))
                    for p in ps:
                        expected[(a, b, p.ev)] = p
        nonce = time.monotonic_ns() & 0xFFFFFFFF
        total, sent = len(expected), 0
        unsendable: dict[tuple[int, int, int], str] = {}
        for key, p in expected.items():
            try:
                senders[key[0]].sendto(probe_bytes(topo, p, nonce), (str(p.container), 0))
            except OSError as e:  # e.g. the plane's port is down: the kernel has no route
                unsendable[key] = f"not sent: {e.strerror}"
            sent += 1
            if progress and (sent % 64 == 0 or sent == total):
                progress(sent, total)
        seen: set[tuple[int, int, int]] = set()
        deadline = time.monotonic() + timeout
        fd_host = {s.fileno(): h for h, s in listeners.items()}
        while len(seen) < total and time.monotonic() < deadline:
            ready, _, _ = select.select(list(listeners.values()), [], [], 0.1)
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
                    key = (src, dst, ev)
                    path = expected.get(key)
                    if path is None or key in seen:
                        continue
                    seen.add(key)
                    res = results[(src, dst)]
                    iface = addr[0]
                    problems = []
                    if h != dst or iface != path.dst_port:
                        problems.append(f"arrived at {iface}, expected {path.dst_port}")
                    if da != path.delivered.packed:
                        problems.append(f"delivered DA {socket.inet_ntop(socket.AF_INET6, da)},"
                                        f" expected {path.delivered}")
                    if hlim != HOP_LIMIT - path.switch_hops:
                        problems.append(f"hop limit {hlim}, expected "
                                        f"{HOP_LIMIT - path.switch_hops}")
                    if problems:
                        res.failures.append({"ev": f"0x{ev:08x}", "why": "; ".join(problems)})
                    else:
                        res.ok += 1
        for key, p in expected.items():
            if key not in seen:
                why = unsendable.get(key, f"lost (container {p.container})")
                results[(key[0], key[1])].failures.append({"ev": f"0x{p.ev:08x}", "why": why})
        return CheckResult(list(results.values()), time.monotonic() - t0)
    finally:
        for s in [*senders.values(), *listeners.values(), *sinks]:
            s.close()
