"""The compiled MRC responder (mrcemu/datapath/responder.c) on its own: what it places,
what it refuses, and the control packets it frames, read back with the Python codec."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu import datapath
from mrcemu.topology import load
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.memory import MemoryTable
from mrcemu.transport.mrc import MrcConnection
from mrcemu.transport.profiles import local_qpn_pair, profile
from mrcemu.wire import codec, layout
from mrcemu.wire.constants import Dscp, NackReason, Opcode, SackMark, ev_join

TOPO = load("default")
QA, QB = local_qpn_pair(0, 7)
SRC, DST, VIA = bytes(15) + b"\x01", bytes(15) + b"\x02", bytes(15) + b"\x03"
PMTU = 256


def responder(cfg: TransportConfig | None = None) -> tuple[MrcConnection, MemoryTable]:
    """h7's connection toward h0: its responder is the compiled one."""
    cfg = cfg or TransportConfig(pmtu=PMTU, sack_every=4)
    mem = MemoryTable()
    return MrcConnection(cfg, profile(TOPO, 7, 0, cfg), QB, QA, mem), mem


def data(psn: int, msn: int, va: int, rkey: int, payload: bytes, dmalen: int,
         opcode: int = Opcode.WRITE_MIDDLE, ecn: int = 2, sport: int = 0xC001,
         flow: int = 7, imm: int | None = None, via: bytes | None = VIA) -> bytes:
    return codec.encode_data(SRC, DST, sport=sport, flow_label=flow, dscp=Dscp.TRIMMABLE,
                             ecn=ecn, payload=payload, via=via, opcode=opcode, dqpn=QB,
                             psn=psn, msn=msn, va=va, rkey=rkey, dmalen=dmalen,
                             timestamp=0x1234, imm=imm)


def message(mr, msn: int, first_psn: int, blob: bytes, imm: int | None = None) -> list[bytes]:
    n = -(-len(blob) // PMTU)
    out = []
    for i in range(n):
        op = (Opcode.WRITE_ONLY if n == 1 else Opcode.WRITE_FIRST if i == 0
              else Opcode.WRITE_LAST if i == n - 1 else Opcode.WRITE_MIDDLE)
        if imm is not None and i == n - 1:
            op = Opcode.WRITE_ONLY_IMM if n == 1 else Opcode.WRITE_LAST_IMM
        out.append(data(first_psn + i, msn, mr.base + i * PMTU, mr.rkey,
                        blob[i * PMTU:(i + 1) * PMTU], len(blob), opcode=op,
                        imm=imm if op in (Opcode.WRITE_ONLY_IMM, Opcode.WRITE_LAST_IMM)
                        else None))
    return out


def sent(c: MrcConnection, now: float) -> list[tuple[int, bytes]]:
    """What the connection sends now, less the probe a connection that only receives
    sends to keep its control EVs fresh (B9: not the responder's)."""
    return [(ev, pkt) for ev, pkt in c.packets_to_send(now)
            if pkt[layout.BTH_AT] != Opcode.RELIABILITY_PROBE_REQ]


def control(c: MrcConnection) -> list[codec.Decoded]:
    return [codec.decode(pkt) for _ev, pkt in sent(c, 0.0)]


def events(c: MrcConnection) -> list:
    out = []
    while (e := c.next_event()) is not None:
        out.append(e)
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6 * PMTU), st.integers(1, 6 * PMTU), st.randoms(use_true_random=False),
       st.floats(0, 0.5))
