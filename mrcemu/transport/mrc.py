"""The MRC connection: a sans-IO state machine for one QP toward one peer.

Both roles live in one object, like aioquic's QuicConnection, and each role's
per-packet work is the compiled data path's:
- as requester, `datapath.Sender` (sender.c) segments posted WRITEs, frames each packet
  onto the next EV of the spraying order the profile hands it, keeps the per-PSN send
  records and resolves SACKs, NACKs, per-EV order, the overdue scan and the RTO against
  them;
- as responder, `datapath.Responder` (responder.c) validates each data packet, places
  its payload at the RETH address, keeps the PSN bitmap and frames SACK/NACK/ACK at the
  configured cadence.
The policy here works per SACK, per NACK, per timer and per completed message, never
per data packet: the spraying order, congestion control, RTT estimates, probes and
endpoint requests. What the data path found about each packet (lost, trimmed where,
CE echoed) goes to the path monitor (pathmon.py), which alone decides EV states.
It never reads a clock: every entry point takes `now`.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass

from mrcemu import datapath
from mrcemu.transport.base import ConnectionBase, Message, Stats, put_frames, unwrap
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import (
    REMOTE_ACCESS,
    RETRY_EXCEEDED,
    ConnectionFailed,
    EvStateChanged,
    MessageFailed,
    MessageReceived,
    refused_why,
)
from mrcemu.transport.evs import Ev, EvProfile, EvState
from mrcemu.transport.memory import MemoryTable
from mrcemu.transport.pathmon import LOSS_HOLE, LOSS_OVERDUE, UNANSWERED, PathMonitor
from mrcemu.transport.profiles import first_qpn
from mrcemu.transport.reverse import ReverseEvs
from mrcemu.transport.trace import TxTrace
from mrcemu.wire import codec, layout
from mrcemu.wire.constants import (
    ENDPOINT_DQPN,
    EV_HIGH_HALF_IN_SPORT,
    MRC_DATA,
    PROBE_DSCP,
    PSN_MASK,
    RCVD_BYTES_UNIT,
    TIMESTAMP_UNIT,
    Dscp,
    EndpointOp,
    NackReason,
    Opcode,
    SackMark,
    Syndrome,
    ev_split,
    planes_in_mask,
    port_status_mask,
)

ECT0 = 0b10
# ACKNOWLEDGE's AETH syndrome: an ACK without credit count, as IBTA spells it.
ACK_SYNDROME = 0x1F


def reports_missing(sack: dict[str, int], psn: int) -> bool:
    """Whether a SACK says `psn` had not arrived: it is the cumulative PSN, or lies in
    the bitmap's 64 with its bit clear (between the two, a SACK says nothing)."""
    off = (psn - sack["cack_psn"]) & PSN_MASK
    return off == 0 or (sack["sack_offset"] <= off < sack["sack_offset"] + 64
                        and not (sack["sack_bitmap"] >> (off - sack["sack_offset"])) & 1)


def timestamp(now: float) -> int:
    """A 16-bit wire timestamp (TSETH, PETH, ERTH): `now` in TIMESTAMP_UNIT ticks. It
    wraps every 8.4 ms, so it is echoed for the reader, never used to time a path here."""
    return int(now / TIMESTAMP_UNIT) & 0xFFFF


# Copies of one port-status update at most, a probe round trip apart, while unanswered.
PORT_UPDATE_COPIES = 8


@dataclass(slots=True)
class _PortUpdate:
    """Our last port-status update, until the peer answers it."""

    seq: int  # its request id, which the peer's ENDPOINT_RESPONSE echoes in the PSN
    planes_up: frozenset[int]
    last_sent: float  # when its last copy went
    copies: int = 0  # copies sent


