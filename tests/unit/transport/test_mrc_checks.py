"""Receiver validation, PSN window, ordering of completions and port status."""

from __future__ import annotations

import hashlib

from mrcemu.transport.events import MessageFailed, MessageReceived
from mrcemu.transport.evs import EvState
from mrcemu.wire import codec
from mrcemu.wire.constants import NackReason, Opcode
from tests.unit.transport.helpers import drain, pair, write


def test_wrong_rkey_and_out_of_range_va_are_refused_and_counted_memory_unchanged():
    net, ca, cb = pair()
    mr = cb.memory.register(64 << 10)
    before = bytes(mr.buf)
    ca.post_write(b"\xAA" * 8192, mr.base, mr.rkey + 99, 0.0)  # wrong R_Key
    ca.post_write(b"\xBB" * 8192, mr.base + len(mr.buf), mr.rkey, 0.0)  # past the end
    ca.post_write(b"\xCC" * 100, mr.base - 4096, mr.rkey, 0.0)  # below the start
    net.run(0.3)
    assert bytes(mr.buf) == before
    assert cb.stats.dropped["bad_rkey"] >= 2
    assert cb.stats.dropped["va_out_of_range"] >= 3
    assert cb.stats.rx_data == 0
    # each failed on its NAK, and their PSNs were taken empty: nothing is left to retry
    assert [e.msn for e in drain(ca, MessageFailed)] == [0, 1, 2] and ca.idle


def test_malformed_packets_are_counted_and_never_written():
    net, ca, cb = pair()
    data, mr = write(ca, cb, 8192)
    pkts = ca.packets_to_send(0.0)
    ev, good = pkts[0]
    bad = bytearray(net.deliver(good))
    bad[-100] ^= 0xFF  # payload byte: the ICRC no longer matches
    cb.receive(bytes(bad), 0.001)
    cb.receive(b"\x60" + b"\x00" * 20, 0.001)
    assert cb.stats.dropped["malformed_bad_icrc"] == 1
    assert cb.stats.dropped["malformed_truncated"] == 1
    assert not any(mr.buf)


def test_psn_beyond_the_window_gets_nack_psn_oor_window():
    net, ca, cb = pair(rcv_window=16)
    mr = cb.memory.register(1 << 20)
    ca.post_write(bytes(1 << 20), mr.base, mr.rkey, 0.0)
    pkts = ca.packets_to_send(0.0)  # the sender itself keeps to the window ...
    assert len(pkts) == 16
    # ... so a confused sender, far ahead, is forged: PSN 200 on the path of PSN 0.
    ev, first = pkts[0]
    d, p = codec.decode(net.deliver(first)), ca.profile.evs[ev].path
    pkt = codec.encode_data(p.src, p.delivered, via=p.container, sport=d.sport,
                            flow_label=d.flow_label, dscp=0, ecn=0, payload=bytes(4096),
                            opcode=Opcode.WRITE_ONLY, dqpn=d.bth["dqpn"], psn=200, msn=1,
                            va=mr.base, rkey=mr.rkey, dmalen=4096, timestamp=0)
    cb.receive(net.deliver(pkt), 0.001)
    nack = codec.decode(net.deliver(cb.packets_to_send(0.001)[-1][1]))
    assert nack.opcode == Opcode.RELIABILITY_NACK
    assert nack.headers["NETH"]["nack_reason"] == NackReason.PSN_OOR_WINDOW
    assert nack.headers["NETH"]["nack_psn"] == 200
    assert cb.stats.dropped["psn_out_of_window"] == 1


def test_messages_complete_in_msn_order_and_an_early_immediate_waits():
    net, ca, cb = pair()
    mr = cb.memory.register(1 << 20)
    ca.post_write(bytes(range(256)) * 256, mr.base, mr.rkey, 0.0)  # msn 0, 64 KiB
    ca.post_write(b"z" * 100, mr.base + (64 << 10), mr.rkey, 0.0, imm=0xFEED)  # msn 1
    pkts = [net.deliver(p) for _, p in ca.packets_to_send(0.0)]
    # Deliver the second message (with its immediate) first.
    cb.receive(pkts[-1], 0.001)
    assert drain(cb, MessageReceived) == []
    for p in pkts[:-1]:
        cb.receive(p, 0.002)
    assert drain(cb, MessageReceived) == [MessageReceived(0, None, 0.002),
                                          MessageReceived(1, 0xFEED, 0.002)]


def test_plane_loss_port_status_stops_the_peer_using_the_plane():
    net, ca, cb = pair()
    data, mr = write(ca, cb, 16 << 20)
    net.run(0.05)
    # h7 loses its plane-4 port: its NIC tells h0.
    cb.port_status(set(range(8)) - {4}, net.now)
    # The plane is dead at the far end: every path on it, both ways.
    for s in range(4):
        net.path("h0", 4, s).blackhole = True
        net.path("h7", 4, s).blackhole = True
    t_update = net.now
    net.run(net.now + 0.05)
    assert 4 in ca.profile.planes_down
    # ...and the NIC gives the QP only its live planes' ports' send slots
    assert ca.plane_mask == 0xFF & ~(1 << 4) and cb.plane_mask == 0xFF & ~(1 << 4)
    late = [ev for t, src, ev, op in net.sent_log
            if src == "h0" and t > t_update + 0.01 and (ev >> 26) & 0xF == 4
            and op != Opcode.RELIABILITY_PROBE_REQ]
    assert late == []
    net.run(30.0, stop=lambda: ca.idle)
    assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
    # Plane back: EVs return through probes.
    for s in range(4):
        net.path("h0", 4, s).blackhole = False
        net.path("h7", 4, s).blackhole = False
    cb.port_status(set(range(8)), net.now)
    net.run(net.now + 0.5)
    assert ca.plane_mask == 0xFF
    plane4 = [e for e in ca.profile.evs.values() if e.path.plane == 4]
    assert 4 not in ca.profile.planes_down
    assert all(e.state is EvState.GOOD for e in plane4)


