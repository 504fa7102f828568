"""The compiled MRC requester (mrcemu/datapath/sender.c) on its own, with explicit `now`:
its frames against the Python codec's, and its records under acks, NACKs, per-EV order,
the overdue scan and RTOs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu import datapath
from mrcemu.wire import codec
from mrcemu.wire.constants import TIMESTAMP_UNIT, Dscp, Opcode, SackMark
from tests.unit.transport.helpers import pair

DQPN = 0x123456
PMTU = 256
ECT0 = 0b10
KINDS = (Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM, Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE,
         Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM)


def addr(n: int) -> bytes:
    return bytes(15) + bytes([n])


class Rig:
    """A Sender over four EVs sprayed in turn, each rotation the same order (`order`, or
    each EV once)."""

    def __init__(self, window: int = 64, npaths: int = 4,
                 order: list[int] | None = None, routes: list[int] | None = None) -> None:
        """`routes`: each path's route number (its SRv6 container); none, one each."""
        self.order = order
        templates = tuple(codec.data_body(
            opcode=op, dqpn=DQPN, psn=0, msn=0, va=0, rkey=0, dmalen=0, timestamp=0,
            imm=0 if op in (Opcode.WRITE_ONLY_IMM, Opcode.WRITE_LAST_IMM) else None)
            for op in KINDS)
        self.rotations = 0
        self.tx = datapath.Sender(
            window, PMTU, templates,
            ((Dscp.TRIMMABLE << 2) | ECT0, (Dscp.TRIMMABLE_RETX << 2) | ECT0,
             TIMESTAMP_UNIT), self.rotate)
        self.slots = [datapath.EvSlot() for _ in range(npaths)]
        for s in self.slots:
            s.usable = True
        self.evs = [0x1000 + i for i in range(npaths)]
        routes = routes or list(range(npaths))
        self.tx.set_paths([(s, ev, 0xC000 | i, 0x100 + i, addr(1), addr(2),
                            addr(0x10 + routes[i]))
                           for i, (s, ev) in enumerate(zip(self.slots, self.evs, strict=True))])

    def rotate(self, now: float) -> None:
        self.rotations += 1
        self.rotated_at = now
        self.tx.set_order(self.order or range(len(self.slots)))

    def send(self, now: float, budget: int = 1 << 20, cwnd: float = 1e12,
             silent: float = 1.0) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        self.tx.send(out, now, budget, cwnd, silent)
        return out


def decode(pkt: bytes) -> codec.Decoded:
    """A frame as it arrives: the outer DA rewritten to the last uSID's (here: dst)."""
    b = bytearray(pkt)
    b[24:40] = addr(2)  # the outer IPv6 header's DA
    return codec.decode(bytes(b))


@settings(max_examples=150, deadline=None)
@given(size=st.integers(0, 5 * PMTU + 7), va=st.integers(0, (1 << 64) - 1 - 6 * PMTU),
       rkey=st.integers(0, (1 << 32) - 1), imm=st.none() | st.integers(0, (1 << 32) - 1),
       msn=st.integers(0, 1 << 20), now=st.floats(0, 1e6))