def test_two_messages_in_any_order_with_duplicates_land_whole_and_complete_in_msn_order(
        n1, n2, rnd, dup):
    c, mem = responder()
    mr = mem.register(n1 + n2 + PMTU)
    a, b = rnd.randbytes(n1), rnd.randbytes(n2)
    pkts = message(mr, 0, 0, a) + message(
        type("R", (), {"base": mr.base + len(a), "rkey": mr.rkey})(), 1, -(-n1 // PMTU), b,
        imm=0xABCD)
    pkts += [p for p in pkts if rnd.random() < dup]
    rnd.shuffle(pkts)
    for p in pkts:
        c.receive(p, 1.0)
    got = [(e.msn, e.imm) for e in events(c) if type(e).__name__ == "MessageReceived"]
    assert got == [(0, None), (1, 0xABCD)]
    assert bytes(mr.buf[:n1 + n2]) == a + b and not any(mr.buf[n1 + n2:])
    assert c.stats.rx_data == -(-n1 // PMTU) + -(-n2 // PMTU)
    assert c.stats.rx_dup == len(pkts) - c.stats.rx_data
    assert c.rx.snapshot["cack"] == c.stats.rx_data and c.rx.snapshot["ooo"] == 0


def test_a_sack_names_the_cumulative_ack_the_bitmap_and_the_trigger():
    c, mem = responder()
    mr = mem.register(64 * PMTU)
    blob = bytes(range(256)) * 64
    pkts = message(mr, 0, 0, blob)
    for psn in (0, 1, 3, 5):  # 2 and 4 missing: the fourth packet is due a SACK
        c.receive(pkts[psn], 1.0)
    (s,) = control(c)
    assert s.opcode == Opcode.RELIABILITY_SACK and s.bth["dqpn"] == QA
    seth, cc = s.headers["SETH"], s.headers["CC_STATE"]
    assert seth["cack_psn"] == 2 and s.bth["psn"] == 2
    # Bit i is PSN cack + sack_offset + i: 3 and 5 arrived, 4 did not.
    bits = {2 + seth["sack_offset"] + i for i in range(64) if seth["sack_bitmap"] >> i & 1}
    assert bits == {3, 5}
    assert seth["ack_psn_offset"] == 3 and seth["entropy"] == ev_join(0xC001, 7)
    assert seth["m"] == SackMark.NONE and seth["pr"] == 0
    assert (seth["spdcid"], seth["dpdcid"]) == (QB & 0xFFFF, QA & 0xFFFF)
    assert cc["ooo_count"] == 2 and cc["tx_timestamp"] == 0x1234
    assert cc["rcvd_bytes"] == 4 * PMTU // 256
    assert s.dscp == Dscp.CONTROL and s.via is not None


def reported(c: MrcConnection, now: float) -> set[int]:
    """The PSNs the SACKs the connection sends now acknowledge, cumulatively or by bit."""
    out: set[int] = set()
    for s in control(c):
        if s.opcode != Opcode.RELIABILITY_SACK:
            continue
        seth = s.headers["SETH"]
        cack = seth["cack_psn"]
        out |= set(range(cack))
        out |= {cack + seth["sack_offset"] + i for i in range(64)
                if seth["sack_bitmap"] >> i & 1}
    return out


def test_a_packet_that_arrived_before_a_low_retransmission_is_still_reported():
    """The incast case: PSN 0 keeps being trimmed, so the cumulative ack stays at 0; new
    packets 70 and 71 arrive, then retransmissions of 1 and 2. A bitmap ending at the
    last trigger (2) covers 1..64 and never names 70 and 71, so the sender's RACK calls
    them lost although they arrived (and retires their EVs)."""
    c, mem = responder()
    mr = mem.register(128 * PMTU)
    pkts = message(mr, 0, 0, bytes(128 * PMTU))
    seen: set[int] = set()
    for psn in (70, 71, 1, 2):
        c.receive(pkts[psn], 1.0)
        seen |= reported(c, 1.0)
    c.timer(1.0 + c.cfg.sack_delay)
    seen |= reported(c, 1.0 + c.cfg.sack_delay)
    assert {70, 71, 1, 2} <= seen and 0 not in seen


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=120), st.integers(1, 8))
def test_every_packet_received_is_reported_by_some_sack(arrivals, every):
    """Whatever the order (duplicates included) and the SACK cadence, each PSN that was
    placed appears in a SACK's cumulative ack or bitmap by the time the delayed SACK
    is due: the sender's RACK treats an unreported packet as lost."""
    c, mem = responder(TransportConfig(pmtu=PMTU, sack_every=every))
    mr = mem.register(301 * PMTU)
    pkts = message(mr, 0, 0, bytes(301 * PMTU))
    seen: set[int] = set()
    now = 1.0
    for psn in arrivals:
        c.receive(pkts[psn], now)
        seen |= reported(c, now)
        now += 1e-4
    c.timer(now + c.cfg.sack_delay)
    seen |= reported(c, now + c.cfg.sack_delay)
    assert set(arrivals) <= seen


