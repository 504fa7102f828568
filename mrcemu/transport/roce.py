"""The RoCEv2 RC baseline, sans-IO: one ECMP-hashed path per QP, go-back-N.

It exists so every comparison with MRC runs on the same fabric in the same
run, on the same data path: the per-packet work (framing from the source buffers,
in-order placement, ACK/NAK framing) is compiled (`datapath.RoceQp`, roce.c) and this
module keeps the go-back-N policy at event granularity.

With `roce_dcqcn` (the default) its data is ECN-capable and DCQCN (`dcqcn.py`) sets
its rate: as the responder it answers CE-marked data with CNPs, as the requester it
sends no faster than the rate its CNPs left it.

On a dead path it keeps retrying the same path (with exponential backoff,
like an RC QP's local ACK timeout) until an emulated routing reconvergence
delay has passed, then re-hashes; after `roce_retry_count` retries without a
reconvergence it fails the QP.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Iterable

from mrcemu import datapath
from mrcemu.transport.base import ConnectionBase, Message, Stats, put_frames, unwrap
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.dcqcn import Dcqcn, DcqcnParams
from mrcemu.transport.events import (
    REMOTE_ACCESS,
    ConnectionFailed,
    MessageReceived,
    PathRehashed,
    refused_why,
)
from mrcemu.transport.evs import Ev, EvProfile
from mrcemu.transport.memory import MemoryTable
from mrcemu.transport.trace import TxTrace
from mrcemu.wire import codec
from mrcemu.wire.constants import ICRC_LEN, ROCE_DATA, Dscp, Opcode, Syndrome
from mrcemu.wire.layout import BTH, ROCE_BTH_AT

ECT0 = 0b10  # ECN-capable transport: a switch may mark CE instead of dropping

SYNDROME_ACK = Syndrome.ACK
SYNDROME_NAK_PSN = Syndrome.NAK_PSN


def start_flows(profile: EvProfile) -> list[int]:
    """The flows (EVs) a QP may take, in the order `first_flow_index` picks from."""
    return sorted(e.ev for e in profile.evs.values() if e.active)


def first_flow_index(flow_key: bytes, local_qpn: int, remote_qpn: int, flows: int) -> int:
    """Which of its `flows` (sorted by EV) a QP starts on: a hash of the pair and both QPs."""
    return zlib.crc32(flow_key + local_qpn.to_bytes(4, "big")
                      + remote_qpn.to_bytes(4, "big")) % flows


class RoceConnection(ConnectionBase):
    def __init__(self, cfg: TransportConfig, profile: EvProfile, local_qpn: int,
                 remote_qpn: int, memory: MemoryTable | None = None,
                 flow_key: bytes = b"") -> None:
        self.cfg = cfg
        self.profile = profile
        self.local_qpn, self.remote_qpn = local_qpn, remote_qpn
        self.memory = memory or MemoryTable()
        self._stats = Stats()
        self.tx_trace = TxTrace()
        super().__init__()
        base = start_flows(profile)
        self.paths = base
        # The compiled data path, framing from the codec's bodies with every per-packet
        # field zero (it writes those by name).
        bodies = tuple(
            codec.body({"opcode": op, "dqpn": remote_qpn},
                       {"RETH": {}} if op in (Opcode.RC_WRITE_FIRST, Opcode.RC_WRITE_ONLY)
                       else {})
            for op in (Opcode.RC_WRITE_ONLY, Opcode.RC_WRITE_FIRST, Opcode.RC_WRITE_MIDDLE,
                       Opcode.RC_WRITE_LAST, Opcode.RC_WRITE_LAST_IMM))
        self.dp = datapath.RoceQp(
            local_qpn, remote_qpn, cfg.pmtu, cfg.roce_ack_every, cfg.roce_reconvergence,
            self.memory.native,
            codec.body({"opcode": Opcode.RC_ACK, "dqpn": remote_qpn}, {"AETH": {}}),
            (SYNDROME_ACK, SYNDROME_NAK_PSN, Syndrome.NAK_REMOTE_ACCESS),
            (Dscp.NO_TRIM << 2) | (ECT0 if cfg.roce_dcqcn else 0), bodies)
        # One ECMP-hashed path for data and ACKs alike: the data path holds it, since
        # its responder moves it too (lost ACKs, after a reconvergence).
        self.dp.set_route([(ev, ev >> 16, ev & 0xFFFF, p.src, p.delivered, p.container)
                           for ev in base for p in (profile.evs[ev].path,)],
                          first_flow_index(flow_key, local_qpn, remote_qpn, len(base)))
        self.srtt: float | None = None  # go-back-N keeps no RTT estimate
        # requester
        self.next_psn = 0  # next new PSN to assign
        self.send_psn = 0  # next PSN to (re)send: go-back-N rewinds this
        self.una = 0
        self.messages: deque[Message] = deque()  # posted and not yet complete, in order
        self.next_msn = 0
        self.last_progress = 0.0
        self.retries = 0
        self.failing_since: float | None = None
        self._failed = False
        self.timeout_at: float | None = None
        self.max_sent = 0
        # DCQCN: the reaction point (our rate), and the notification point's state
        self.dcqcn = (Dcqcn(DcqcnParams(
            cfg.roce_line_rate, cfg.dcqcn_alpha_interval, cfg.dcqcn_increase_interval,
            cfg.dcqcn_increase_bytes)) if cfg.roce_dcqcn and cfg.roce_line_rate
            else None)
        # What a full data packet costs on the wire (Ethernet, IPv6, UDP, BTH, ICRC): the
        # rate counts what the port carries, as the NIC's pacer does.
        self.wire_bytes = 14 + ROCE_BTH_AT + BTH.size + cfg.pmtu + ICRC_LEN
        self._ce_seen = 0
        self._cnp_at = float("-inf")
        self._cnp_due = False
        self.cnps_tx = 0

    @property
    def path_index(self) -> int:
        return self.dp.path_index

    @property
    def ev(self) -> Ev:
        return self.profile.evs[self.dp.ev]

    @property
    def plane_mask(self) -> int:
        """A QP sends on the one port of its path's plane."""
        return 1 << self.ev.path.plane

    def post_write(self, data: bytes | bytearray | memoryview, remote_va: int, rkey: int,
                   now: float, imm: int | None = None) -> int:
        mv = memoryview(data)
        n = max(1, -(-len(mv) // self.cfg.pmtu))
        msg = Message(self.next_msn, remote_va, rkey, mv, self.next_psn, n, imm,
                      posted_at=now)
        first = self.dp.post(mv, remote_va, rkey, imm)
        assert first == self.next_psn, (first, self.next_psn)  # one PSN space, two keepers
        self.next_msn += 1
        self.messages.append(msg)
        self.next_psn += n
        if self.timeout_at is None:
            self.last_progress = now
        return msg.msn

    @property
    def rto(self) -> float:
        """The local ACK timeout, doubled on each retry."""
        return min(self.cfg.max_rto * 8, self.cfg.roce_timeout * (2 ** self.retries))

    def _window(self, budget: int | None) -> int:
        """How many PSNs go-back-N may send now, from send_psn."""
        if self._failed:
            return 0
        n = min(self.next_psn, self.una + self.cfg.roce_window) - self.send_psn
        return max(0, n if budget is None else min(n, budget))

    def _rate_allows(self, n: int, now: float) -> int:
        if self.dcqcn is None or not n:
            return n
        return min(n, self.dcqcn.allowed(now, self.wire_bytes))

    def _sent(self, n: int, now: float) -> None:
        """n data packets from send_psn went out on the current path: the bookkeeping."""
        if not n:
            return
        ev = self.dp.ev
        rtx = max(0, min(self.send_psn + n, self.max_sent) - self.send_psn)
        self._stats.per_ev[ev] += n
        self._stats.retransmits += rtx
        self.tx_trace.record_run(now, ev, rtx, n)
        self.send_psn += n
        self.max_sent = max(self.max_sent, self.send_psn)
        if self.timeout_at is None:
            self.timeout_at = now + self.rto

    def packets_to_send(self, now: float, budget: int | None = None) -> list[tuple[int, bytes]]:
        """ACK/NAKs, then data from the go-back-N cursor, at most `budget` data packets."""
        out: list[tuple[int, bytes]] = []
        self._output(out, now, budget)
        return out

    def send_to(self, ports: datapath.Ports, now: float, budget: int) -> int:
        """ACK/NAKs, then data, framed straight into the NIC's ports."""
        return self._output(ports, now, budget)

    def _output(self, out: list[tuple[int, bytes]] | datapath.Ports, now: float,
              budget: int | None) -> int:
        sent = self.dp.take_control(out)
        if self._cnp_due:
            self._cnp_due = False
            sent += put_frames(out, [self._cnp()])
        n = self._rate_allows(self._window(budget), now)  # the budget is for data, as MRC's
        if n:
            n = self.dp.send(out, self.send_psn, n)
            self._sent(n, now)
            if self.dcqcn is not None:
                self.dcqcn.sent(n, self.wire_bytes, now)
        return sent + n

    def _cnp(self) -> tuple[int, bytes]:
        """A CNP to the requester, on our current path to it (the one our ACKs take)."""
        p = self.ev.path
        self.cnps_tx += 1
        return self.dp.ev, codec.encode(
            p.src, p.container, delivered=p.delivered, sport=self.dp.ev >> 16,
            flow_label=self.dp.ev & 0xFFFF, dscp=Dscp.CONTROL, ecn=0,
            bth={"opcode": Opcode.CNP, "dqpn": self.remote_qpn, "becn": 1})

    def attach(self, ports: datapath.Ports) -> None:
        ports.attach(self.local_qpn, self.dp, None)

    def received(self, now: float) -> None:
        """The data path placed (or dropped) packets for this QP: its completions and
        path changes become events."""
        for msn, imm in self.dp.take_completions():
            self._events.append(MessageReceived(msn, imm, now))
        ce = self.dp.rx_ce
        if ce != self._ce_seen:  # DCQCN's notification point: CE in, a CNP out (paced)
            self._ce_seen = ce
            if self.cfg.roce_dcqcn and now - self._cnp_at >= self.cfg.dcqcn_cnp_interval:
                self._cnp_at = now
                self._cnp_due = True
        for t, old, new in self.dp.take_rehashes():
            self._events.append(PathRehashed(t, old, new))

    def _on_ack(self, d: codec.Decoded, now: float) -> None:
        a = d.headers["AETH"]
        psn = unwrap(d.psn, self.una)
        if a["syndrome"] == SYNDROME_NAK_PSN:
            self._stats.nacks_rx += 1
            self.send_psn = max(self.una, min(psn, self.send_psn))  # go back N
            return
        if a["syndrome"] == Syndrome.NAK_REMOTE_ACCESS:
            self._refused(psn, now)
            return
        if psn >= self.max_sent:
            # PSNs never sent: a stale copy from a QP made before this one, or forged.
            # Taken, it would complete messages whose bytes never left (as sender.c).
            self._stats.acks_beyond_sent += 1
            return
        self._stats.sacks_rx += 1
        if psn + 1 > self.una:
            self.una = psn + 1
            self.send_psn = max(self.send_psn, self.una)
            self.last_progress = now
            self.retries = 0
            self.failing_since = None
            self.timeout_at = now + self.rto if self.una < self.send_psn else None
            while self.messages and (m := self.messages[0]).first_psn + m.npkts <= self.una:
                self._events.append(self.messages.popleft().complete(now))
            self.dp.release(self.una)

    def _refused(self, psn: int, now: float) -> None:
        """The peer refused the request at `psn` (a remote access NAK): the QP fails on
        it, as an RC QP does; what was posted after it is flushed."""
        m = next((m for m in self.messages if m.first_psn <= psn < m.first_psn + m.npkts),
                 None)
        if m is None or self._failed:
            self._stats.dropped["stale_nak"] += 1  # not a request of ours still out
            return
        self._stats.remote_access_naks += 1
        self._failed = True
        self.timeout_at = None
        self._events.append(ConnectionFailed(now, refused_why(m.msn, psn), REMOTE_ACCESS,
                                             m.msn))

    def receive_frame(self, pkt: bytes | memoryview, now: float,
                      via: bytes | None = None) -> None:
        """One packet as it arrived: data is the compiled responder's alone, an ACK/NAK
        comes back decoded for the go-back-N policy. Raises DecodeError for what is not
        a packet we accept."""
        d = self.dp.rx(pkt, now, via)
        if d is not None:
            self.receive_decoded(d, now)
        self.received(now)

    def receive_decoded(self, d: codec.Decoded, now: float) -> None:
        if d.bth["dqpn"] != self.local_qpn:
            self._stats.dropped["wrong_qp"] += 1
        elif d.opcode in ROCE_DATA:
            # Data is placed by the compiled responder from the packet's bytes, which a
            # Decoded no longer is: only receive()/receive_frame() take data.
            self._stats.dropped["data_without_frame"] += 1
        elif d.opcode == Opcode.RC_ACK:
            self._on_ack(d, now)
        elif d.opcode == Opcode.CNP:
            self._stats.cnps_rx += 1
            if self.dcqcn is not None:
                self.dcqcn.on_cnp(now)
        else:
            self._stats.dropped["unexpected_opcode"] += 1

    def timer(self, now: float) -> None:
        if self.dcqcn is not None:
            self.dcqcn.on_time(now)
        if self.timeout_at is None or now < self.timeout_at or self._failed:
            return
        self._stats.rtos += 1
        if self.failing_since is None:
            self.failing_since = now - self.rto
        if now - self.failing_since >= self.cfg.roce_reconvergence:
            self._rehash(now)
            self.failing_since = None
            self.retries = 0
        else:
            self.retries += 1
            if self.retries > self.cfg.roce_retry_count:
                self._failed = True
                self.timeout_at = None
                self._events.append(ConnectionFailed(
                    now, f"{self.cfg.roce_retry_count} retries without an ACK"))
                return
        self.send_psn = self.una  # go back N
        self.timeout_at = now + self.rto

    def _rehash(self, now: float) -> None:
        """Routing has reconverged around the failure: ECMP now hashes elsewhere."""
        self.dp.rehash(now)
        self.received(now)  # the rehash's event, in order

    def next_timer(self) -> float | None:
        if self._failed:
            return None
        if self.dcqcn is None:
            return self.timeout_at
        rate = self.dcqcn.next_time(self.wire_bytes, self._window(None) > 0)
        return min((t for t in (self.timeout_at, rate) if t is not None), default=None)

    def port_status(self, planes_up: set[int], now: float, announce: bool = True) -> None:
        """An RC QP has no port status protocol: it learns of a dead path from its ACK
        timeout and is moved by routing reconvergence."""

    @property
    def stats(self) -> Stats:
        """The policy's counters and the compiled data path's, read now."""
        s, c = self._stats, self.dp.counters()
        s.tx_data, s.tx_bytes = c["tx_data"], c["tx_bytes"]
        s.rx_data, s.rx_bytes, s.rx_dup = c["rx_data"], c["rx_bytes"], c["rx_dup"]
        s.sacks_tx, s.nacks_tx = c["sacks_tx"], c["nacks_tx"]
        s.cnps_tx, s.rx_ce = self.cnps_tx, self.dp.rx_ce
        for reason, n in c["dropped"].items():  # the data path's own count, not a sum
            s.dropped[reason] = n
        if c["ctl_overflow"]:
            s.dropped["control_queue_full"] = c["ctl_overflow"]
        return s

    @property
    def rx_bytes(self) -> int:
        return self.dp.rx_bytes

    @property
    def busy(self) -> bool:
        return self.dp.pending or (not self._failed and self.una < self.next_psn)

    @property
    def idle(self) -> bool:
        return self.una >= self.next_psn

    @property
    def failed(self) -> bool:
        return self._failed

    @property
    def cwnd(self) -> None:
        return None  # a fixed window of `roce_window` packets, no congestion window

    def message(self, msn: int) -> Message | None:
        return next((m for m in self.messages if m.msn == msn), None)

    def unfinished(self) -> Iterable[Message]:
        return self.messages

    def snapshot(self, now: float) -> dict:
        return {"una": self.una, "send_psn": self.send_psn, "next_psn": self.next_psn,
                "retries": self.retries, "rto": self.rto, "failed": self._failed,
                "path": f"0x{self.dp.ev:08x}", "expected": self.dp.expected,
                "rate_mbps": (self.dcqcn.rc * 8 / 1e6 if self.dcqcn else None),
                "alpha": self.dcqcn.alpha if self.dcqcn else None,
                "next_timer_in": (self.next_timer() or now) - now}