def test_frames_are_byte_identical_to_the_python_codec(size, va, rkey, imm, msn, now):
    rig = Rig()
    data = bytes((i * 7 + 3) & 0xFF for i in range(size))
    first = rig.tx.post(msn, va, rkey, data, imm)
    frames = rig.send(now)
    npkts = max(1, -(-size // PMTU))
    assert first == 0 and len(frames) == npkts
    for i, (ev, pkt) in enumerate(frames):
        off = i * PMTU
        last = off + PMTU >= size
        if npkts == 1:
            op = Opcode.WRITE_ONLY if imm is None else Opcode.WRITE_ONLY_IMM
        elif i == 0:
            op = Opcode.WRITE_FIRST
        elif last:
            op = Opcode.WRITE_LAST if imm is None else Opcode.WRITE_LAST_IMM
        else:
            op = Opcode.WRITE_MIDDLE
        p = i % 4
        assert ev == rig.evs[p]
        ref = codec.encode_data(
            addr(1), addr(2), via=addr(0x10 + p), sport=0xC000 | p, flow_label=0x100 + p,
            dscp=Dscp.TRIMMABLE, ecn=ECT0, payload=data[off:off + PMTU], opcode=op,
            dqpn=DQPN, psn=i, msn=msn & 0xFFFF, va=va + off, rkey=rkey, dmalen=size,
            ackreq=int(last), timestamp=int(now / TIMESTAMP_UNIT) & 0xFFFF,
            imm=imm if op in (Opcode.WRITE_ONLY_IMM, Opcode.WRITE_LAST_IMM) else None)
        assert pkt == ref


def test_windows_bound_what_goes_and_sacks_free_it():
    rig = Rig(window=8)
    rig.tx.post(0, 0, 1, bytes(20 * PMTU), None)
    assert len(rig.send(0.0)) == 8  # the PSN window
    assert rig.tx.outstanding == 8 and rig.tx.pending == 12 and rig.tx.inflight == 8 * PMTU
    # Cumulative up to PSN 3 (cack 3), and PSNs 5 and 6 by the bitmap at cack + 2.
    newly, nbytes, rtt, latest = rig.tx.ack(3, 2, 0b11, 2, 0.010)
    assert (newly, nbytes, latest) == (5, 5 * PMTU, 0.0)
    assert rtt == pytest.approx(0.010)  # PSN 3 + 2 = 5: a first copy, newly acked
    assert rig.tx.una == 3 and rig.tx.outstanding == 3 and rig.tx.latest_acked_sent == 0.0
    assert len(rig.send(0.02, cwnd=4 * PMTU)) == 1  # the congestion window: 3 + 1
    assert len(rig.send(0.02)) == 2  # then the PSN window again: una 3 + 8 = 11
    assert rig.tx.acked_of(0) == 5 and rig.tx.acked_of(9) is None


def with_cc(rig: Rig, min_rto: float = 0.1, slack: float = 0.0,
            stop_deviations: float = 4.0, overdue_deviations: float = 4.0) -> datapath.Nscc:
    cc = datapath.Nscc(64 * PMTU, PMTU, PMTU, 512 * PMTU, 0.02, 0.05, 64 * PMTU, 0.024)
    rig.tx.use_cc(cc, min_rto, 1.0, slack, stop_deviations, overdue_deviations)
    return cc


def sack(rig: Rig, cack: int, off: int, bitmap: int, trigger: int, ev: int, now: float):
    """A SACK as the responder frames it: the trigger's offset from cack, its EV."""
    rig.tx.sack(cack, off, bitmap, trigger - cack, ev, 0, 0, now)


def test_a_mark_from_a_thinned_ev_moves_its_share_not_the_window():
    """A marked SACK from an EV the policy is thinning (evs.py: a hot path shed in part)
    reaches NSCC unmarked, and is counted: the window grows as on unmarked acks. The
    same marks from an EV not thinned leave it where it was (NSCC's fourth quadrant: a
    mark under the target delay moves the path, not the window)."""
    got = {}
    for thinned in (False, True):
        rig = Rig(order=[0])
        cc = with_cc(rig)
        rig.slots[0].thinned = thinned
        rig.tx.post(0, 0, 1, bytes(16 * PMTU), None)
        assert len(rig.send(0.0)) == 16
        for psn in range(16):
            rig.tx.sack(psn + 1, 0, 0, -1, rig.evs[0], SackMark.SKIP_ONCE, 0,
                        0.010 + psn * 1e-4)
        assert rig.tx.una == 16
        got[thinned] = (cc.cwnd, rig.tx.counters()["ce_thinned"])
    assert got[False] == (64 * PMTU, 0)
    assert got[True][0] > 64 * PMTU and got[True][1] == 16


def test_per_ev_order_proves_a_packet_lost_when_a_later_one_on_its_ev_arrived():
    rig = Rig()
    cc = with_cc(rig)
    rig.tx.post(0, 0, 1, bytes(8 * PMTU), None)
    for i in range(8):
        assert len(rig.send(i * 0.001, budget=1)) == 1  # PSN i on EV i % 4 at i ms
    cwnd = cc.cwnd
    # PSNs 1 and 2 are missing; 0 and 3-5 arrived (cack 1, bitmap at 2: PSNs 3, 4, 5).
    sack(rig, 1, 1, 0b1110, 5, rig.evs[1], 0.020)
    # PSN 5 went on EV 1 after PSN 1: one path is FIFO, so PSN 1 is lost. PSN 2 (EV 2)
    # was sent before packets on other EVs that arrived, but nothing later on its own EV
    # has: sprayed packets arrive in any order, and it is not judged.
    assert rig.tx.take_losses() == [(1, 0.001, 0, 1)]
    assert rig.tx.counters()["hole_losses"] == 1
    # The lost packet's bytes come off the window; the window is not halved.
    assert cc.cwnd >= cwnd - PMTU and cc.decreases == 0
    (ev, pkt), = rig.send(0.021)
    assert decode(pkt).psn == 1 and decode(pkt).bth["rtx"] == 1 and ev != rig.evs[1]
    # PSN 6 (EV 2, after PSN 2) arrives: now PSN 2 is proven lost.
    sack(rig, 1, 1, 0b11110, 6, rig.evs[2], 0.022)
    assert rig.tx.take_losses() == [(2, 0.002, 0, 2)]


def test_per_ev_order_judges_only_what_the_ack_reports_missing():
    rig = Rig(window=256)
    with_cc(rig)
    rig.tx.post(0, 0, 1, bytes(80 * PMTU), None)
    for i in range(80):
        rig.send(i * 0.001, budget=1)
    # cack 1; the bitmap starts at PSN 70 and reports 73 (EV 1). PSN 1 (EV 1) is cack:
    # missing, and lost. PSN 5 (EV 1) lies between cack and the bitmap: unknown.
    sack(rig, 1, 69, 0b1000, 73, rig.evs[1], 0.1)
    assert [(x[0], x[3]) for x in rig.tx.take_losses()] == [(1, 1)]
    # An older SACK, arriving late (its cack behind the one taken), proves nothing.
    rig.tx.ack(3, 1, 0, None, 0.1)  # cack moves to 3 (PSN 2 on EV 2)
    sack(rig, 1, 69, 0b1000, 73, rig.evs[1], 0.1)
    assert rig.tx.take_losses() == []


def test_a_trimmed_packet_is_nacked_not_found_lost_by_per_ev_order():
    rig = Rig()
    with_cc(rig)
    rig.tx.post(0, 0, 1, bytes(8 * PMTU), None)
    for i in range(8):
        rig.send(i * 0.001, budget=1)
    # PSN 1's trimmed header overtook PSN 5 on EV 1: its NACK came first.
    assert rig.tx.nack(1, 1, 0.015, True) == PMTU
    sack(rig, 1, 1, 0b1110, 5, rig.evs[1], 0.020)
    assert rig.tx.take_losses() == []
    # Resent on another EV; a late NACK for the first copy (it names EV 1) is stale.
    (ev, _), = rig.send(0.021)
    assert ev != rig.evs[1] and rig.tx.nack(1, 1, 0.022, True) == 0
    assert rig.tx.rtx_queued == 0 and rig.tx.is_outstanding(1)


def ev_1_slow(**cc) -> Rig:
    """PSNs 0-7 sent on EVs 0-3 in turn, a ms apart. Every EV but EV 1 answers in 10 ms;
    EV 1's first packet (PSN 1) is sampled at 40 ms. Only PSN 5 (EV 1, sent at 5 ms) is
    left outstanding."""
    rig = Rig()
    with_cc(rig, slack=0.002, **cc)
    rig.tx.post(0, 0, 1, bytes(64 * PMTU), None)
    for i in range(8):
        rig.send(i * 0.001, budget=1)  # PSN i on EV i % 4 at i ms
    sack(rig, 0, 1, 0b1, 1, rig.evs[1], 0.041)  # PSN 1 (EV 1): 40 ms
    sack(rig, 3, 1, 0, 2, rig.evs[2], 0.012)
    for psn in (4, 6, 7):
        sack(rig, 5, 1 + psn - 6, 1, psn, rig.evs[psn % 4], psn * 0.001 + 0.01)
    return rig


def test_evs_on_one_route_share_its_round_trip_estimate():
    """EVs 0 and 2 name one route (ev_per_path's variants): a sample on either is the
    route's, so the other, with no packet acked of its own, has it too."""
    rig = Rig(routes=[0, 1, 0, 3])
    with_cc(rig)
    rig.tx.post(0, 0, 1, bytes(8 * PMTU), None)
    for i in range(4):
        rig.send(i * 0.001, budget=1)  # PSN i on EV i at i ms
    sack(rig, 1, 0, 0, 0, rig.evs[0], 0.030)  # PSN 0 (EV 0): 30 ms
    sack(rig, 2, 0, 0, 1, rig.evs[1], 0.011)  # PSN 1 (EV 1): 10 ms
    rtt = [s.rtt_raw for s in rig.slots]
    assert rtt[0] == rtt[2] == 0.030 and rtt[1] == pytest.approx(0.010)
    assert rtt[3] != rtt[3]  # NaN: no sample on its route
    sack(rig, 3, 0, 0, 2, rig.evs[2], 0.012)  # PSN 2 (EV 2): 10 ms, the route's second
    assert rig.slots[0].rtt_raw == rig.slots[2].rtt_raw
    assert rig.slots[0].rtt_raw == pytest.approx(0.030 * 0.875 + 0.010 * 0.125)
    assert rig.slots[0].rttvar == rig.slots[2].rttvar


def test_an_ev_overdue_against_its_own_round_trips_is_stopped_and_its_packets_go_elsewhere():
    rig = ev_1_slow()
    srtt = rig.tx.srtt_raw
    age = [rig.tx.overdue_age(i) for i in range(4)]
    # EV 1's own round trips are long: it is overdue later than the others.
    assert age[1] > age[0] >= srtt + 0.002
    assert age[1] == pytest.approx(rig.slots[1].rtt_raw + 4 * rig.slots[1].rttvar + 0.002)
    # PSN 5 (EV 1, sent at 5 ms) is the only packet outstanding.
    assert rig.tx.outstanding == 1 and rig.tx.overdue_at() == pytest.approx(0.005 + age[1])
    assert rig.tx.overdue(0.005 + age[1] - 1e-6) == 0 and rig.tx.take_losses() == []
    # Nor does an RTO far shorter fire before the path's own patience runs out.
    assert rig.tx.rto(0.005 + age[1] - 1e-6, 0.001) == 0
    assert rig.tx.overdue(0.005 + age[1]) == 1
    assert rig.tx.take_losses() == [(1, 0.005, 2, 5)]
    assert rig.slots[1].stopped and rig.tx.rtx_queued == 1
    assert rig.tx.counters()["overdue_resent"] == 1
    # Stopped: its resent packet is not judged on it again, and nothing is due.
    assert rig.tx.overdue(1.0) == 0 and rig.tx.overdue_at() is None


def test_an_ev_is_stopped_at_its_stop_age_and_its_packet_sent_again_only_when_overdue():
    # Two ages: past the EV's own RTT plus one deviation (plus the slack) the EV takes no
    # new data and its probes go; its packet goes again only past six deviations.
    rig = ev_1_slow(stop_deviations=1.0, overdue_deviations=6.0)
    fb = rig.slots[1]
    stop, overdue = rig.tx.stop_age(1), rig.tx.overdue_age(1)
    assert stop == pytest.approx(fb.rtt_raw + fb.rttvar + 0.002)
    assert overdue == pytest.approx(fb.rtt_raw + 6 * fb.rttvar + 0.002) and stop < overdue
    # PSN 5 (EV 1, sent at 5 ms) is the only packet outstanding: its stop is due first.
    assert rig.tx.overdue_at() == pytest.approx(0.005 + stop)
    assert rig.tx.overdue(0.005 + stop - 1e-6) == 0
    assert rig.tx.overdue(0.005 + stop) == 1
    assert rig.tx.take_losses() == [(1, 0.005, 2, 5)]
    assert fb.stopped and fb.stopped_at == 0.005 + stop
    # Stopped, not resent: the packet may yet arrive, and nothing else is sent on EV 1.
    assert rig.tx.rtx_queued == 0 and rig.tx.counters()["overdue_resent"] == 0
    assert rig.tx.is_outstanding(5) and rig.tx.overdue_at() == pytest.approx(0.005 + overdue)
    # The probe answered, the policy puts the EV back in use. Its packet, sent before the
    # stop, cannot stop it again at the stop age (the probes decided about it)...
    fb.stopped = 0
    fb.usable = True
    assert rig.tx.overdue(0.005 + overdue - 1e-6) == 0 and rig.tx.take_losses() == []
    # ... but overdue, it goes again and stops the EV once more: the path forwards, and
    # is slower than its own round trips allow.
    assert rig.tx.overdue(0.005 + overdue) == 1
    assert rig.tx.take_losses() == [(1, 0.005, 2, 5)]
    assert rig.tx.rtx_queued == 1 and rig.tx.counters()["overdue_resent"] == 1
    assert fb.stopped and fb.stopped_at == 0.005 + overdue
    # Back in use again: a packet sent on it after that stop can stop it again.
    fb.stopped = 0
    rig.tx.post(1, 0, 1, bytes(8 * PMTU), None)
    later = 0.005 + overdue + 0.001
    sent = [(ev, decode(p).psn) for ev, p in rig.send(later)]
    assert [psn for ev, psn in sent if ev == rig.evs[1]]
    rig.tx.overdue(later + rig.tx.stop_age(1) + 0.01)
    assert (1, 2) in [(x[0], x[2]) for x in rig.tx.take_losses()]
    assert fb.stopped and fb.stopped_at > later


@pytest.mark.parametrize("stopped", [True, False])
def test_a_stopped_evs_late_packet_starts_its_round_trips_again(stopped):
    # EV 1 is stopped for PSN 5, which then arrives 20 ms past its stop age. A path that
    # turned slow: folded in at an eighth, that round trip left the EV's estimate short,
    # and each packet sent once it was back in use stopped it again. Taken as a first
    # sample is (the connection's deviation with it), it sets the estimate; an EV not
    # stopped folds it in as ever.
    rig = ev_1_slow(stop_deviations=1.0, overdue_deviations=6.0)
    fb = rig.slots[1]
    stop = rig.tx.stop_age(1)
    assert rig.tx.overdue(0.005 + stop) == 1 and fb.stopped
    fb.stopped = stopped
    old = fb.rtt_raw
    late = stop + 0.02
    sack(rig, 8, 0, 0, 5, rig.evs[1], 0.005 + late)
    if stopped:
        assert fb.rtt_raw == pytest.approx(late) and late > old
        assert fb.rttvar == pytest.approx(rig.tx.rttvar)
    else:
        assert fb.rtt_raw == pytest.approx(0.875 * old + 0.125 * late)


def test_the_stop_age_is_the_overdue_age_unless_set_lower_and_never_above_it():
    rig = psn_1_unanswered()
    assert rig.tx.stop_age(1) == rig.tx.overdue_age(1)
    cc = datapath.Nscc(64 * PMTU, PMTU, PMTU, 512 * PMTU, 0.02, 0.05, 64 * PMTU, 0.024)
    with pytest.raises(ValueError, match="stop_deviations <= overdue_deviations"):
        rig.tx.use_cc(cc, 0.1, 1.0, 0.0, 4.5)  # above the overdue age's 4
    with pytest.raises(ValueError, match=f"<= {datapath.MAX_DEVIATIONS}"):
        rig.tx.use_cc(cc, 0.1, 1.0, 0.0, 1.0, datapath.MAX_DEVIATIONS + 1)
    rig.tx.use_cc(cc, 0.1, 1.0, 0.0, 2.0, 8.0)
    fb = rig.slots[1]
    fb.rtt_sample(0.03, 0.004)
    assert rig.tx.stop_age(1) == pytest.approx(fb.rtt_raw + 2 * fb.rttvar)
    assert rig.tx.overdue_age(1) == pytest.approx(fb.rtt_raw + 8 * fb.rttvar)


def test_a_retired_path_sends_every_packet_still_on_it_again_at_once():
    rig = Rig()
    with_cc(rig, slack=0.002)
    rig.tx.post(0, 0, 1, bytes(12 * PMTU), None)
    for i in range(12):
        rig.send(i * 0.001, budget=1)  # PSN i on EV i % 4
    rig.tx.ack(1, 1, 0b1, None, 0.013)  # PSNs 0 and 2 arrived: nothing on EV 1 did
    inflight = rig.tx.counters()
    assert rig.tx.lose_path(1) == 3  # PSNs 1, 5, 9, long before any is overdue
    assert rig.tx.rtx_queued == 3 and rig.tx.counters()["retired_resent"] == 3
    assert rig.tx.take_losses() == []  # the verdict is made: nothing more to report
    assert rig.tx.lose_path(1) == 0  # none live on it now
    rig.slots[1].usable = False
    resent = [(ev, decode(p).psn) for ev, p in rig.send(0.014)]
    assert sorted(psn for _, psn in resent[:3]) == [1, 5, 9]
    assert all(ev != rig.evs[1] for ev, _ in resent)
    assert inflight["retransmits"] + 3 == rig.tx.counters()["retransmits"]


def psn_1_unanswered() -> Rig:
    """PSNs 0-3 sent on EVs 0-3 a ms apart; all but PSN 1 (EV 1) acked 10 ms later."""
    rig = Rig()
    with_cc(rig, slack=0.002)
    rig.tx.post(0, 0, 1, bytes(8 * PMTU), None)
    for i in range(4):
        rig.send(i * 0.001, budget=1)
    sack(rig, 1, 1, 0b11, 3, rig.evs[3], 0.013)
    return rig


def test_a_late_first_copy_gives_its_ev_the_round_trip_no_resent_ack_could():
    # A path turned slow: its packet is overdue and sent again elsewhere, that copy is
    # acked, then the first copy arrives late. The receiver SACKs the duplicate at once,
    # reflecting the EV it came on: that names the copy, and its round trip is the EV's.
    rig = psn_1_unanswered()
    assert rig.tx.overdue(0.2) == 1  # PSN 1 (EV 1) overdue: sent again
    (ev, _), = rig.send(0.2, budget=1)
    assert ev != rig.evs[1]
    sack(rig, 4, 0, 0, 1, ev, 0.21)  # the resent copy: its EV's round trip, not EV 1's
    assert math.isnan(rig.slots[1].rtt_raw)
    sack(rig, 4, 0, 0, 1, rig.evs[1], 0.301)  # the first copy, 300 ms after it went
    assert rig.slots[1].rtt_raw == pytest.approx(0.3)


def test_no_path_is_waited_for_longer_than_the_longest_rto():
    # However long a path's own round trips have grown, the RTO (which waits for the
    # EV's own patience) cannot be put off past max_rto: a runaway estimate would hold
    # the window's packets for as long.
    rig = psn_1_unanswered()  # max_rto 1 s
    rig.slots[1].rtt_sample(30.0, 5.0)
    assert rig.tx.overdue_age(1) == 1.0 and rig.tx.overdue_at() == pytest.approx(1.001)
    assert rig.tx.overdue(1.001) == 1


def test_a_trim_nack_puts_its_packet_first_in_line():
    rig = Rig()
    rig.tx.post(0, 0, 1, bytes(4 * PMTU), None)
    rig.send(0.0)
    assert rig.tx.nack(1, 1, 0.001, False) == PMTU  # PSN 1: lost, queued behind
    assert rig.tx.nack(3, 3, 0.001, True) == PMTU   # PSN 3: trimmed, first in line
    assert rig.tx.nack(3, 3, 0.001, True) == 0  # the same again: nothing more left flight
    assert [decode(p).psn for _, p in rig.send(0.002)] == [3, 1]
    # The receiver said what became of both: no loss for the path monitor.
    assert rig.tx.take_losses() == []
    # The NACK names EV 1: it is heard from.
    assert rig.slots[1].last_feedback == 0.001 and rig.slots[1].unanswered == 0


def test_a_resend_looks_past_an_ev_named_twice_in_an_order():
    """Oblivious spraying draws with replacement, so an order can name the EV that lost
    a packet twice in a row; the resend still goes on the next other EV in the order."""
    rig = Rig(order=[0, 0, 0, 1])
    rig.tx.post(0, 0, 1, bytes(PMTU), None)
    assert [ev for ev, _ in rig.send(0.0)] == [rig.evs[0]]
    assert rig.tx.nack(0, 0, 0.001, False) == PMTU  # lost, not trimmed: resend elsewhere
    assert [(ev, decode(p).psn) for ev, p in rig.send(0.002)] == [(rig.evs[1], 0)]


def test_a_resend_finds_the_heard_ev_its_draws_missed():
    """An order drawn with replacement can name silent EVs more often than there are
    paths, so a resend's draws may all be silent: it still goes on the order's EV that
    is heard from, not into the silence (where its RTO would double each time)."""
    rig = Rig(order=[0, 1, 1, 1, 1, 2])
    rig.tx.post(0, 0, 1, bytes(6 * PMTU), None)
    assert [ev for ev, _ in rig.send(0.0)] == [rig.evs[i] for i in (0, 1, 1, 1, 1, 2)]
    rig.tx.ack(0, 5, 0b1, 5, 0.5)  # PSN 5, on EV 2: heard from
    assert rig.slots[2].unanswered == 0 and rig.slots[1].unanswered == 4
    assert rig.tx.nack(0, 0, 1.5, False) == PMTU  # PSN 0, lost on EV 0
    # EV 1 silent for a second, the window; the draws name 0, 1, 1, 1: none to use
    assert [(ev, decode(p).psn) for ev, p in rig.send(1.6, silent=1.0)] == [(rig.evs[2], 0)]


def test_rto_fires_old_packets_and_reports_each_with_its_ev():
    rig = Rig()
    rig.tx.post(0, 0, 1, bytes(8 * PMTU), None)
    for i in range(8):
        rig.send(i * 0.001, budget=1)  # PSN i on EV i % 4 at i ms
    rig.tx.ack(0, 5, 0b100, None, 0.009)  # PSN 7 (EV 3, sent at 7 ms) arrived
    rig.tx.heard(1, 0.009)  # EV 1 answered since its packets left
    # Older than 100 ms at 105.5 ms: PSNs 0-5, each reported as an RTO loss with its EV
    # and send time (whether EV 1's answer since clears it is the path monitor's call).
    assert rig.tx.rto(0.1055, 0.1) == 6
    assert rig.tx.take_losses() == [(i % 4, i * 0.001, 1, i) for i in range(6)]
    assert rig.tx.rtx_queued == 6 and rig.tx.first_live() == 0.006
    assert rig.tx.rto(0.2, 0.1) == 1 and rig.tx.take_losses() == [(2, 0.006, 1, 6)]


def test_a_message_completes_once_all_its_packets_are_acked_and_its_buffer_is_let_go():
    rig = Rig()
    src = bytearray(3 * PMTU)
    rig.tx.post(7, 0, 1, src, None)
    rig.tx.post(8, 0, 1, bytes(PMTU), 5)
    rig.send(0.0)
    with pytest.raises(BufferError):
        src.append(0)  # the sender holds it while packets may need resending
    rig.tx.ack(2, 0, 0b10, None, 0.01)  # PSNs 0, 1 and 3
    assert rig.tx.take_done() == [8]
    rig.tx.ack(4, 0, 0, None, 0.01)
    assert rig.tx.take_done() == [7] and rig.tx.take_done() == []
    src.append(0)  # released


def test_an_ack_after_a_retransmission_is_the_latest_copys():
    rig = Rig()
    rig.tx.post(0, 0, 1, bytes(2 * PMTU), None)
    rig.send(0.0)
    rig.tx.nack(0, -1, 0.001, False)  # PSN 0 (EV 0) lost
    (ev, _), = rig.send(0.002)  # resent on another EV
    assert ev != rig.evs[0]
    rig.tx.ack(1, 0, 0, None, 0.0021)
    # Which copy arrived cannot be told: the EV heard from is the one that carried the
    # latest, and EV 0 is not credited.
    assert rig.slots[rig.evs.index(ev)].last_feedback == 0.0021
    assert rig.slots[0].last_feedback == -1.0 and rig.tx.take_losses() == []


def test_an_ack_after_an_overdue_resend_credits_no_ev():
    # PSN 0 went on EV 0, fell overdue and went again on another EV; its ack may be the
    # late first copy's: the EV of the second, perhaps dead, is not heard from.
    rig = Rig()
    with_cc(rig, slack=0.002)
    rig.tx.post(0, 0, 1, bytes(PMTU), None)
    rig.send(0.0)
    assert rig.tx.overdue(1.0) == 1
    (ev, _), = rig.send(1.001)
    assert ev != rig.evs[0]
    rig.tx.ack(1, 0, 0, None, 1.002)
    assert rig.tx.outstanding == 0
    assert [s.last_feedback for s in rig.slots] == [-1.0] * len(rig.slots)


def test_unanswered_packets_are_counted_per_ev():
    rig = Rig()
    rig.tx.post(0, 0, 1, bytes(12 * PMTU), None)
    rig.send(0.5)
    assert [s.unanswered for s in rig.slots] == [3, 3, 3, 3]
    assert all(s.silent_since_raw == 0.5 and s.sent == 3 for s in rig.slots)
    rig.tx.ack(1, 0, 0, None, 0.6)  # PSN 0, on EV 0
    assert rig.slots[0].unanswered == 0 and math.isnan(rig.slots[0].silent_since_raw)


def test_unusable_evs_are_skipped_and_no_usable_ev_sends_nothing():
    rig = Rig()
    rig.slots[1].usable = rig.slots[2].usable = False
    rig.tx.post(0, 0, 1, bytes(4 * PMTU), None)
    assert [ev for ev, _ in rig.send(0.0, budget=3)] == [rig.evs[0], rig.evs[3], rig.evs[0]]
    for s in rig.slots:
        s.usable = False
    rotations = rig.rotations
    assert rig.send(0.0) == [] and rig.tx.pending == 1
    assert rig.rotations == rotations + 2  # it asked twice for a rotation, as the profile did


def test_the_trace_records_every_data_packet():
    rig = Rig()
    rig.tx.post(0, 0, 1, bytes(3 * PMTU), None)
    rig.send(0.25)
    rig.tx.nack(2, -1, 0.3, True)
    rig.send(0.5)
    t, ev, rtx, overflow = rig.tx.take_trace()
    assert len(rtx) == 4 and overflow == 0 and list(rtx) == [0, 0, 0, 1]
    assert rig.tx.take_trace()[2] == b""


def test_bad_set_up_is_refused():
    rig = Rig()
    with pytest.raises(ValueError):
        rig.tx.set_order([0, 9])  # names no path
    with pytest.raises(ValueError):
        datapath.Sender(0, PMTU, (b"",) * 6, (0, 0, 1.0), lambda now: None)
    with pytest.raises(ValueError):
        rig.tx.set_paths([(rig.slots[0], 1, 2, 3, b"short", addr(1), addr(2))])


def _rto_reference(srtt: float | None, rttvar: float, backoff: int, lo: float,
                   hi: float) -> float:
    """The RTO as the Python core computed it before the sender held the estimate."""
    base = lo if srtt is None else max(lo, srtt + 4 * rttvar)
    return min(hi, base * backoff)


@settings(max_examples=300, deadline=None)
@given(srtt=st.one_of(st.none(), st.floats(0.0, 2.0)), rttvar=st.floats(0.0, 1.0),
       backoff=st.integers(1, 64))
def test_the_senders_rto_is_the_references(srtt, rttvar, backoff):
    _, ca, _ = pair()
    ca.tx.srtt_raw = float("nan") if srtt is None else srtt
    ca.tx.rttvar, ca.backoff = rttvar, backoff
    assert ca.srtt == srtt
    assert ca.rto == _rto_reference(srtt, rttvar, backoff, ca.cfg.min_rto, ca.cfg.max_rto)


def test_use_cc_refuses_bounds_that_cannot_be():
    _, ca, _ = pair()
    with pytest.raises(ValueError, match="min_rto"):
        ca.tx.use_cc(ca.cc, 0.2, 0.1, 0.0)
    with pytest.raises(TypeError):
        ca.tx.use_cc(object(), 0.1, 0.2, 0.0)


def test_an_ack_of_psns_never_sent_is_ignored_whole_and_counted():
    """A peer acknowledges only what arrived: a cumulative PSN past every PSN sent is a
    stale copy from a QP made before on the same number, or forged. Taken, it would move
    una past packets still on their way, and nothing would send them again."""
    rig = Rig()
    cc = with_cc(rig)
    rig.tx.post(0, 0, 1, bytes(8 * PMTU), None)
    assert len(rig.send(0.0, budget=4)) == 4  # PSNs 0-3 sent, 4-7 pending
    cwnd = cc.cwnd
    assert rig.tx.ack(6, 0, 0, None, 0.01)[0] == 0
    assert rig.tx.sack(8, 0, 0b1, -1, rig.evs[0], 0, 0, 0.01) is False
    assert rig.tx.una == 0 and rig.tx.outstanding == 4 and rig.tx.pending == 4
    assert cc.cwnd == cwnd and rig.tx.srtt_raw != rig.tx.srtt_raw  # no sample: NaN
    assert rig.tx.counters()["acks_beyond_sent"] == 2
    assert rig.tx.sack(4, 0, 0, -1, rig.evs[0], 0, 0, 0.01) is True  # all it sent: taken
    assert rig.tx.una == 4 and rig.tx.outstanding == 0