class MrcConnection(ConnectionBase):
    def __init__(self, cfg: TransportConfig, profile: EvProfile, local_qpn: int,
                 remote_qpn: int, memory: MemoryTable | None = None,
                 known_rtt: float = 0.0) -> None:
        """`known_rtt`: the pair's fixed round trip where an unloaded one reads it
        (`cfg.rtt_known`; the factory passes it), NSCC's starting base RTT; 0: unknown."""
        self.cfg = cfg
        self.profile = profile
        self.local_qpn, self.remote_qpn = local_qpn, remote_qpn
        self.memory = memory or MemoryTable()
        self._stats = Stats()
        self._trace = TxTrace()
        super().__init__()
        self.profile.emit = self._on_profile_change
        self.health = PathMonitor(profile, cfg)
        # B9: control packets go on a small reverse set, one EV a plane (reverse.py).
        # seeded by the pair's first QPN: the same choices however often it was made again
        self.reverse = ReverseEvs(profile, random.Random(cfg.seed * 1_000_003
                                                         + first_qpn(local_qpn)))
        self._rx_probed = 0  # the data count at the last reverse probe (or when none was due)
        # requester: the compiled sender, framing from the codec's per-opcode bodies with
        # every per-packet field zero (it writes those by name)
        self.next_msn = 0
        templates = tuple(
            codec.data_body(opcode=op, dqpn=remote_qpn, psn=0, msn=0, va=0, rkey=0,
                            dmalen=0, timestamp=0,
                            imm=0 if op in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM)
                            else None)
            for op in (Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM, Opcode.WRITE_FIRST,
                       Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM))
        self.tx = datapath.Sender(
            cfg.rcv_window, cfg.pmtu, templates,
            ((Dscp.TRIMMABLE << 2) | ECT0, (Dscp.TRIMMABLE_RETX << 2) | ECT0, TIMESTAMP_UNIT),
            self._rotate)
        self._evs = list(self.profile.evs.values())  # by the sender's path index
        self.tx.set_paths([(e.fb, e.ev, *ev_split(e.ev), e.path.src, e.path.delivered,
                            e.path.container) for e in self._evs])
        self.profile.on_rotation = self._spray_order
        # The window, the RTT estimate and the RTO backoff live in the compiled sender:
        # its SACK path moves them without a Python call (sender.c: mrc_tx_sack).
        self.cc = datapath.Nscc(cfg.init_cwnd, cfg.pmtu, cfg.min_cwnd, cfg.max_cwnd,
                                cfg.target_delay, cfg.network_rtt, cfg.bdp_bytes,
                                cfg.nack_delay, known_rtt)
        self.tx.use_cc(self.cc, cfg.min_rto, cfg.max_rto, cfg.ack_slack, cfg.stop_deviations,
                       cfg.overdue_deviations)
        self.messages: dict[int, Message] = {}  # posted and not yet complete
        self._refused: set[int] = set()  # of those, the ones the peer refused
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
             SackMark.NONE, SackMark.SKIP_ONCE, ACK_SYNDROME, Syndrome.NAK_REMOTE_ACCESS,
             EV_HIGH_HALF_IN_SPORT,
             RCVD_BYTES_UNIT))
        self._paths_dirty = True  # the control EVs the responder uses are stale
        self._control_down: set[int] = set()  # the planes down when they were last set
        # output
        self.control: deque[tuple[int, bytes]] = deque()
        self.endpoint_seq = 0
        # Our last port-status update until the peer answers it; sent again meanwhile
        # (_port_update_due)
        self._port_update: _PortUpdate | None = None
        self._busy_since = float("-inf")  # when the last post found us idle
        # The retry limit (config.retry_budget): the QP fails once nothing at all has
        # been acknowledged for this long while it has requests out. A program's QP may
        # set its own (set_retry_budget).
        self.retry_budget = cfg.retry_budget
        self._retry_at = float("inf")  # when the budget runs out, as last computed
        self._failed: ConnectionFailed | None = None

    # ---- requester -------------------------------------------------------
    def post_write(self, data: bytes | bytearray | memoryview, remote_va: int, rkey: int,
                   now: float, imm: int | None = None) -> int:
        mv = memoryview(data)
        if self.idle:
            self._busy_since = now
            # An idle connection's window says nothing about the network now: restart it
            # (and its backoff) rather than burst a stale window into it.
            self.cc.cwnd = min(self.cc.cwnd, self.cfg.init_cwnd)
            self.backoff = 1
            for e in self.profile.evs.values():
                e.skip_len = 1
            if self.retry_budget is not None:
                self._retry_at = now + self.retry_budget
        npkts = max(1, -(-len(mv) // self.cfg.pmtu))
        first = self.tx.post(self.next_msn, remote_va, rkey, mv, imm)
        msg = Message(self.next_msn, remote_va, rkey, mv, first, npkts, imm, posted_at=now)
        self.messages[msg.msn] = msg
        self.next_msn += 1
        return msg.msn

    def _spray_order(self, order: list[int]) -> None:
        """A new rotation: the sender sprays by it (EVs named by its path index)."""
        evs = self.profile.evs
        self.tx.set_order([evs[ev].fb.index for ev in order])

    @property
    def una(self) -> int:
        """The lowest PSN not yet acknowledged."""
        return self.tx.una

    @property
    def next_psn(self) -> int:
        return self.tx.next_psn

    @property
    def inflight(self) -> int:
        return self.tx.inflight

    @property
    def latest_acked_sent(self) -> float:
        """Send time of the latest-sent packet acked so far (-1: none)."""
        return self.tx.latest_acked_sent

    @property
    def tx_trace(self) -> TxTrace:
        """Every data packet sent, as the sender recorded it, read now."""
        self._trace.extend_raw(*self.tx.take_trace())
        return self._trace

    @property
    def srtt(self) -> float | None:
        t = self.tx.srtt_raw
        return None if t != t else t  # NaN: no sample yet

    @property
    def rttvar(self) -> float:
        return self.tx.rttvar

    @property
    def backoff(self) -> int:
        """The RTO multiplier: doubles on each RTO round, 1 again on progress."""
        return self.tx.backoff

    @backoff.setter
    def backoff(self, b: int) -> None:
        self.tx.backoff = b

    @property
    def rto(self) -> float:
        """max(min RTO, srtt + 4 rttvar), the minimum with no sample, times the backoff,
        capped at the maximum: computed by the sender, which holds all three."""
        return self.tx.timeout

    def packets_to_send(self, now: float, budget: int | None = None) -> list[tuple[int, bytes]]:
        """Control packets, then retransmissions, then new data: at most `budget` data
        packets (the I/O shell's pacing), within the congestion and PSN windows. A
        retransmission goes on another EV than the one that lost it, and not on one
        silent for an RTO (sender.c: rtx_ev)."""
        out: list[tuple[int, bytes]] = []
        self._output(out, now, 1 << 30 if budget is None else budget)
        return out

    def send_to(self, ports: datapath.Ports, now: float, budget: int) -> int:
        """packets_to_send, framed straight onto the NIC's port queues (no Python
        object per packet): how many frames were queued or lost at a full port."""
        return self._output(ports, now, budget)

    def _output(self, out: list[tuple[int, bytes]] | datapath.Ports, now: float,
              budget: int) -> int:
        """What packets_to_send says, into a list of (EV, frame) or onto the ports."""
        self.profile.now = now  # rotations start while sending: their changes' time
        self.tx.policy_wanted = 0
        self._reverse_upkeep(now)
        if self._paths_dirty:  # Ports.receive may answer for us before receive_frame
            self._control_paths()
        n = self.rx.take_control(out) if self.rx.pending else 0
        n += put_frames(out, self.control)
        self.control.clear()
        if (self.tx.pending or self.tx.rtx_queued) and self._failed is None:
            n += self.tx.send(out, now, budget, float(self.cc.cwnd), self.rto / self.backoff)
        return n

    def attach(self, ports: datapath.Ports) -> None:
        """Data for this QP goes to the compiled responder, and its unmarked SACKs to the
        compiled sender, inside Ports.receive."""
        ports.attach(self.local_qpn, self.rx, self.tx)

    def received(self, now: float) -> None:
        """The NIC's ports gave this QP's responder data, or its sender SACKs, directly:
        messages may have completed, and losses been confirmed."""
        self._completions(now)
        self._completed(now)

    def _completed(self, now: float) -> None:
        """Messages the sender saw fully acknowledged, the packets it found lost (not
        trimmed) and the EVs it found overdue, for the path monitor; and the stopped EVs
        heard from since."""
        for msn in self.tx.take_done():
            msg = self.messages.pop(msn, None)
            if msn in self._refused:  # its PSNs taken empty: it failed, as reported
                self._refused.discard(msn)
            elif msg is not None:
                msg.acked = msg.npkts
                self._events.append(msg.complete(now))
        for index, sent, how, psn in self.tx.take_losses():
            e = self._evs[index]
            if how == LOSS_HOLE:
                self.health.hole(e.ev, psn, sent, now)
            elif (self.health.overdue(e.ev, sent, now) if how == LOSS_OVERDUE
                  else self.health.timed_out(e.ev, sent, now)):
                # One probe in the control class, which crosses the path's queues in
                # their priority lane and so tells a broken path from a slow one within a
                # round trip; one in the data class, behind the EV's packets, whose answer
                # says whether the overdue one arrived (pathmon.py).
                self._send_probe(e, now, Dscp.CONTROL)
                self.health.probes_sent(e.ev, now, self._send_probe(e, now), psn)
                self._stats.probes_tx += 2
        self.health.heard(now)

    def _on_sack(self, s: dict[str, int], now: float) -> None:
        """A SACK the ports did not take whole: a marked one, or a probe's answer. The
        compiled sender does what any SACK does to the requester (records, RTT, window,
        RACK, the EV's proof of life); the verdicts on the EV are made here."""
        m, ev = s["m"], s["entropy"]
        if not self.tx.sack(s["cack_psn"], s["sack_offset"], s["sack_bitmap"],
                            s["ack_psn_offset"], ev, m, s["pr"], now):
            return  # it acknowledged PSNs never sent: not our peer's (stats: acks_beyond_sent)
        self._completed(now)
        if s["pr"]:
            self._stats.probes_answered += 1
            self.health.probe_answered(
                ev, now, m != SackMark.NONE, layout.probe_id_of(s),
                lambda psn: reports_missing(s, psn) and self.tx.is_outstanding(psn))
            if self.reverse.answered(ev, now):
                self._stats.reverse_adopted += 1
                self._paths_dirty = True
        elif m == SackMark.SKIP_ONCE:
            self.health.ce_echoed(ev, now)
        elif m == SackMark.ALWAYS_SKIP:
            self.health.remote_bad(ev, now)

    def _on_ack(self, d: codec.Decoded, now: float) -> None:
        """A RoCE cumulative ACK: every PSN up to the BTH PSN has arrived. Or, with the
        remote access NAK, the peer refused the packet at the BTH PSN."""
        if d.headers["AETH"]["syndrome"] == Syndrome.NAK_REMOTE_ACCESS:
            self._on_refused(unwrap(d.psn, self.una), now)
            return
        self._stats.acks_rx += 1
        newly, acked_bytes, _, _ = self.tx.ack((d.psn + 1) & PSN_MASK, 0, 0, None, now)
        self._completed(now)
        if newly:
            self.backoff = 1
            self.cc.on_ack(acked_bytes, None, False, now, self.tx.inflight)

    def _on_refused(self, psn: int, now: float) -> None:
        """The peer refused the WRITE the packet at `psn` is of: a key it does not know,
        or an address outside the region. It fails now (the program's QP with it); what
        of it is left goes empty, so that the peer takes its PSNs and the connection goes
        on for the writes behind it. A NAK is sent for every copy that comes: the later
        ones find the message refused already."""
        m = next((m for m in self.messages.values()
                  if m.first_psn <= psn < m.first_psn + m.npkts), None)
        if m is None or m.msn in self._refused:
            self._stats.dropped["stale_nak"] += 1
            return
        self._refused.add(m.msn)
        self._stats.remote_access_naks += 1
        self.tx.refuse(m.msn)
        self._events.append(MessageFailed(now, m.msn, REMOTE_ACCESS, refused_why(m.msn, psn)))

    def _on_nack(self, n: dict[str, int], now: float) -> None:
        self._stats.nacks_rx += 1
        reason = n["nack_reason"]
        trimmed = reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP)
        # A NACK crossed the network about a packet that crossed it too: proof of life
        # for its EV. The packet is lost; a trimmed one is retransmitted at once.
        e = self.profile.evs.get(n["entropy"])
        freed = self.tx.nack(n["nack_psn"], -1 if e is None else e.fb.index, now, trimmed)
        self.health.nacked(n["nack_psn"], n["entropy"] if trimmed else None)
        if trimmed:
            self._stats.trims_nacked += 1
            self.health.trimmed(n["entropy"], now, last_hop=reason == NackReason.TRIMMED_LASTHOP)
            if freed:  # 0: a stale NACK, about a copy no longer outstanding
                self.cc.on_nack(freed, now, self.tx.inflight)

    # ---- responder ---------------------------------------------------------
    def _control_ev(self) -> Ev | None:
        e = self.reverse.next()
        if e is None:  # no plane left in the set: any EV in a live plane beats silence
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

    def _rotate(self, now: float) -> bool:
        """The sender's next rotation, at its send's time (the NIC's loop may send
        without a Python call in between: the time is the sender's to give)."""
        self.profile.now = now
        return self.profile.new_rotation()

    def _on_profile_change(self, ev: EvStateChanged) -> None:
        self._events.append(ev)
        # An EV's state changed, perhaps inside a send the NIC's loop made without us:
        # the loop hands the connection back for its events and their consequences.
        self.tx.policy_wanted = 1
        # A suspect path is no place for our acks either (B9).
        if ev.new in (EvState.STOPPED.value, EvState.ASSUMED_BAD.value, EvState.DENIED.value):
            if self.reverse.retired(ev.ev):
                self._paths_dirty = True
        # A path that forwards nothing (its probe unanswered, its plane down or denied):
        # its packets went where nothing arrives, and go again now, not each at its
        # overdue age (which held the window a round trip longer). Not for one proven
        # loss: at 1 % loss that would resend every packet in flight on the EV.
        if (ev.new == EvState.DENIED.value or ev.why == UNANSWERED) and (
                e := self.profile.evs.get(ev.ev)) is not None and e.fb.index >= 0:
            self.tx.lose_path(e.fb.index)
        elif ev.ev == -1 and ev.new == "DOWN":  # a plane (evs.py: set_plane)
            # every down plane, not only this one: the others carry nothing live (no data
            # goes onto a down plane), so there lose_path finds nothing
            down = self.profile.planes_down
            for i, e in enumerate(self._evs):
                if e.path.plane in down:
                    self.tx.lose_path(i)
        # The control EVs are the reverse set's (or any EV's) in the planes that are up:
        # a SKIP, the commonest change, moves neither.
        if self.profile.planes_down != self._control_down:
            self._paths_dirty = True

    def _control_paths(self) -> None:
        """Hand the responder the EVs its SACK/NACK/ACKs go on, taken in turn: the
        reverse set (one EV a plane, B9), or, with no plane in it, any EV in a live
        plane (anything beats silence)."""
        prof = self.profile
        evs = self.reverse.evs() or [
            e for e in prof.evs.values() if e.path.plane not in prof.planes_down]
        self._control_down = set(prof.planes_down)
        self.rx.set_paths([(e.ev, *ev_split(e.ev), e.path.src, e.path.delivered,
                            e.path.container) for e in evs])
        self._paths_dirty = False

    def _reverse_upkeep(self, now: float) -> None:
        """Keep the reverse set fresh (reverse.py): from our data's feedback while we
        send, by a probe an RTT while we only receive."""
        interval = self._reverse_interval()
        rx = self.rx.rx_data
        if not self.idle:
            if self.reverse.refresh(now, interval):
                self._paths_dirty = True
        elif rx != self._rx_probed and now >= self.reverse.next_probe_at(interval):
            # Armed by data that came since the last probe; whether it came within the
            # last interval decides if we still only receive, or have gone quiet.
            self._rx_probed = rx
            if now - self.rx.last_data_at > interval:
                self.reverse.last_probe = now
            elif (e := self.reverse.probe_due(now, interval)) is not None:
                self._stats.reverse_probes += 1
                self._send_probe(e, now)

    def _reverse_interval(self) -> float:
        """An RTT (our data's, else our probes'), but no shorter than the probe interval:
        a receiver's probes cross the empty direction and come back in the control
        class, so their RTT is the fabric's unloaded one (~2 ms here). Probing at that
        pace sent h7 8,792 probes against 14,336 data packets in an incast, a load
        the emulator's NICs pay for in CPU, which a NIC ASIC would not."""
        return max(self.srtt or self.reverse.rtt or 0.0, self.cfg.probe_interval)

    def probe(self, ev: int, now: float) -> int:
        """A probe on `ev` now, asked for (libmrc's EV probe): in the data class, as an
        ASSUMED_BAD EV's, so its answer tests the path data takes and, for a retired
        EV, brings it back. Returns its probe id; KeyError for an EV not ours."""
        return self._send_probe(self.profile.evs[ev], now)

    def _send_probe(self, e: Ev, now: float, dscp: int = PROBE_DSCP) -> int:
        """A reliability probe on `e`: in the data class, to test the path data takes
        (an ASSUMED_BAD EV's), or in the control class, to test only that the path
        forwards (a STOPPED EV's). It consumes no PSN: BTH carries the lowest
        unacknowledged one, for the reader."""
        e.probe_seq += 1
        peth = {"probe_id": e.probe_seq & 0xFFFF, "spdcid": self.local_qpn & 0xFFFF,
                "dpdcid": self.remote_qpn & 0xFFFF, "tx_timestamp": timestamp(now)}
        self.control.append((e.ev, self._packet(e, Opcode.RELIABILITY_PROBE_REQ,
                                                {"PETH": peth}, self.una, None, dscp)))
        return peth["probe_id"]

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
        for k, v in self.tx.counters().items():
            setattr(s, k, v)
        h = self.health
        s.losses, s.losses_ignored = h.losses, h.losses_ignored
        s.holes_trimmed = h.holes_trimmed
        s.ev_stops, s.ev_stops_cleared = h.stops, h.stops_cleared
        s.probe_timeouts, s.probe_proofs = h.probe_timeouts, h.probe_proofs
        s.cc_quick_adapts, s.cc_decreases = self.cc.quick_adapts, self.cc.decreases
        s.per_ev = Counter({e.ev: e.fb.sent for e in self._evs if e.fb.sent})
        s.lb = Counter(self.profile.policy.counters())
        s.rx_data, s.rx_bytes, s.rx_dup = c["rx_data"], c["rx_bytes"], c["rx_dup"]
        s.rx_ce = c["rx_ce"]
        s.sacks_tx, s.nacks_tx, s.acks_tx = c["sacks_tx"], c["nacks_tx"], c["acks_tx"]
        s.access_naks_tx = c["access_naks_tx"]
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

    def peer_port_status(self, d: codec.Decoded, now: float) -> None:
        """The peer NIC's ENDPOINT_REQUEST: if it is a port-status update, use only the
        planes it says are up (another connection of the pair answers it)."""
        if d.opcode != Opcode.ENDPOINT_REQUEST:
            return
        r = d.headers["ERTH"]
        if r["op"] == EndpointOp.PORT_STATUS_UPDATE:
            up = planes_in_mask(r["port_status_mask"], self.profile.planes)
            for plane in self.profile.planes:
                self.profile.set_plane(plane, plane in up, now)

    def _on_endpoint(self, d: codec.Decoded, now: float) -> None:
        r = d.headers["ERTH"]
        self.peer_port_status(d, now)
        # The response echoes the op, the request id (BTH PSN) and the timestamp.
        self._emit(Opcode.ENDPOINT_RESPONSE, {"EETH": {
            "op": r["op"], "tx_timestamp": r["tx_timestamp"]}}, d.psn, dqpn=ENDPOINT_DQPN)

    # ---- entry points ------------------------------------------------------
    def receive_decoded(self, d: codec.Decoded, now: float) -> None:
        if self._paths_dirty:  # a probe's answer or an endpoint response goes out now
            self._control_paths()
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
            # the answer to our port-status update (its request id echoed in the PSN)
            if (self._port_update is not None and d.psn & 0xFFFF == self._port_update.seq
                    and d.headers["EETH"]["op"] == EndpointOp.PORT_STATUS_UPDATE):
                self._port_update = None
        else:
            self._stats.dropped["unexpected_opcode"] += 1

    def timer(self, now: float) -> None:
        if self._paths_dirty:
            self._control_paths()
        self.rx.timer(now)
        if self._failed is not None or self._out_of_retries(now):
            return  # a QP in error sends nothing more; as responder it still answers
        # The overdue scan: an EV whose oldest packet is late against the EV's own round
        # trips is stopped and its packets go again elsewhere, a tail with nothing after
        # it to open a hole included, within about a round trip (docs/transport.md, loss recovery).
        self.tx.overdue(now)
        # The RTO, the backstop: every live packet older than it and than its EV's own
        # patience is lost, and NSCC's quick adapt is flagged (nothing was heard for a
        # timeout: what the next period delivers sets the window).
        if fired := self.tx.rto(now, self.rto):
            self._stats.rtos += fired
            self.cc.on_rto()
            self.backoff = min(self.backoff * 2, 64)
        self._completed(now)
        self.health.check(now, self._probe_rtt)
        self.profile.retry(now)
        for e in self.health.probes_due(now):
            e.last_probe = now
            self._send_probe(e, now)
            self._stats.probes_tx += 1
        self._reverse_upkeep(now)
        if (due := self._port_update_due()) is not None and due <= now:
            self._send_port_update(now)
            self._stats.port_updates_resent += 1

    def next_timer(self) -> float | None:
        times = []
        if (due := self.rx.sack_due) is not None:
            times.append(due)
        # A live packet's RTO falls no sooner than its overdue age (sender.c: mrc_tx_rto),
        # which the overdue scan acts on first: its deadline is the one to wake for.
        if self._failed is None and (due := self.tx.overdue_at()) is not None:
            times.append(due)
        times += self._policy_timers()
        if self.idle and self.rx.rx_data != self._rx_probed:  # B9's probe: data came
            times.append(self.reverse.next_probe_at(self._reverse_interval()))
        return min(times) if times else None

    def _policy_timers(self) -> list[float]:
        """The path monitor's deadlines and probes, our port update's resend and the
        retry limit's."""
        if self._failed is not None:
            return []
        times = [self.health.next_deadline(self._probe_rtt), self.health.next_probe_at(),
                 self._port_update_due(), self.profile.next_retry()]
        if self.retry_budget is not None and not self.idle:
            times.append(self._retry_at)
        return [t for t in times if t is not None]

    def set_retry_budget(self, budget: float | None, now: float) -> None:
        """A QP's own retry limit (config.retry_budget of its timeout and retry_cnt)."""
        self.retry_budget = budget
        if budget is not None and not self.idle:
            since = self._waiting_since()  # 0.0 is a time, not "nothing out"
            self._retry_at = (self._busy_since if since is None else since) + budget

    def _waiting_since(self) -> float | None:
        """Since when packets have been out with nothing heard: the later of the last
        acknowledgement of any kind on any EV and the first send no acknowledgement on its
        EV followed. None while nothing is out: a write waiting for its turn at the ports
        (an all-to-all's) waits on us, not on the peer, as a NIC's ACK timer does not run
        for what it has not sent."""
        if not self.tx.outstanding:
            return None
        heard, first = -1.0, float("inf")
        for e in self._evs:
            fb = e.fb
            heard = max(heard, fb.last_feedback)
            if (t := fb.silent_since_raw) == t:  # NaN: nothing unanswered on it
                first = min(first, t)
        return max(heard, first) if first != float("inf") else heard

    def _out_of_retries(self, now: float) -> bool:
        """Whether the retry limit ran out: packets out, and nothing acknowledged on any
        path for the whole budget. Probes answered, SACKs and NACKs on any EV are
        progress, as a NIC's retries on another path would be. Then the QP fails: what
        is unfinished completes with a retry-exceeded error."""
        budget = self.retry_budget
        if budget is None or self.idle or now < self._retry_at:
            return False
        since = self._waiting_since()
        self._retry_at = (now if since is None else since) + budget
        if since is None or now < self._retry_at:
            return False
        self._failed = ConnectionFailed(
            now, f"nothing acknowledged on any path for {now - since:.3f} s "
            f"(the retry limit, {budget:.3f} s)", RETRY_EXCEEDED)
        self._events.append(self._failed)
        return True

    def loop_state(self) -> tuple[bool, float | None, float | None]:
        """Whether the NIC's loop may serve this connection without us until we are
        needed (its sends, its control frames, its delayed SACK: Loop.arm), when our own
        timers fall due meanwhile, and from when data arriving is news to us (a
        receiver's reverse probe, armed by data: next_timer). Not while anything only we
        can do is pending: control frames of ours, stale control paths, an EV's change, a
        stopped EV or a hole awaiting its verdict (each SACK may settle it)."""
        if (self.control or self._paths_dirty or self.tx.policy_wanted
                or not self.health.quiet or self._failed is not None):
            return False, None, None
        times = self._policy_timers()
        interval = self._reverse_interval()
        data_due = None
        if not self.idle:  # the reverse set's refresh while we send
            # due from when we began sending again, not an interval after the refresh
            # of an earlier busy spell (the loop meters lateness from the due time)
            times.append(max(self.reverse.last_refresh + interval, self._busy_since))
        elif self.rx.rx_data != self._rx_probed:  # a receiver's probe, armed
            times.append(self.reverse.next_probe_at(interval))
        else:  # armed by the next data after this
            data_due = self.reverse.next_probe_at(interval)
        return True, min(times, default=None), data_due

    @property
    def _probe_rtt(self) -> float:
        """How long a stopped EV's control probe may take: the smoothed RTT plus four
        deviations (a probe crosses the peer's NIC and its control queue as a SACK does,
        and a connection's first round trips are still growing); min_rto with no sample."""
        srtt = self.srtt
        return self.cfg.min_rto if srtt is None else srtt + 4 * self.rttvar

    def port_status(self, planes_up: set[int], now: float, announce: bool = True) -> None:
        """Our own port state changed: stop using dead planes and, if `announce`, tell
        the peer's NIC until it answers (a newer update replaces an unanswered one). The
        update is connectionless, one per peer NIC: the daemon has one connection of a
        pair announce it, and the peer's NIC applies it to all of its own."""
        for plane in self.profile.planes:
            self.profile.set_plane(plane, plane in planes_up, now)
        if not announce:
            self._port_update = None
            return
        self.endpoint_seq = (self.endpoint_seq + 1) & 0xFFFF
        self._port_update = _PortUpdate(self.endpoint_seq, frozenset(planes_up), now)
        self._send_port_update(now)

    def _send_port_update(self, now: float) -> None:
        update = self._port_update
        assert update is not None
        update.last_sent, update.copies = now, update.copies + 1
        # A peer that never answers (its NIC gone) gets PORT_UPDATE_COPIES at most.
        if update.copies >= PORT_UPDATE_COPIES:
            self._port_update = None
        self._emit(Opcode.ENDPOINT_REQUEST, {"ERTH": {
            "op": EndpointOp.PORT_STATUS_UPDATE,
            "port_status_mask": port_status_mask(set(update.planes_up)),
            "tx_timestamp": timestamp(now)}}, update.seq, dqpn=ENDPOINT_DQPN)

    def _port_update_due(self) -> float | None:
        """When the unanswered port-status update goes again: a control probe's round
        trip after its last copy. A copy is one control packet on one EV: lost (a queue
        full, a path that died), the peer would go on using a plane that is down, or
        leave unused one that came back, until our next update; E1 lost a plane's
        return so, half of it for two seconds."""
        if self._port_update is None:
            return None
        return self._port_update.last_sent + self._probe_rtt

    @property
    def idle(self) -> bool:
        return not self.tx.pending and not self.tx.outstanding

    @property
    def failed(self) -> bool:
        """The retry limit ran out (_out_of_retries): the QP is in error."""
        return self._failed is not None

    @property
    def cwnd(self) -> int:
        return self.cc.cwnd

    def cc_state(self) -> dict[str, float]:
        """Where NSCC's window and delay estimate stand (its quick adapts and decreases
        are `stats.cc_*`): with those, what a report needs to say why a window is where
        it is."""
        cc = self.cc
        return {"cwnd": cc.cwnd, "base_rtt": cc.base_rtt, "avg_delay": cc.avg_delay}

    def message(self, msn: int) -> Message | None:
        m = self.messages.get(msn)
        if m is not None:
            m.acked = self.tx.acked_of(msn) or 0  # counted by the sender, read now
        return m

    def unfinished(self) -> Iterable[Message]:
        return self.messages.values()

    def snapshot(self, now: float) -> dict:
        """The requester's insides, for diagnosing a stall."""
        oldest = self.tx.first_live()
        return {"outstanding": self.tx.outstanding, "rtx_queue": self.tx.rtx_queued,
                "pending": self.tx.pending, "inflight": self.tx.inflight,
                "cwnd": self.cc.cwnd, "backoff": self.backoff,
                "rto": self.rto, "srtt": self.srtt, "una": self.una,
                "oldest_age": 0.0 if oldest is None else now - oldest,
                "next_timer_in": (self.next_timer() or now) - now,
                "usable": self.profile.count_usable(), "control": len(self.control),
                "responder": self.rx.snapshot}

    @property
    def busy(self) -> bool:
        """Anything to send or time: the I/O shell skips connections that are not."""
        if self._failed is not None:
            return bool(self.control or self.rx.pending or self.rx.sack_due is not None)
        return bool(self.control or self.tx.pending or self.tx.outstanding or self.tx.rtx_queued
                    or self.rx.pending or self.rx.sack_due is not None
                    or self.profile.bad_count or self.health.pending)