def test_ce_makes_the_next_sack_skip_once_at_once():
    c, mem = responder()
    mr = mem.register(PMTU * 4)
    c.receive(data(0, 0, mr.base, mr.rkey, bytes(PMTU), 4 * PMTU, ecn=3), 1.0)
    (s,) = control(c)
    assert s.headers["SETH"]["m"] == SackMark.SKIP_ONCE
    c.receive(data(1, 0, mr.base + PMTU, mr.rkey, bytes(PMTU), 4 * PMTU), 1.0)
    assert control(c) == [] and c.rx.sack_due == pytest.approx(1.0 + c.cfg.sack_delay)
    c.timer(1.0 + c.cfg.sack_delay)
    (s,) = control(c)
    assert s.headers["SETH"]["m"] == SackMark.NONE and s.headers["SETH"]["cack_psn"] == 2
    # Counted: the one CE-marked packet of the two.
    assert c.rx.counters()["rx_ce"] == 1 and c.stats.rx_ce == 1


def test_a_trimmed_packet_is_nacked_with_its_psn_and_never_placed():
    c, mem = responder()
    mr = mem.register(PMTU * 8)
    for dscp, reason in ((Dscp.TRIMMED, NackReason.TRIMMED),
                         (Dscp.TRIMMED_LASTHOP, NackReason.TRIMMED_LASTHOP)):
        c.receive(codec.trim(data(5, 0, mr.base, mr.rkey, b"\xff" * PMTU, 8 * PMTU), dscp), 1.0)
        (n,) = control(c)
        assert n.opcode == Opcode.RELIABILITY_NACK
        assert n.headers["NETH"]["nack_reason"] == reason
        assert n.headers["NETH"]["nack_psn"] == 5 == n.bth["psn"]
    assert not any(mr.buf) and c.stats.dropped["trimmed"] == 2 == c.stats.nacks_tx


@pytest.mark.parametrize("fault", ["rkey", "va_low", "va_high", "window"])
def test_refused_packets_leave_memory_unchanged(fault):
    c, mem = responder(TransportConfig(pmtu=PMTU, rcv_window=64))
    mr = mem.register(PMTU * 2)
    va, rkey, psn = mr.base, mr.rkey, 0
    if fault == "rkey":
        rkey += 99
    elif fault == "va_low":
        va -= 1
    elif fault == "va_high":
        va += PMTU + 1  # ends one byte past the region
    else:
        psn = 64
    c.receive(data(psn, 0, va, rkey, b"\xee" * PMTU, PMTU), 1.0)
    assert not any(mr.buf) and c.stats.rx_data == 0
    want = {"rkey": "bad_rkey", "va_low": "va_out_of_range", "va_high": "va_out_of_range",
            "window": "psn_out_of_window"}[fault]
    assert c.stats.dropped[want] == 1


def test_a_freed_region_takes_no_more_data_and_its_buffer_is_let_go():
    c, mem = responder()
    mr = mem.register(PMTU)
    assert mem.free(mr.rkey)
    c.receive(data(0, 0, mr.base, mr.rkey, b"\x11" * PMTU, PMTU), 1.0)
    assert c.stats.dropped["bad_rkey"] == 1 and not any(mr.buf)
    mr.buf.extend(b"x")  # no longer exported to the data path: resizable again


