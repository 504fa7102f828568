"""The MRC connection: a sans-IO state machine for one QP toward one peer.

Both roles live in one object, like aioquic's QuicConnection: as requester it
segments posted WRITEs and sprays them over the EV profile; as responder it hands
every data packet to the compiled data path (`datapath.Responder`, responder.c),
which validates it, places its payload at the RETH address, keeps the PSN bitmap and
frames SACK/NACK/ACK at the configured cadence. The policy here sees the responder
per completed message and per control packet, never per payload byte: it chooses
the EVs control packets go on and answers probes and endpoint requests.
It never reads a clock: every entry point takes `now`.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass

from mrcemu import datapath
from mrcemu.transport.base import PSN_MASK, ConnectionBase, Message, Stats, unwrap
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import EvStateChanged, MessageReceived
from mrcemu.transport.evs import Ev, EvProfile
from mrcemu.transport.memory import MemoryTable
from mrcemu.transport.nscc import Nscc
from mrcemu.transport.trace import TxTrace
from mrcemu.wire import codec, layout
from mrcemu.wire.constants import (
    ENDPOINT_DQPN,
    EV_HIGH_HALF_IN_SPORT,
    MRC_DATA,
    PROBE_DSCP,
    RCVD_BYTES_UNIT,
    TIMESTAMP_UNIT,
    Dscp,
    EndpointOp,
    NackReason,
    Opcode,
    SackMark,
    ev_split,
    planes_in_mask,
    port_status_mask,
)

ECT0 = 0b10
SILENT_AFTER = 3  # packets unanswered on an EV before its silence can be judged
# ACKNOWLEDGE's AETH syndrome: an ACK without credit count, as IBTA spells it.
ACK_SYNDROME = 0x1F


def timestamp(now: float) -> int:
    """A 16-bit wire timestamp (TSETH, PETH, ERTH): `now` in TIMESTAMP_UNIT ticks. It
    wraps every 8.4 ms, so it is echoed for the reader, never used to time a path here."""
    return int(now / TIMESTAMP_UNIT) & 0xFFFF


@dataclass
class Outstanding:
    psn: int
    msg: Message
    offset: int
    length: int
    ev: int
    sent_time: float
    retx: int = 0
    lost: bool = False
    first_ev: int = 0  # the EV of the original transmission
    lost_ev: int = -1  # the EV of the first copy, if it was declared lost; when it left
    lost_sent: float = -1.0


class MrcConnection(ConnectionBase):
    def __init__(self, cfg: TransportConfig, profile: EvProfile, local_qpn: int,
                 remote_qpn: int, memory: MemoryTable | None = None) -> None:
        self.cfg = cfg
        self.profile = profile
        self.local_qpn, self.remote_qpn = local_qpn, remote_qpn
        self.memory = memory or MemoryTable()
        self._stats = Stats()
        self.tx_trace = TxTrace()
        super().__init__()
        self.profile.emit = self._on_profile_change
        # requester
        self.next_psn = 0
        self.next_msn = 0
        self.una = 0  # lowest PSN not yet acknowledged
        self.outstanding: OrderedDict[int, Outstanding] = OrderedDict()  # in send order
        self.pending: deque[tuple[Message, int, int]] = deque()  # (msg, offset, length) unsent
        self.rtx_queue: deque[int] = deque()
        self.inflight = 0
        self.cc = Nscc(cfg.init_cwnd, cfg.pmtu, cfg.min_cwnd, cfg.max_cwnd, cfg.target_delay)
        self.srtt: float | None = None
        self.last_sack = -1.0
        self.latest_acked_sent = -1.0  # send time of the latest-sent packet acked so far
        self.backoff = 1  # RTO multiplier: doubles on each RTO round, reset by progress
        self.rttvar = 0.0
        self.recent_losses: deque[tuple[float, int]] = deque()  # confirmed: (when, EV)
        self.suspects: list[tuple[int, float, float]] = []  # (EV, sent, when): for timer()
        # EVs with enough packets unanswered to be judged silent: the timer looks at these
        # and not at every EV (a per-wakeup scan of hundreds of EVs was the core's largest
        # cost). Pruned as they are looked at.
        self.watch: dict[int, Ev] = {}
        self.messages: dict[int, Message] = {}  # posted and not yet complete
        # responder: the compiled data path, with control bodies from the codec's tables
        ids = {"spdcid": local_qpn & 0xFFFF, "dpdcid": remote_qpn & 0xFFFF}
        self.rx = datapath.Responder(
            local_qpn, remote_qpn, cfg.rcv_window, cfg.sack_every, cfg.sack_delay,
            self.memory.native,
            codec.body({"opcode": Opcode.RELIABILITY_SACK, "dqpn": remote_qpn},
                       {"SETH": ids, "CC_STATE": {}}),
            codec.body({"opcode": Opcode.RELIABILITY_NACK, "dqpn": remote_qpn},
                       {"NETH": ids}),
            codec.body({"opcode": Opcode.ACKNOWLEDGE, "dqpn": remote_qpn},
                       {"AETH": {"syndrome": ACK_SYNDROME}}),
            (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP, NackReason.PSN_OOR_WINDOW,
             SackMark.NONE, SackMark.SKIP_ONCE, ACK_SYNDROME, EV_HIGH_HALF_IN_SPORT,
             RCVD_BYTES_UNIT))
        self._paths_dirty = True  # the control EVs the responder uses are stale
        # Data bodies per opcode with every per-packet field zero: the compiled framing
        # writes those by name (wire.frame_data), the rest is the codec's.
        self._data_templates = {
            op: codec.data_body(opcode=op, dqpn=remote_qpn, psn=0, msn=0, va=0, rkey=0,
                                dmalen=0, timestamp=0,
                                imm=0 if op in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM)
                                else None)
            for op in MRC_DATA}
        # output
        self.control: deque[tuple[int, bytes]] = deque()
        self.endpoint_seq = 0

    # ---- requester -------------------------------------------------------
    def post_write(self, data: bytes | bytearray | memoryview, remote_va: int, rkey: int,
                   now: float, imm: int | None = None) -> int:
        mv = memoryview(data)
        pmtu = self.cfg.pmtu
        if self.idle:
            # An idle connection's window says nothing about the network now: restart it
            # (and its backoff) rather than burst a stale window into it.
            self.cc.cwnd = min(self.cc.cwnd, self.cfg.init_cwnd)
            self.backoff = 1
            for e in self.profile.evs.values():
                e.skip_len = 1
        npkts = max(1, -(-len(mv) // pmtu))
        msg = Message(self.next_msn, remote_va, rkey, mv, self.next_psn, npkts, imm,
                      posted_at=now)
        self.messages[msg.msn] = msg
        self.next_msn += 1
        for i in range(npkts):
            self.pending.append((msg, i * pmtu, min(pmtu, len(mv) - i * pmtu)))
        self.next_psn += npkts
        return msg.msn

    @property
    def rto(self) -> float:
        base = self.cfg.min_rto if self.srtt is None else max(
            self.cfg.min_rto, self.srtt + 4 * self.rttvar)
        return min(self.cfg.max_rto, base * self.backoff)

    def _opcode(self, msg: Message, offset: int) -> int:
        last = offset + self.cfg.pmtu >= msg.size
        if offset == 0 and last:
            return Opcode.WRITE_ONLY_IMM if msg.imm is not None else Opcode.WRITE_ONLY
        if offset == 0:
            return Opcode.WRITE_FIRST
        if last:
            return Opcode.WRITE_LAST_IMM if msg.imm is not None else Opcode.WRITE_LAST
        return Opcode.WRITE_MIDDLE

    def _data_packet(self, e: Ev, psn: int, msg: Message, offset: int, length: int,
                     rtx: bool, now: float) -> bytes:
        p = e.path
        op = self._opcode(msg, offset)
        sport, flow = ev_split(e.ev)
        # One positional call (C in the data path), no per-packet dict of headers.
        return self.wire.frame_data(
            self._data_templates[op], p.src, p.delivered, p.container, sport, flow,
            ((Dscp.TRIMMABLE_RETX if rtx else Dscp.TRIMMABLE) << 2) | ECT0,
            psn & PSN_MASK, msg.msn & 0xFFFF, msg.va + offset, msg.rkey, msg.size,
            int(offset + length >= msg.size), int(rtx), timestamp(now), msg.imm or 0,
            msg.data[offset:offset + length])

    def _send(self, out: list[tuple[int, bytes]], now: float, o: Outstanding, rtx: bool) -> bool:
        e = self._rtx_ev(o, now) if rtx else self.profile.next_ev()
        if e is None:
            return False
        if o.retx == 0 and not rtx:
            o.first_ev = e.ev
        o.ev, o.sent_time, o.lost = e.ev, now, False
        out.append((e.ev, self._data_packet(e, o.psn, o.msg, o.offset, o.length, rtx, now)))
        if e.silent_since is None:
            e.silent_since = now
        e.unanswered += 1
        if e.unanswered == SILENT_AFTER:
            self.watch[e.ev] = e
        e.sent += 1
        e.sent_bytes += o.length
        self._stats.per_ev[e.ev] += 1
        self._stats.tx_data += 1
        self._stats.tx_bytes += o.length
        self.tx_trace.record(now, e.ev, rtx)
        return True

    def _rtx_ev(self, o: Outstanding, now: float) -> Ev | None:
        """A retransmission goes on another path than the one that lost it, and not on
        one silent for an RTO: resending into the same hole, with the RTO doubling each
        time, is how a tail packet stalls a message for seconds."""
        first = None
        for _ in range(len(self.profile.evs)):
            e = self.profile.next_ev()
            if e is None:
                return None
            if first is None:
                first = e
            elif e is first:
                break
            silent = e.silent_since is not None and now - e.silent_since >= self.rto / self.backoff
            if e.ev != o.ev and e.ev != o.first_ev and not silent:
                return e
        return first

    def packets_to_send(self, now: float, budget: int | None = None) -> list[tuple[int, bytes]]:
        """Control packets, then retransmissions, then new data: at most `budget` data
        packets (the I/O shell's pacing), within the congestion and PSN windows."""
        out: list[tuple[int, bytes]] = self.rx.take_control() if self.rx.pending else []
        out.extend(self.control)
        self.control.clear()
        left = 1 << 30 if budget is None else budget
        while self.rtx_queue and left > 0:
            psn = self.rtx_queue[0]
            o = self.outstanding.get(psn)
            if o is None or not o.lost:
                self.rtx_queue.popleft()
                continue
            if self.inflight + o.length > self.cc.cwnd and self.inflight > 0:
                break
            self.outstanding.move_to_end(psn)
            if not self._send(out, now, o, rtx=True):
                break
            self.rtx_queue.popleft()
            o.retx += 1
            self.inflight += o.length
            self._stats.retransmits += 1
            left -= 1
        while self.pending and not self.rtx_queue and left > 0:
            msg, offset, length = self.pending[0]
            psn = msg.first_psn + offset // self.cfg.pmtu
            if psn >= self.una + self.cfg.rcv_window:
                break
            if self.inflight + length > self.cc.cwnd and self.inflight > 0:
                break
            o = Outstanding(psn, msg, offset, length, 0, now)
            if not self._send(out, now, o, rtx=False):
                break
            self.pending.popleft()
            self.outstanding[psn] = o
            self.inflight += length
            left -= 1
        return out

    def _acked(self, o: Outstanding, now: float) -> None:
        del self.outstanding[o.psn]
        if not o.lost:
            self.inflight -= o.length
        # Which copy arrived? An ack sooner after a retransmission than the path could
        # carry it answers the original (a spurious retransmission): credit that EV.
        ev = o.ev
        if o.retx and now - o.sent_time < 0.8 * self.cc.base_rtt:
            ev = o.first_ev
            self._stats.acks_credited_to_original += 1
        elif o.retx and o.lost_ev >= 0:
            # The retransmission arrived first: the first copy really was lost. Judging
            # the path now, not when RACK or the timer guessed, keeps packets that were
            # merely late behind a queue from blaming it.
            self._blame_loss(o.lost_ev, o.lost_sent, now)
        e = self.profile.evs.get(ev)
        if e is not None:
            e.last_feedback, e.silent_since, e.unanswered = now, None, 0
            if ev == o.ev:  # the copy we know the send time of
                e.heard_sent = max(e.heard_sent, o.sent_time)
        o.msg.acked += 1
        if o.msg.acked == o.msg.npkts and o.msg.done_at is None:
            self._events.append(o.msg.complete(now))
            self.messages.pop(o.msg.msn, None)

    def _cumulative(self, cack: int) -> list[Outstanding]:
        """The outstanding packets a cumulative acknowledgement up to `cack` (the first
        PSN not yet received) newly covers; `una` moves up to it."""
        if cack <= self.una:
            return []
        newly = [o for psn in range(self.una, min(cack, self.next_psn))
                 if (o := self.outstanding.get(psn)) is not None]
        self.una = cack
        return newly

    def _on_sack(self, s: dict[str, int], now: float) -> None:
        self._stats.sacks_rx += 1
        self.last_sack = now
        cack = unwrap(s["cack_psn"], self.una)
        newly = self._cumulative(cack)
        seen = {o.psn for o in newly}
        base = cack + s["sack_offset"]
        bm = s["sack_bitmap"]
        while bm:
            low = bm & -bm
            psn = base + low.bit_length() - 1
            o = self.outstanding.get(psn)
            if o is not None and psn not in seen:
                newly.append(o)
                seen.add(psn)
            bm ^= low
        # With pr = 1, ack_psn_offset is a probe_id, not a trigger PSN.
        trigger = None if s["pr"] else cack + s["ack_psn_offset"]
        rtt = None
        t = None if trigger is None else self.outstanding.get(trigger)
        if t is not None and t.retx == 0 and t in newly:
            rtt = now - t.sent_time
            if self.srtt is None:
                self.srtt, self.rttvar = rtt, rtt / 2
            else:
                self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
                self.srtt = 0.875 * self.srtt + 0.125 * rtt
        acked_bytes = sum(o.length for o in newly)
        if newly:
            self.backoff = 1
        latest = max((o.sent_time for o in newly), default=None)
        for o in newly:
            self._acked(o, now)
        m, ev = s["m"], s["entropy"]
        if s["pr"]:
            self._stats.probes_answered += 1
            self.profile.probe_answered(ev, now, marked=m != SackMark.NONE)
        elif m == SackMark.SKIP_ONCE:
            self.profile.skip(ev, now, "ECN echoed")
            if (marked := self.profile.evs.get(ev)) is not None:
                marked.last_congested = now
        elif m == SackMark.NONE:
            self.profile.clean_feedback(ev)
        elif m == SackMark.ALWAYS_SKIP:
            self.profile.assume_bad(ev, now, "SACK ALWAYS_SKIP")
        # The SACK's reflected EV carried the packet that triggered it: proof of life.
        r = self.profile.evs.get(ev)
        if r is not None:
            r.last_feedback, r.silent_since, r.unanswered = now, None, 0
        if not self.outstanding:
            for e in self.profile.evs.values():
                e.silent_since, e.unanswered = None, 0
        if latest is not None:
            self.latest_acked_sent = max(self.latest_acked_sent, latest)
        if acked_bytes:
            self.cc.on_ack(acked_bytes, rtt, m == SackMark.SKIP_ONCE, now,
                           self.srtt or self.cfg.min_rto)
        if latest is not None:
            # RACK: anything sent well before a packet that has arrived is lost.
            # Spraying reorders by up to a queue's depth, and trims (not timers) are how
            # MRC learns of congestion losses: be patient before calling a packet lost.
            reo = max(self.cfg.reorder_window, self.srtt or 0.0)
            for o in self.outstanding.values():
                if o.sent_time + reo >= latest:
                    break
                if not o.lost:
                    self._mark_lost(o)
                    self.cc.on_loss(now, self.srtt or self.cfg.min_rto)

    def _silent_too_long(self, e: Ev) -> float | None:
        """When EV `e` earns the "timeout with no SACK": several packets went out on it,
        the first a whole RTO ago, none has been heard of, and packets sent after it on
        other paths have arrived (a queue that delays every path alike is no EV's fault,
        and one packet whose copy was retransmitted elsewhere proves nothing). None if
        it cannot, whatever the clock says, until more feedback comes."""
        if (e.silent_since is None or e.unanswered < SILENT_AFTER
                or e.silent_since >= self.latest_acked_sent - self.cfg.reorder_window):
            return None
        limit = self.rto / self.backoff
        at = e.silent_since + limit
        if e.last_congested >= 0:  # see _trimmed_lately
            at = max(at, e.last_congested + 2 * limit)
        return at

    def _judge_silence(self, now: float) -> None:
        """Verdicts on silence, made only from timer(): the shell calls it after feeding
        every packet it has read. Judged per SACK, the first SACK of a stale backlog
        (read in port order, not send order) made every other path look silent."""
        for e in self._watched():
            at = self._silent_too_long(e)
            if at is not None and now >= at:
                e.silent_since, e.unanswered = None, 0
                self.profile.assume_bad(e.ev, now, "no feedback for an RTO")
        suspects, self.suspects = self.suspects, []
        window = self.rto / self.backoff
        for ev, sent, when in suspects:
            e = self.profile.evs.get(ev)
            others = {x for t, x in self.recent_losses if x != ev and abs(t - when) <= window}
            # Heard of since (late, not lost), or one of losses on several EVs at once
            # (an overloaded receiver drops on every path; a broken path loses alone).
            if e is None or e.heard_sent >= sent - window or len(others) >= 2:
                self._stats.losses_excused += 1
                continue
            self._stats.losses_blamed += 1
            self.profile.assume_bad(e.ev, now, "lost after an RTO unheard")

    def _watched(self) -> list[Ev]:
        """The EVs that may be silent too long, after dropping those heard from since."""
        gone = [ev for ev, e in self.watch.items()
                if e.silent_since is None or e.unanswered < SILENT_AFTER
                or self.profile.evs.get(ev) is not e]
        for ev in gone:
            del self.watch[ev]
        return list(self.watch.values())

    def _blame_loss(self, ev: int, sent: float, now: float) -> None:
        """A first copy sent on `ev` at `sent` was really lost, and the EV had delivered
        nothing sent in the RTO before it: the EV goes ASSUMED_BAD. An EV carries only a
        packet or two per message here, so the timeout rules (several silent packets)
        can take several iterations to fire.

        Excused: losses on an EV that was trimming or ECN-marking around then (late
        behind a queue), and losses that come with losses on several other EVs within
        an RTO (an overloaded receiver drops on every path; a broken path loses alone)."""
        window = self.rto / self.backoff
        while self.recent_losses and self.recent_losses[0][0] < now - window:
            self.recent_losses.popleft()
        self.recent_losses.append((now, ev))
        e = self.profile.evs.get(ev)
        if e is None or e.last_congested >= sent - 2 * window:
            self._stats.losses_excused += 1
            return
        # The rest is judged at the timer, once the shell has fed all it read: the EV's
        # own ack, or other EVs' losses, may sit unread behind this one.
        self.suspects.append((ev, sent, now))

    def _trimmed_lately(self, e: Ev, now: float) -> bool:
        """A path that trimmed or ECN-marked our packet within two RTOs is congested, not
        broken: its silence is a queue's, and trimming and ECN, not timeouts, are how MRC
        handles that."""
        return e.last_congested >= 0 and now - e.last_congested < 2 * self.rto / self.backoff

    def _mark_lost(self, o: Outstanding) -> None:
        o.lost = True
        if not o.retx:  # judge paths by first copies: a burst of retransmissions after
            o.lost_ev, o.lost_sent = o.ev, o.sent_time  # a failure queues everywhere
        self.inflight -= o.length
        self.rtx_queue.append(o.psn)

    def _on_ack(self, d: codec.Decoded, now: float) -> None:
        """A RoCE cumulative ACK: every PSN up to the BTH PSN has arrived."""
        self._stats.acks_rx += 1
        newly = self._cumulative(unwrap(d.psn, self.una) + 1)
        for o in newly:
            self._acked(o, now)
        if newly:
            self.backoff = 1
            self.latest_acked_sent = max(self.latest_acked_sent,
                                         max(o.sent_time for o in newly))
            self.cc.on_ack(sum(o.length for o in newly), None, False, now,
                           self.srtt or self.cfg.min_rto)

    def _on_nack(self, n: dict[str, int], now: float) -> None:
        self._stats.nacks_rx += 1
        psn = unwrap(n["nack_psn"], self.una)
        reason = n["nack_reason"]
        o = self.outstanding.get(psn)
        # A NACK crossed the network about a packet that crossed it too: proof of life.
        e = self.profile.evs.get(n["entropy"])
        if e is not None:
            e.last_feedback, e.silent_since, e.unanswered = now, None, 0
            if o is not None and o.ev == e.ev:
                e.heard_sent = max(e.heard_sent, o.sent_time)
            if reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
                e.last_congested = now
        if reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
            self._stats.trims_nacked += 1
            self.profile.skip(n["entropy"], now, "NACK trimmed")
            self.cc.on_loss(now, self.srtt or self.cfg.min_rto)  # a queue is full
            if o is not None and not o.lost:
                self._mark_lost(o)
                self.rtx_queue.rotate(1)  # to the front: retransmit at once
        elif o is not None and not o.lost:
            self._mark_lost(o)

    # ---- responder ---------------------------------------------------------
    def _control_ev(self) -> Ev | None:
        e = self.profile.next_ev()
        if e is None:  # nothing usable: any EV in a live plane beats silence
            for x in self.profile.evs.values():
                if x.path.plane not in self.profile.planes_down:
                    return x
        return e

    def _emit(self, opcode: int, headers: dict[str, dict[str, int]], psn: int,
              dqpn: int | None = None) -> bool:
        """One control packet on a control EV; False if no EV can carry it."""
        e = self._control_ev()
        if e is None:
            return False
        self.control.append((e.ev, self._packet(e, opcode, headers, psn, dqpn, Dscp.CONTROL)))
        return True

    def _packet(self, e: Ev, opcode: int, headers: dict[str, dict[str, int]], psn: int,
                dqpn: int | None, dscp: int) -> bytes:
        p = e.path
        sport, flow = ev_split(e.ev)
        return self.wire.encode(p.src, p.delivered, via=p.container, sport=sport,
                            flow_label=flow, dscp=dscp, ecn=0,
                            bth={"opcode": opcode, "psn": psn & PSN_MASK,
                                 "dqpn": self.remote_qpn if dqpn is None else dqpn},
                            headers=headers)

    def _on_profile_change(self, ev: EvStateChanged) -> None:
        self._events.append(ev)
        self._paths_dirty = True

    def _control_paths(self) -> None:
        """Hand the responder the EVs its SACK/NACK/ACKs go on, taken in turn: the
        usable ones, or, with none usable, any in a live plane (anything beats silence)."""
        evs = [e for e in self.profile.evs.values() if self.profile.usable(e)] or [
            e for e in self.profile.evs.values()
            if e.path.plane not in self.profile.planes_down]
        self.rx.set_paths([(e.ev, *ev_split(e.ev), e.path.src, e.path.delivered,
                            e.path.container) for e in evs])
        self._paths_dirty = False

    def _completions(self, now: float) -> None:
        for msn, imm in self.rx.take_completions():
            self._events.append(MessageReceived(msn, imm, now))

    def receive_frame(self, pkt: bytes | memoryview, now: float,
                      via: bytes | None = None) -> None:
        """One packet as it arrived (from its IPv6 header), `via` the address its outer
        DA must be. Data for this QP is the compiled responder's alone; the rest is
        decoded for the policy. Raises DecodeError for what is not a packet we accept."""
        if self._paths_dirty:
            self._control_paths()
        r = self.rx.rx(pkt, now, via)
        if r is None:
            return
        if type(r) is int:
            self._completions(now)
        else:
            self.receive_decoded(r, now)

    def _malformed(self, reason: str) -> None:
        self._stats.dropped[f"malformed_{reason}"] += 1  # not the synced `stats`

    @property
    def rx_bytes(self) -> int:
        return self.rx.rx_bytes

    @property
    def stats(self) -> Stats:
        """The requester's counters and the compiled responder's, read now."""
        s, c = self._stats, self.rx.counters()
        s.rx_data, s.rx_bytes, s.rx_dup = c["rx_data"], c["rx_bytes"], c["rx_dup"]
        s.sacks_tx, s.nacks_tx, s.acks_tx = c["sacks_tx"], c["nacks_tx"], c["acks_tx"]
        for reason, n in c["dropped"].items():  # the responder's own count, not a sum
            s.dropped[reason] = n
        if c["ctl_overflow"]:
            s.dropped["control_queue_full"] = c["ctl_overflow"]
        return s

    def _on_probe(self, d: codec.Decoded, now: float) -> None:
        # The EV answered is the probe's own (sport, flow label): PETH names none. The
        # answer is a SACK with pr = 1 and the probe_id in ack_psn_offset.
        p = d.headers["PETH"]
        self.rx.sack_probe(d.ev, layout.probe_id_as_offset(p["probe_id"]),
                           p["tx_timestamp"], now)

    def _on_endpoint(self, d: codec.Decoded, now: float) -> None:
        r = d.headers["ERTH"]
        if r["op"] == EndpointOp.PORT_STATUS_UPDATE:
            up = planes_in_mask(r["port_status_mask"], self.profile.planes)
            for plane in self.profile.planes:
                self.profile.set_plane(plane, plane in up, now)
        # The response echoes the op, the request id (BTH PSN) and the timestamp.
        self._emit(Opcode.ENDPOINT_RESPONSE, {"EETH": {
            "op": r["op"], "tx_timestamp": r["tx_timestamp"]}}, d.psn, dqpn=ENDPOINT_DQPN)

    # ---- entry points ------------------------------------------------------
    def receive_decoded(self, d: codec.Decoded, now: float) -> None:
        op = d.opcode
        # Endpoint requests are connectionless: the NIC hands them to the connection
        # with the sender, whose address it knows them by.
        connectionless = d.bth["dqpn"] == ENDPOINT_DQPN and op in (
            Opcode.ENDPOINT_REQUEST, Opcode.ENDPOINT_RESPONSE)
        if d.bth["dqpn"] != self.local_qpn and not connectionless:
            self._stats.dropped["wrong_qp"] += 1
            return
        if op in MRC_DATA:
            # Data is placed by the compiled responder from the packet's bytes, which a
            # Decoded no longer is: only receive()/receive_frame() take data.
            self._stats.dropped["data_without_frame"] += 1
        elif op == Opcode.RELIABILITY_SACK:
            self._on_sack(d.headers["SETH"], now)
        elif op == Opcode.RELIABILITY_NACK:
            self._on_nack(d.headers["NETH"], now)
        elif op == Opcode.ACKNOWLEDGE:
            self._on_ack(d, now)
        elif op == Opcode.RELIABILITY_PROBE_REQ:
            self._on_probe(d, now)
        elif op == Opcode.ENDPOINT_REQUEST:
            self._on_endpoint(d, now)
        elif op == Opcode.ENDPOINT_RESPONSE:
            pass
        else:
            self._stats.dropped["unexpected_opcode"] += 1

    def _rack_deadline(self, o: Outstanding) -> float:
        srtt = self.srtt or self.cfg.min_rto
        return o.sent_time + srtt + max(self.cfg.reorder_window, srtt)

    def timer(self, now: float) -> None:
        if self._paths_dirty:
            self._control_paths()
        self.rx.timer(now)
        self._judge_silence(now)
        # RACK's timer: a packet sent before one that has arrived is lost once it is a
        # round trip plus the reorder window old, even if no further ack comes to say
        # so. That is the tail of a message on a path that just died; waiting for the
        # RTO instead held every iteration barrier up by about half a second.
        rack_lost = False
        for o in self.outstanding.values():  # marking lost never removes an entry
            if o.sent_time >= self.latest_acked_sent or self._rack_deadline(o) > now:
                break
            if not o.lost:
                self._mark_lost(o)
                self._stats.rack_timer_losses += 1
                rack_lost = True
        if rack_lost:
            self.cc.on_loss(now, self.srtt or self.cfg.min_rto)
        rto = self.rto
        fired = False
        for o in self.outstanding.values():
            if o.sent_time + rto > now:
                break
            if o.lost:
                continue
            fired = True
            self._stats.rtos += 1
            e = self.profile.evs.get(o.ev)
            # Blame the EV only if packets sent after this one, on other paths, have
            # arrived: silence that covers them too is the peer (or us) stalling, not
            # this path. (A SACK merely arriving after the send is not enough: one sent
            # just before a receiver's stall would blame every path at once.)
            if (e is not None and e.last_feedback < o.sent_time
                    and o.sent_time < self.latest_acked_sent - self.cfg.reorder_window
                    and not self._trimmed_lately(e, now)):
                self.profile.assume_bad(o.ev, now, "RTO without feedback")
            self._mark_lost(o)
        if fired:
            self.cc.on_loss(now, self.srtt or self.cfg.min_rto)
            self.backoff = min(self.backoff * 2, 64)
        for e in self.profile.needs_probe(now, self.cfg.probe_interval):
            e.last_probe = now
            e.probe_seq += 1
            # In the data class, to test the path data takes. It consumes no PSN: BTH
            # carries the lowest unacknowledged one, for the reader.
            peth = {"probe_id": e.probe_seq & 0xFFFF, "spdcid": self.local_qpn & 0xFFFF,
                    "dpdcid": self.remote_qpn & 0xFFFF, "tx_timestamp": timestamp(now)}
            self.control.append((e.ev, self._packet(e, Opcode.RELIABILITY_PROBE_REQ,
                                                    {"PETH": peth}, self.una, None,
                                                    PROBE_DSCP)))
            self._stats.probes_tx += 1

    def next_timer(self) -> float | None:
        times = []
        if (due := self.rx.sack_due) is not None:
            times.append(due)
        for o in self.outstanding.values():
            if not o.lost:
                times.append(o.sent_time + self.rto)
                if o.sent_time < self.latest_acked_sent:
                    times.append(self._rack_deadline(o))
                break
        if self.suspects:
            times.append(min(when for _, _, when in self.suspects))  # at once
        for e in self._watched():
            if (at := self._silent_too_long(e)) is not None:
                times.append(at)
        bad = [e.last_probe + self.cfg.probe_interval for e in
               self.profile.needs_probe(float("inf"), 0.0)]
        if bad:
            times.append(min(bad))
        return min(times) if times else None

    def port_status(self, planes_up: set[int], now: float) -> None:
        """Our own port state changed: stop using dead planes and tell the peer."""
        for plane in self.profile.planes:
            self.profile.set_plane(plane, plane in planes_up, now)
        self.endpoint_seq += 1
        self._emit(Opcode.ENDPOINT_REQUEST, {"ERTH": {
            "op": EndpointOp.PORT_STATUS_UPDATE, "port_status_mask": port_status_mask(planes_up),
            "tx_timestamp": timestamp(now)}}, self.endpoint_seq & 0xFFFF, dqpn=ENDPOINT_DQPN)

    @property
    def idle(self) -> bool:
        return not self.pending and not self.outstanding

    @property
    def failed(self) -> bool:
        return False  # MRC never gives up on a QP: it probes its paths back

    @property
    def cwnd(self) -> int:
        return self.cc.cwnd

    def message(self, msn: int) -> Message | None:
        return self.messages.get(msn)

    def unfinished(self) -> Iterable[Message]:
        return self.messages.values()

    def snapshot(self, now: float) -> dict:
        """The requester's insides, for diagnosing a stall."""
        live = [o for o in self.outstanding.values() if not o.lost]
        return {"outstanding": len(self.outstanding), "live": len(live),
                "rtx_queue": len(self.rtx_queue), "pending": len(self.pending),
                "inflight": self.inflight, "cwnd": self.cc.cwnd, "backoff": self.backoff,
                "rto": self.rto, "srtt": self.srtt, "una": self.una,
                "oldest_age": now - min((o.sent_time for o in live), default=now),
                "oldest_evs": [f"0x{o.ev:08x}" for o in live][:4],
                "next_timer_in": (self.next_timer() or now) - now,
                "usable": self.profile.count_usable(), "control": len(self.control),
                "responder": self.rx.snapshot}

    @property
    def busy(self) -> bool:
        """Anything to send or time: the I/O shell skips connections that are not."""
        return bool(self.control or self.pending or self.outstanding or self.rtx_queue
                    or self.rx.pending or self.rx.sack_due is not None
                    or self.profile.bad_count)
