"""A NIC's compiled ports (mrcemu/datapath/ports.c) over AF_UNIX datagram socketpairs,
with explicit `now`: token-bucket pacing and its measurements, queue limits, the
requester and responder framing into the queues, and burst receive handing an attached
QP's data straight to its responder and its unmarked SACKs to its sender. No root, no
namespaces."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcemu import datapath
from mrcemu.nic.meter import Lateness
from mrcemu.topology.addressing import host_address
from mrcemu.topology.paths import make_ev
from mrcemu.transport.evs import EvState
from mrcemu.transport.simnet import SimNet
from mrcemu.wire import codec
from mrcemu.wire.constants import Opcode, SackMark
from mrcemu.wire.layout import BTH_AT
from tests.unit.transport.helpers import pair, write

ETH = bytes(range(12)) + b"\x86\xdd"
PLANES = 8  # the default topology's


class Rig:
    """Ports on one socketpair per plane: the peer ends are the wire."""

    def __init__(self, rate: float = 1e12, cap: int = 64, slot: int = 9014, slots: int = 2,
                 bucket: float = 18028, planes: int = PLANES, host: int = 7) -> None:
        self.pairs = {p: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
                      for p in range(planes)}
        for a, b in self.pairs.values():
            a.setblocking(False)
            b.setblocking(False)
            b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.ports = datapath.Ports(
            [(a.fileno(), p, ETH, host_address(p, host).packed, rate)
             for p, (a, _) in self.pairs.items()], 0.0, cap, slot, slots, bucket)

    def send_all(self, now: float = 1.0) -> None:
        """Drain until nothing waits (a second a round: every bucket refills)."""
        while self.ports.queued:
            self.ports.drain(now)
            now += 1.0

    def wire(self, plane: int) -> list[bytes]:
        """What the port put on the wire (whole frames), in order."""
        out = []
        while True:
            try:
                out.append(self.pairs[plane][1].recv(65536))
            except BlockingIOError:
                return out

    def inject(self, plane: int, frame: bytes) -> None:
        """A frame arriving at the port."""
        self.pairs[plane][1].send(frame)

    def close(self) -> None:
        for a, b in self.pairs.values():
            a.close()
            b.close()


@pytest.fixture
def rig():
    r = Rig()
    yield r
    r.close()


def ev(plane: int, index: int = 0) -> int:
    return make_ev(plane, 0, index)


def test_the_bucket_paces_sends_and_measures_how_late_they_ran():
    r = Rig(rate=1e6, planes=1, slots=2, bucket=2000)
    try:
        p = r.ports
        for i in range(3):
            assert p.queue(ev(0), bytes([i]) * 986)  # 1000 bytes with the Ethernet header
        assert p.budget == 0 and p.queued == 3
        assert p.drain(0.0) == 1  # an empty bucket may borrow one frame
        assert p.next_send() == pytest.approx(0.001)  # 1000 bytes owed at 1 MB/s
        assert p.drain(0.0005) == 0  # still in debt
        assert p.drain(0.001) == 1  # due now: 0 late
        assert p.drain(0.0025) == 1  # due at 0.002: 0.5 ms late
        assert p.next_send() is None and p.queued == 0 and p.budget == 2
        frames = r.wire(0)
        assert frames == [ETH + bytes([i]) * 986 for i in range(3)]
        expect = Lateness()
        for late in (0.0, 0.0005):
            expect.add(late)
        buckets, n, worst = p.send_late()
        assert (buckets, n) == (expect.buckets, expect.n)
        assert worst == pytest.approx(0.0005)
        # Backlogged from the first drain that left frames to the last; the bytes sent
        # meanwhile are the two frames that waited.
        backlogged, sent = p.load()[0]
        assert backlogged == pytest.approx(0.0025) and sent == 2000
        p.reset_meter()
        assert p.load()[0] == (0.0, 0) and p.send_late() == ({}, 0, 0.0)
        assert p.counters()["ports"][0]["tx_frames"] == 3
    finally:
        r.close()


def ip6(dscp: int, n: int, fill: int) -> bytes:
    """`n` bytes that begin as an IPv6 header of this DSCP: a frame the port classes."""
    tclass = dscp << 2
    return bytes([0x60 | tclass >> 4, (tclass & 0xF) << 4]) + bytes([fill]) * (n - 2)


def test_control_frames_leave_before_the_data_queued_on_their_port_in_their_order():
    from mrcemu.wire.constants import Dscp

    r = Rig(rate=1e6, planes=1, slots=2, bucket=2000)
    try:
        p = r.ports
        data = [ip6(Dscp.TRIMMABLE, 986, i) for i in range(3)]
        for f in data:
            assert p.queue(ev(0), f)
        assert p.budget == 0
        sack, nack = ip6(Dscp.CONTROL, 140, 0xA), ip6(Dscp.CONTROL, 120, 0xB)
        big = ip6(Dscp.CONTROL, 700, 0xC)  # larger than a control slot: waits with the data
        for f in (sack, nack, big):
            assert p.queue(ev(0), f)
        # the control lane takes no slot of the transport's, and is counted as queued
        assert p.budget == 0 and p.queued == 6 and p.backlog() == {0: 6}
        r.send_all()
        assert r.wire(0) == [ETH + f for f in (sack, nack, *data, big)]
        assert p.counters()["ports"][0]["tx_control"] == 2
        assert p.counters()["ports"][0]["tx_frames"] == 6
    finally:
        r.close()


def test_a_control_frame_is_paced_like_any_other():
    from mrcemu.wire.constants import Dscp

    r = Rig(rate=1e6, planes=1, slots=2, bucket=1000)
    try:
        p = r.ports
        assert p.queue(ev(0), ip6(Dscp.TRIMMABLE, 986, 1))
        assert p.drain(0.0) == 1  # the bucket borrows the data frame's 1000 bytes
        assert p.queue(ev(0), ip6(Dscp.CONTROL, 186, 2))
        assert p.drain(0.0005) == 0  # still owed: the control lane waits for tokens too
        assert p.drain(0.0011) == 1
    finally:
        r.close()


@given(st.floats(min_value=0.0, max_value=100.0, allow_nan=False))
def test_the_lateness_buckets_are_the_meters(late):
    assert datapath.Ports.late_bucket(late) == Lateness.bucket(late)


def test_queue_limits_are_counted_never_overrun(rig):
    small = Rig(cap=2, slot=100, planes=1)
    try:
        p = small.ports
        assert p.queue(ev(0), bytes(86))  # 100 with the header: fits exactly
        assert not p.queue(ev(0), bytes(87))  # too long for a slot
        assert p.queue(ev(0), bytes(10))
        assert not p.queue(ev(0), bytes(10))  # the queue is full
        assert not p.queue(ev(3), bytes(10))  # no port in plane 3
        c = p.counters()
        assert (c["oversize"], c["no_port"], c["ports"][0]["queue_full"]) == (1, 1, 1)
        assert p.backlog() == {0: 2}
    finally:
        small.close()


def test_a_qps_budget_is_the_free_slots_of_its_own_planes_ports(rig):
    p = rig.ports  # two slots a port
    assert p.budget == 2 * PLANES and p.budget_of((1 << PLANES) - 1) == p.budget
    assert p.queue(ev(2), bytes(100)) and p.queue(ev(2), bytes(100))
    # A QP on plane 2 alone may queue nothing more; one on planes 2 and 5, two frames;
    # the ports' whole budget would have let the first put 14 more on plane 2's port.
    assert p.budget_of(1 << 2) == 0 and p.budget_of(1 << 2 | 1 << 5) == 2
    assert p.budget == 2 * PLANES - 2 and p.budget_of(0) == 0
    assert p.budget_of(1 << 63) == 0  # no port in that plane


def test_a_port_whose_socket_fails_loses_its_queue_not_the_daemon():
    r = Rig(planes=1)
    p = r.ports
    p.queue(ev(0), bytes(100))
    r.pairs[0][1].close()  # the wire is gone: sends fail with ECONNREFUSED
    assert p.drain(0.0) == 0
    assert p.queued == 0 and p.counters()["ports"][0]["send_errors"] == 1
    r.pairs[0][0].close()


def test_bad_construction_is_refused():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    via = bytes(16)
    with a, b:
        with pytest.raises(ValueError):
            datapath.Ports([(a.fileno(), 0, ETH, via, 1.0), (a.fileno(), 0, ETH, via, 1.0)],
                           0.0, 4, 100, 2, 100.0)  # one plane twice
        with pytest.raises(ValueError):
            datapath.Ports([(a.fileno(), 0, ETH[:5], via, 1.0)], 0.0, 4, 100, 2, 100.0)
        with pytest.raises(ValueError):
            datapath.Ports([(a.fileno(), 0, ETH, via, 1.0)], 0.0, 4, 100, 5, 100.0)


def _sent_by_plane(frames: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for e, f in frames:
        out.setdefault((e >> 26) & 0xF, []).append(ETH + f)
    return out


def test_the_requester_frames_into_the_queues_what_it_would_have_returned(rig):
    # Two identical connections, one framing into a list, one into the ports.
    _, ref, ref_peer = pair(seed=4)
    _, ca, cb = pair(seed=4)
    write(ref, ref_peer, 300_000)
    write(ca, cb, 300_000)
    want = ref.packets_to_send(0.001, 40)
    n = ca.send_to(rig.ports, 0.001, 40)
    assert n == len(want) > 0
    rig.send_all()
    got = {p: rig.wire(p) for p in range(PLANES)}
    assert {p: f for p, f in got.items() if f} == _sent_by_plane(want)
    assert (ca.tx.next_psn, ca.tx.inflight) == (ref.tx.next_psn, ref.tx.inflight)


def test_a_frame_no_port_takes_goes_again_and_is_no_paths_loss():
    small = Rig(cap=2)
    try:
        _, ca, cb = pair(seed=4)
        write(ca, cb, 300_000)
        # Planes interleave: sixteen frames fill the eight two-frame queues, and the
        # seventeenth finds its port full. The burst ends there.
        assert ca.send_to(small.ports, 0.001, 40) == 17
        ports = small.ports.counters()["ports"]
        assert sum(p["queue_full"] for p in ports.values()) == 1
        assert small.ports.queued == 16 and ca.tx.inflight == 16 * 4096
        # It never left the host: queued to go first, and nothing for the path monitor.
        assert ca.tx.rtx_queued == 1 and ca.tx.take_losses() == []
        small.send_all()
        (ev9, frame), = ca.packets_to_send(0.002, 1)
        assert codec.decode(SimNet().deliver(frame)).psn == 16
    finally:
        small.close()


def test_the_responder_queues_its_control_frames_as_it_would_have_returned_them(rig):
    _, ca, ref = pair(seed=5)
    _, ca2, cb = pair(seed=5)
    for c, peer in ((ca, ref), (ca2, cb)):
        write(c, peer, 64 * 4096)
    for sender, receiver in ((ca, ref), (ca2, cb)):
        for _e, f in sender.packets_to_send(0.0, 9):
            receiver.receive_frame(SimNet().deliver(f), 0.0)
    want = ref.packets_to_send(0.0, 0)  # SACKs, control only
    assert want
    assert cb.send_to(rig.ports, 0.0, 0) == len(want)
    rig.send_all()
    got = {p: rig.wire(p) for p in range(PLANES)}
    assert {p: f for p, f in got.items() if f} == _sent_by_plane(want)


def test_receive_places_data_for_known_qps_and_hands_back_everything_else(rig):
    _, ca, cb = pair(seed=6)
    data, mr = write(ca, cb, 20 * 4096)
    frames = ca.packets_to_send(0.0, 20)
    assert len(frames) == 20
    by_plane: dict[int, list[bytes]] = {}
    for e, f in frames:
        by_plane.setdefault((e >> 26) & 0xF, []).append(ETH + SimNet().deliver(f))
    cb.attach(rig.ports)
    plane0 = (frames[0][0] >> 26) & 0xF
    first = by_plane[plane0][0]
    # the same packet, its payload altered: the ICRC no longer matches
    corrupt = bytearray(first)
    corrupt[-100] ^= 0xFF
    rig.inject(plane0, bytes(corrupt))
    total_read = placed = 0
    touched: set[int] = set()
    rest: list[bytes] = []
    for plane, fs in by_plane.items():
        for f in fs:
            rig.inject(plane, f)
        while True:
            n, b, qpns, others = rig.ports.receive(plane, 4, 0.01)
            if not n:
                break
            total_read += n
            placed += b
            touched.update(qpns)
            rest.extend(others)
    assert total_read == 21
    assert placed == len(data) and cb.rx_bytes == len(data)
    assert bytes(mr.buf) == data  # every byte in place, none from the corrupt copy
    assert touched == {cb.local_qpn}
    assert rest == [bytes(corrupt)]  # not ours to place: the caller counts it


def test_receive_hands_back_whole_what_no_attached_qp_takes(rig):
    _, ca, cb = pair(seed=6)
    write(ca, cb, 4096)
    (e, f), = ca.packets_to_send(0.0, 1)
    plane = (e >> 26) & 0xF
    frame = ETH + SimNet().deliver(f)
    rig.inject(plane, frame)
    assert rig.ports.receive(plane, 4, 0.0) == (1, 0, [], [frame])
    assert cb.rx_bytes == 0


def test_a_detached_qp_takes_nothing_more_and_the_others_stay_attached(rig):
    """A QP destroyed (daemon.remake): its copies still on the wire come back as frames,
    for the daemon to count as another QP's, and never reach the responder that placed
    its data. The QPs attached with it keep theirs."""
    _, ca, cb = pair(seed=6)
    _, cc, cd = pair(seed=6, a=3)  # h7's other peer
    write(ca, cb, 4096)
    write(cc, cd, 4096)
    for c in (cb, cd):
        c.attach(rig.ports)
    assert rig.ports.detach(cb.local_qpn) is True
    assert rig.ports.detach(cb.local_qpn) is False  # once
    frames = []
    for src in (ca, cc):
        (e, f), = src.packets_to_send(0.0, 1)
        frames.append(((e >> 26) & 0xF, ETH + SimNet().deliver(f)))
    (plane_b, frame_b), (plane_d, frame_d) = frames
    rig.inject(plane_b, frame_b)
    assert rig.ports.receive(plane_b, 4, 0.0) == (1, 0, [], [frame_b]) and cb.rx_bytes == 0
    rig.inject(plane_d, frame_d)
    assert rig.ports.receive(plane_d, 4, 0.0) == (1, 4096, [cd.local_qpn], [])
    cb.attach(rig.ports)  # attached again: it takes them again
    rig.inject(plane_b, frame_b)
    assert rig.ports.receive(plane_b, 4, 0.0) == (1, 4096, [cb.local_qpn], [])


def test_receive_accepts_only_the_ports_own_address_as_the_outer_destination():
    r = Rig(host=3)  # the ports of h3, not of the receiver h7 the frames are for
    try:
        _, ca, cb = pair(seed=7)
        write(ca, cb, 4096)
        (e, f), = ca.packets_to_send(0.0, 1)
        plane = (e >> 26) & 0xF
        r.inject(plane, ETH + SimNet().deliver(f))
        cb.attach(r.ports)
        n, b, qpns, others = r.ports.receive(plane, 4, 0.0)
        assert (n, b, qpns) == (1, 0, []) and len(others) == 1
        assert cb.rx_bytes == 0
    finally:
        r.close()


def _acks(sender, receiver, pkts: int, now: float, ce: bool = False) -> list[tuple[int, bytes]]:
    """The receiver's SACKs for the sender's next `pkts` data packets (CE-marked on the
    way if `ce`: a switch's ECN mark)."""
    for _e, f in sender.packets_to_send(0.0, pkts):
        pkt = bytearray(SimNet().deliver(f))
        if ce:
            pkt[1] |= 0x30  # the outer header's ECN bits: CE
        receiver.receive_frame(bytes(pkt), now)
    # Not the probe a receiving connection sends to keep its ack EVs fresh (B9).
    return [(e, f) for e, f in receiver.packets_to_send(now, 0)
            if f[BTH_AT] != Opcode.RELIABILITY_PROBE_REQ]


@pytest.fixture
def rig0():
    r = Rig(host=0)  # the requester's NIC: pair() writes from h0 to h7
    yield r
    r.close()


def test_unmarked_sacks_go_to_the_sender_whole_and_do_what_the_policy_path_does(rig0):
    rig = rig0
    # Two identical pairs: one requester takes its SACKs through receive_frame (decoded
    # for the policy core), the other through the ports, whole, with no Python call.
    _, ref, ref_peer = pair(seed=8)
    _, ca, cb = pair(seed=8)
    write(ref, ref_peer, 64 * 4096)
    write(ca, cb, 64 * 4096)
    ca.attach(rig.ports)
    want = _acks(ref, ref_peer, 32, 0.001)
    acks = _acks(ca, cb, 32, 0.001)
    assert acks == want and len(acks) > 1
    for i, ((e, f), (_, g)) in enumerate(zip(acks, want, strict=True)):
        now = 0.002 + i * 1e-4
        ref.receive_frame(SimNet().deliver(g), now)
        plane = (e >> 26) & 0xF
        rig.inject(plane, ETH + SimNet().deliver(f))
        assert rig.ports.receive(plane, 4, now) == (1, 0, [ca.local_qpn], [])
        ca.received(now)
    assert ca.stats.sacks_rx == ref.stats.sacks_rx == len(acks)
    assert ca.tx.una == ref.tx.una > 0 and ca.tx.inflight == ref.tx.inflight
    assert (ca.srtt, ca.rttvar, ca.backoff, ca.cc.cwnd, ca.cc.base_rtt) == (
        ref.srtt, ref.rttvar, ref.backoff, ref.cc.cwnd, ref.cc.base_rtt)
    assert ca.srtt is not None and ca.cc.cwnd > ca.cfg.init_cwnd  # the window grew
    assert [(e.last_feedback, e.skip_len) for e in ca.profile.evs.values()] == [
        (e.last_feedback, e.skip_len) for e in ref.profile.evs.values()]


def test_a_marked_sack_comes_back_parsed_for_the_policy_core(rig0):
    rig = rig0
    _, ca, cb = pair(seed=9)
    write(ca, cb, 8 * 4096)
    ca.attach(rig.ports)
    acks = _acks(ca, cb, 8, 0.001, ce=True)
    assert acks
    e, f = acks[0]
    plane = (e >> 26) & 0xF
    rig.inject(plane, ETH + SimNet().deliver(f))
    n, placed, qpns, rest = rig.ports.receive(plane, 4, 0.002)
    assert (n, placed, qpns, ca.stats.sacks_rx) == (1, 0, [], 0)  # nothing done in C
    (d,) = rest
    assert isinstance(d, codec.Decoded) and d.headers["SETH"]["m"] == SackMark.SKIP_ONCE
    ca.receive_decoded(d, 0.002)
    assert ca.stats.sacks_rx == 1 and ca.tx.una > 0
    reflected = ca.profile.evs[d.headers["SETH"]["entropy"]]
    assert reflected.state is EvState.SKIP


def test_attach_refuses_what_is_not_a_responder_and_a_sender(rig):
    _, ca, _cb = pair(seed=10)
    with pytest.raises(TypeError):
        rig.ports.attach(ca.local_qpn, ca.tx, ca.tx)
    with pytest.raises(TypeError):
        rig.ports.attach(ca.local_qpn, ca.rx, ca.rx)
    with pytest.raises(ValueError, match="24 bits"):
        rig.ports.attach(1 << 24, ca.rx, None)


def test_the_scale_models_latency_holds_each_frame_by_where_it_came_from(rig):
    # h0 (the writer) is on the other leaf from h7: three switches, 32.7 ms one way at
    # 1:5000; a same-leaf host's frames would wait 25.45 ms. Nothing reaches the
    # responder before its release, and every byte does at it, in order, once.
    _, ca, cb = pair(seed=6)
    data, mr = write(ca, cb, 8 * 4096)
    frames = ca.packets_to_send(0.0, 8)
    cb.attach(rig.ports)
    delays = [0.0327] * 4 + [0.02545] * 4  # by source host: leaf 0, leaf 1
    rig.ports.set_delay(delays, 1 << 20)
    plane = None
    for e, f in frames:
        plane = (e >> 26) & 0xF
        rig.inject(plane, ETH + SimNet().deliver(f))
        n, b, qpns, rest = rig.ports.receive(plane, 4, 0.001)
        assert (n, b, qpns, rest) == (1, 0, [], [])  # read, held
    assert cb.rx_bytes == 0 and rig.ports.next_release() == pytest.approx(0.0337)
    assert rig.ports.release(0.0336) == (0, {}, [], [])
    n, by_plane, qpns, rest = rig.ports.release(0.0337)
    assert (n, qpns, rest) == (8, [cb.local_qpn], [])
    sent = {}
    for e, _f in frames:
        sent[(e >> 26) & 0xF] = sent.get((e >> 26) & 0xF, 0) + 4096
    assert by_plane == sent  # each plane's bytes, as its port received them
    assert bytes(mr.buf) == data and rig.ports.next_release() is None
    c = rig.ports.delay_counters()
    assert (c["pushed"], c["released"], c["dropped"], c["held"]) == (8, 8, 0, 0)
    # A frame from no host of the fabric is not held: the data path judges it at once.
    stray = ETH + bytes(40) + bytes(10)
    rig.inject(plane, stray)
    assert rig.ports.receive(plane, 4, 0.05) == (1, 0, [], [stray])
    rig.ports.set_delay([], 1 << 20)  # none: off
    assert rig.ports.delay_counters() is None