def test_mutated_packets_are_refused_or_are_the_same_write():
    c, mem = responder()
    mr = mem.register(PMTU * 4)
    good = data(0, 0, mr.base + PMTU, mr.rkey, b"\x77" * PMTU, PMTU, opcode=Opcode.WRITE_ONLY)
    rnd = random.Random(5)
    for _ in range(3000):
        b = bytearray(good)
        for _ in range(rnd.randint(1, 4)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        c.receive(bytes(b), 1.0)
    # The ICRC covers every byte of the inner packet the fabric does not rewrite: what
    # passes differs only where the network may write (outer header, traffic class,
    # flow label, UDP checksum), so the payload lands where the original would, intact.
    assert bytes(mr.buf) in (bytes(4 * PMTU), bytes(PMTU) + b"\x77" * PMTU + bytes(2 * PMTU))
    assert c.stats.rx_data <= 1
    assert sum(v for k, v in c.stats.dropped.items() if k.startswith("malformed_")) > 2500


def test_control_packets_rotate_over_the_reverse_set_and_follow_state_changes():
    c, mem = responder(TransportConfig(pmtu=PMTU, sack_every=1))
    mr = mem.register(PMTU * 64)
    for psn in range(16):
        c.receive(data(psn, 0, mr.base + psn * PMTU, mr.rkey, bytes(PMTU), 64 * PMTU), 1.0)
    evs = [ev for ev, _ in sent(c, 1.0)]
    # B9: one EV a plane, taken in turn: the reverse set, not the data EVs.
    assert len(evs) == 16 and set(evs) == {e.ev for e in c.reverse.evs()}
    assert len({c.profile.evs[ev].path.plane for ev in evs}) == len(set(evs)) == 8
    victim = evs[0]
    c.profile.assume_bad(victim, 1.0, "test")
    for psn in range(16, 40):
        c.receive(data(psn, 0, mr.base + psn * PMTU, mr.rkey, bytes(PMTU), 64 * PMTU), 1.0)
    after = {ev for ev, _ in sent(c, 1.0)}
    assert victim not in after and len(after) == 8
    assert c.profile.evs[victim].path.plane in {c.profile.evs[ev].path.plane for ev in after}


def test_a_probe_is_answered_with_pr_and_its_id_and_non_data_goes_to_the_policy():
    c, _mem = responder()
    probe = codec.encode(SRC, DST, sport=0xC002, flow_label=9, dscp=Dscp.TRIMMABLE, ecn=2,
                         bth={"opcode": Opcode.RELIABILITY_PROBE_REQ, "dqpn": QB},
                         headers={"PETH": {"probe_id": 0x9001, "tx_timestamp": 77}}, via=VIA)
    c.receive(probe, 1.0)
    (s,) = control(c)
    seth = s.headers["SETH"]
    assert seth["pr"] == 1 and seth["entropy"] == ev_join(0xC002, 9)
    assert seth["ack_psn_offset"] == layout.probe_id_as_offset(0x9001)
    assert s.headers["CC_STATE"]["tx_timestamp"] == 77


def test_an_outer_address_not_ours_is_refused_before_anything_else():
    c, mem = responder()
    mr = mem.register(PMTU)
    with pytest.raises(codec.DecodeError, match="not_our_usid"):
        c.receive_frame(data(0, 0, mr.base, mr.rkey, b"\x01" * PMTU, PMTU), 1.0,
                        via=bytes(15) + b"\x09")
    c.receive_frame(data(0, 0, mr.base, mr.rkey, b"\x01" * PMTU, PMTU), 1.0, via=VIA)
    assert bytes(mr.buf) == b"\x01" * PMTU


def test_peek_dqpn_finds_the_qp_plain_or_encapsulated_and_nothing_in_other_traffic():
    assert datapath.peek_dqpn(data(0, 0, 0, 1, b"", 0)) == QB
    assert datapath.peek_dqpn(data(0, 0, 0, 1, b"", 0, via=None)) == QB
    pkt = bytearray(data(0, 0, 0, 1, b"", 0, via=None))
    pkt[42:44] = (53).to_bytes(2, "big")  # UDP to another port
    assert datapath.peek_dqpn(bytes(pkt)) == -1
    assert datapath.peek_dqpn(b"\x60" + bytes(30)) == -1
