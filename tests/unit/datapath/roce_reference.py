"""The RoCEv2 RC baseline, sans-IO: one ECMP-hashed path per QP, go-back-N.

It exists so every comparison with MRC runs on the same fabric in the same
run. On a dead path it keeps retrying the same path (with exponential backoff,
like an RC QP's local ACK timeout) until an emulated routing reconvergence
delay has passed, then re-hashes; after `roce_retry_count` retries without a
reconvergence it fails the QP.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Iterable

from mrcemu.transport.base import PSN_MASK, ConnectionBase, Message, Stats, unwrap
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import ConnectionFailed, MessageReceived, PathRehashed
from mrcemu.transport.evs import Ev, EvProfile
from mrcemu.transport.memory import MemoryRegion, MemoryTable
from mrcemu.transport.roce import ECT0
from mrcemu.transport.trace import TxTrace
from mrcemu.wire import codec
from mrcemu.wire.constants import ROCE_DATA, Dscp, Opcode

SYNDROME_ACK = 0x00
SYNDROME_NAK_PSN = 0x60
SYNDROME_NAK_ACCESS = 0x62


class RoceConnection(ConnectionBase):
    def __init__(self, cfg: TransportConfig, profile: EvProfile, local_qpn: int,
                 remote_qpn: int, memory: MemoryTable | None = None,
                 flow_key: bytes = b"") -> None:
        self.cfg = cfg
        self.profile = profile
        self.local_qpn, self.remote_qpn = local_qpn, remote_qpn
        self.memory = memory or MemoryTable()
        self.stats = Stats()
        self.tx_trace = TxTrace()
        super().__init__()
        base = sorted(e.ev for e in profile.evs.values() if e.active)
        self.paths = base
        h = zlib.crc32(flow_key + local_qpn.to_bytes(4, "big") + remote_qpn.to_bytes(4, "big"))
        self.path_index = h % len(base)
        self.srtt: float | None = None  # go-back-N keeps no RTT estimate
        # requester
        self.next_psn = 0  # next new PSN to assign
        self.send_psn = 0  # next PSN to (re)send: go-back-N rewinds this
        self.una = 0
        # Segments from PSN `first_unacked` on; acknowledged ones are let go.
        self.packets: deque[tuple[Message, int, int]] = deque()
        self.first_unacked = 0
        self.messages: deque[Message] = deque()  # posted and not yet complete, in order
        self.next_msn = 0
        self.last_progress = 0.0
        self.retries = 0
        self.failing_since: float | None = None
        self._failed = False
        self.timeout_at: float | None = None
        # responder
        self.rx_expected = 0
        self.rx_mr: MemoryRegion | None = None
        self.rx_va = 0
        self.rx_len = 0
        self.rx_got = 0
        self.rx_msn = 0
        self.nak_sent_for: int | None = None
        self.ack_failing_since: float | None = None
        self.unacked = 0
        self.control: deque[tuple[int, bytes]] = deque()
        self.max_sent = 0

    @property
    def ev(self) -> Ev:
        return self.profile.evs[self.paths[self.path_index]]

    def post_write(self, data: bytes | bytearray | memoryview, remote_va: int, rkey: int,
                   now: float, imm: int | None = None) -> int:
        mv = memoryview(data)
        pmtu = self.cfg.pmtu
        n = max(1, -(-len(mv) // pmtu))
        msg = Message(self.next_msn, remote_va, rkey, mv, self.next_psn, n, imm,
                      posted_at=now)
        self.next_msn += 1
        self.messages.append(msg)
        for i in range(n):
            self.packets.append((msg, i * pmtu, min(pmtu, len(mv) - i * pmtu)))
        self.next_psn += n
        if self.timeout_at is None:
            self.last_progress = now
        return msg.msn

    @property
    def rto(self) -> float:
        """The local ACK timeout, doubled on each retry."""
        return min(self.cfg.max_rto * 8, self.cfg.roce_timeout * (2 ** self.retries))

    def _opcode(self, msg: Message, offset: int) -> int:
        first, last = offset == 0, offset + self.cfg.pmtu >= msg.size
        if first and last:
            return Opcode.RC_WRITE_ONLY
        if first:
            return Opcode.RC_WRITE_FIRST
        if last:
            return Opcode.RC_WRITE_LAST_IMM if msg.imm is not None else Opcode.RC_WRITE_LAST
        return Opcode.RC_WRITE_MIDDLE

    def packets_to_send(self, now: float, budget: int | None = None) -> list[tuple[int, bytes]]:
        out = list(self.control)
        self.control.clear()
        if self._failed:
            return out
        e = self.ev
        p = e.path
        left = 1 << 30 if budget is None else budget
        while (self.send_psn < self.next_psn and self.send_psn < self.una + self.cfg.roce_window
               and left > 0):
            left -= 1
            msg, offset, length = self.packets[self.send_psn - self.first_unacked]
            op = self._opcode(msg, offset)
            headers: dict[str, dict[str, int]] = {}
            if op in (Opcode.RC_WRITE_FIRST, Opcode.RC_WRITE_ONLY):
                headers["RETH"] = {"va": msg.va, "rkey": msg.rkey, "dmalen": msg.size}
            if op == Opcode.RC_WRITE_LAST_IMM:
                headers["ImmDt"] = {"imm": msg.imm or 0}
            last = offset + length >= msg.size
            pkt = self.wire.encode(p.src, p.container, delivered=p.delivered, sport=e.ev >> 16,
                               flow_label=e.ev & 0xFFFF, dscp=Dscp.NO_TRIM,
                               ecn=ECT0 if self.cfg.roce_dcqcn else 0,
                               bth={"opcode": op, "dqpn": self.remote_qpn,
                                    "psn": self.send_psn & PSN_MASK, "ackreq": int(last)},
                               headers=headers, payload=bytes(msg.data[offset:offset + length]))
            out.append((e.ev, pkt))
            self.stats.per_ev[e.ev] += 1
            self.stats.tx_data += 1
            self.stats.tx_bytes += length
            self.tx_trace.record(now, e.ev, self.send_psn < self.max_sent)
            if self.send_psn < self.max_sent:
                self.stats.retransmits += 1
            self.send_psn += 1
            self.max_sent = max(self.max_sent, self.send_psn)
            if self.timeout_at is None:
                self.timeout_at = now + self.rto
        return out

    def _on_ack(self, d: codec.Decoded, now: float) -> None:
        a = d.headers["AETH"]
        psn = unwrap(d.psn, self.una)
        if a["syndrome"] == SYNDROME_NAK_PSN:
            self.stats.nacks_rx += 1
            self.send_psn = max(self.una, min(psn, self.send_psn))  # go back N
            return
        if a["syndrome"] == SYNDROME_NAK_ACCESS:  # refused: the QP fails on it
            self.stats.remote_access_naks += 1
            self._failed = True
            self.timeout_at = None
            return
        self.stats.sacks_rx += 1
        if psn + 1 > self.una:
            self.una = min(psn + 1, self.next_psn)
            self.send_psn = max(self.send_psn, self.una)
            self.last_progress = now
            self.retries = 0
            self.failing_since = None
            self.timeout_at = now + self.rto if self.una < self.send_psn else None
            while self.messages and (m := self.messages[0]).first_psn + m.npkts <= self.una:
                self._events.append(self.messages.popleft().complete(now))
            while self.first_unacked < self.una:
                self.packets.popleft()
                self.first_unacked += 1

    def _ack(self, syndrome: int, psn: int) -> None:
        e = self.ev
        p = e.path
        pkt = self.wire.encode(p.src, p.container, delivered=p.delivered, sport=e.ev >> 16,
                           flow_label=e.ev & 0xFFFF, dscp=Dscp.CONTROL, ecn=0,
                           bth={"opcode": Opcode.RC_ACK, "dqpn": self.remote_qpn,
                                "psn": psn & PSN_MASK},
                           headers={"AETH": {"syndrome": syndrome, "msn": self.rx_msn}})
        self.control.append((e.ev, pkt))
        if syndrome == SYNDROME_ACK:
            self.stats.sacks_tx += 1
        else:
            self.stats.nacks_tx += 1

    def _on_data(self, d: codec.Decoded, now: float) -> None:
        psn = unwrap(d.psn, self.rx_expected)
        if psn < self.rx_expected:
            self.stats.rx_dup += 1
            # The requester keeps resending what we acknowledged: our ACKs are lost on
            # our own hashed path. Routing reconverges for this direction too.
            if self.ack_failing_since is None:
                self.ack_failing_since = now
            elif now - self.ack_failing_since >= self.cfg.roce_reconvergence:
                self._rehash(now)
                self.ack_failing_since = None
            self._ack(SYNDROME_ACK, self.rx_expected - 1)
            return
        self.ack_failing_since = None
        if psn > self.rx_expected:
            self.stats.dropped["out_of_order"] += 1
            if self.nak_sent_for != self.rx_expected:
                self.nak_sent_for = self.rx_expected
                self._ack(SYNDROME_NAK_PSN, self.rx_expected)
            return
        op = d.opcode
        if "RETH" in d.headers:
            r = d.headers["RETH"]
            mr = self.memory.check(r["rkey"], r["va"], r["dmalen"])
            if isinstance(mr, str):
                self.stats.dropped[mr] += 1
                self._ack(SYNDROME_NAK_ACCESS, d.psn)  # refused, at its PSN
                return
            self.rx_mr, self.rx_va, self.rx_len, self.rx_got = mr, r["va"], r["dmalen"], 0
        if self.rx_mr is None or self.rx_got + len(d.payload) > self.rx_len:
            self.stats.dropped["no_message"] += 1
            return
        self.rx_mr.write(self.rx_va + self.rx_got, d.payload)
        self.rx_got += len(d.payload)
        self.rx_expected += 1
        self.stats.rx_data += 1
        self.stats.rx_bytes += len(d.payload)
        self.unacked += 1
        done = op in (Opcode.RC_WRITE_LAST, Opcode.RC_WRITE_LAST_IMM, Opcode.RC_WRITE_ONLY)
        if done:
            imm = d.headers.get("ImmDt", {}).get("imm")
            self._events.append(MessageReceived(self.rx_msn, imm, now))
            self.rx_msn += 1
            self.rx_mr = None
        if done or self.unacked >= self.cfg.roce_ack_every:
            self.unacked = 0
            self._ack(SYNDROME_ACK, self.rx_expected - 1)

    def receive_decoded(self, d: codec.Decoded, now: float) -> None:
        if d.bth["dqpn"] != self.local_qpn:
            self.stats.dropped["wrong_qp"] += 1
        elif d.opcode in ROCE_DATA:
            self._on_data(d, now)
        elif d.opcode == Opcode.RC_ACK:
            self._on_ack(d, now)
        else:
            self.stats.dropped["unexpected_opcode"] += 1

    def timer(self, now: float) -> None:
        if self.timeout_at is None or now < self.timeout_at or self._failed:
            return
        self.stats.rtos += 1
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
        old = self.paths[self.path_index]
        self.path_index = (self.path_index + 1) % len(self.paths)
        self._events.append(PathRehashed(now, old, self.paths[self.path_index]))

    def next_timer(self) -> float | None:
        return None if self._failed else self.timeout_at

    def port_status(self, planes_up: set[int], now: float) -> None:
        """An RC QP has no port status protocol: it learns of a dead path from its ACK
        timeout and is moved by routing reconvergence."""

    @property
    def busy(self) -> bool:
        return bool(self.control) or (not self._failed and self.una < self.next_psn)

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
                "path": f"0x{self.paths[self.path_index]:08x}",
                "next_timer_in": (self.next_timer() or now) - now,
                "control": len(self.control)}