def test_what_was_in_flight_on_a_plane_that_went_down_goes_again_at_once():
    # A plane that went down took its packets with it: they go again on the other planes
    # now, not each at its overdue age (a round trip or more later).
    net, ca, cb = pair()
    write(ca, cb, 1 << 20)
    sent = ca.packets_to_send(0.0)
    on_4 = sorted(codec.decode(net.deliver(p)).psn for ev, p in sent if (ev >> 26) & 0xF == 4)
    assert on_4 and ca.stats.retired_resent == 0
    ca.port_status(set(range(8)) - {4}, 0.001)  # h0's own plane-4 port went down
    # Queued to go again (first, as the window lets them), none found overdue.
    assert ca.stats.retired_resent == len(on_4) == ca.tx.rtx_queued
    assert ca.stats.overdue_resent == 0


def _planes_down_then(ca, net, planes: list[int]) -> None:
    """h0's ports of `planes` go down, one update each, every one delivered."""
    up = set(range(8))
    for p in planes:
        up.discard(p)
        for s in range(4):
            net.path("h0", p, s).blackhole = True
            net.path("h7", p, s).blackhole = True
        ca.port_status(set(up), net.now)
        net.run(net.now + 0.1)


def _endpoint_requests(net, since: float) -> list[tuple[float, int]]:
    return [(t, ev) for t, src, ev, op in net.sent_log
            if src == "h0" and t >= since and op == Opcode.ENDPOINT_REQUEST]


def test_a_lost_port_status_update_goes_again_until_the_peer_answers():
    # E1 on the fabric: the update telling h1 that h0's plane-0 port was back was lost,
    # and h1 left plane 0 unused until h0's next update, two seconds later.
    net, ca, cb = pair()
    write(ca, cb, 1 << 20)
    net.run(0.05)
    _planes_down_then(ca, net, [0, 1])
    assert cb.profile.planes_down == {0, 1}
    for s in range(4):
        net.path("h0", 0, s).blackhole = False
        net.path("h7", 0, s).blackhole = False
    t = net.now
    ca.port_status(set(range(8)) - {1}, t)
    lost = [p for p in ca.packets_to_send(t)
            if codec.decode(net.deliver(p[1])).opcode == Opcode.ENDPOINT_REQUEST]
    assert len(lost) == 1  # taken off the wire: the first copy never arrives
    net.run(t + 0.5)
    assert cb.profile.planes_down == {1}  # a later copy told it
    copies = _endpoint_requests(net, t)
    assert len(copies) == 1 and ca.stats.port_updates_resent == 1
    # the copy waited a control probe's round trip, and went on another plane
    assert copies[0][0] - t >= ca.srtt
    assert (copies[0][1] >> 26) & 0xF != (lost[0][0] >> 26) & 0xF
    net.run(net.now + 1.0)
    assert len(_endpoint_requests(net, t)) == 1  # answered: no more copies


def test_an_answered_port_status_update_is_sent_once():
    net, ca, cb = pair()
    write(ca, cb, 1 << 20)
    net.run(0.05)
    t = net.now
    _planes_down_then(ca, net, [3])
    net.run(net.now + 1.0)
    assert cb.profile.planes_down == {3}
    assert len(_endpoint_requests(net, t)) == 1 and ca.stats.port_updates_resent == 0


def test_a_connection_that_does_not_announce_stops_using_the_plane_and_sends_nothing():
    # The update is the NIC's, one per peer NIC: the daemon has the peer's first MRC QP
    # announce it (nic/daemon.py: announcers), and every other QP just stops.
    net, ca, cb = pair()
    write(ca, cb, 1 << 20)
    net.run(0.05)
    t = net.now
    ca.port_status(set(range(8)) - {2}, t, announce=False)
    net.run(t + 0.5)
    assert 2 in ca.profile.planes_down and cb.profile.planes_down == set()
    assert _endpoint_requests(net, t) == [] and ca.stats.port_updates_resent == 0


def test_a_port_status_update_answered_by_one_qp_is_applied_by_its_siblings():
    net, ca, cb = pair()
    _, _, sibling = pair()  # another of h7's QPs with h0
    write(ca, cb, 1 << 20)
    net.run(0.05)
    ca.port_status(set(range(8)) - {6}, net.now)
    (req,) = [codec.decode(net.deliver(p)) for _, p in ca.packets_to_send(net.now)
              if codec.decode(net.deliver(p)).opcode == Opcode.ENDPOINT_REQUEST]
    sibling.peer_port_status(req, net.now)
    assert sibling.profile.planes_down == {6}
    # it does not answer: the QP the NIC gave the request to does
    assert not [p for p in sibling.packets_to_send(net.now)
                if codec.decode(net.deliver(p[1])).opcode == Opcode.ENDPOINT_RESPONSE]


def test_the_refresh_a_new_busy_spell_arms_is_due_when_it_began():
    """The NIC's loop is armed with the policy's next due time and meters a timer's
    lateness from it: a refresh due an interval after the last busy spell's would read,
    posted 10 s later, as a timer 10 s late."""
    net, ca, cb = pair(seed=5)
    write(ca, cb, 16 * 4096, now=0.0)
    net.run(5.0, stop=lambda: ca.idle)
    assert ca.idle and ca.reverse.last_refresh < 1.0
    write(ca, cb, 16 * 4096, now=10.0)
    fast, due, _ = ca.loop_state()
    assert fast and due == 10.0
