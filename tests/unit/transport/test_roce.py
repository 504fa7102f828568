"""The RoCE baseline: one path, go-back-N, stall until reconvergence."""

from __future__ import annotations

import copy
import hashlib

from mrcemu.topology import load
from mrcemu.topology.paths import ev_fields
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import (
    REMOTE_ACCESS,
    ConnectionFailed,
    MessageCompleted,
    MessageReceived,
    PathRehashed,
)
from mrcemu.transport.profiles import local_qpn_pair, profile
from mrcemu.transport.roce import RoceConnection
from mrcemu.transport.simnet import SimNet
from mrcemu.wire import codec
from mrcemu.wire.constants import Opcode
from tests.unit.transport.helpers import drain


def roce_pair(seed=1, **kw):
    topo = load("default")
    cfg = TransportConfig(seed=seed, **kw)
    qa, qb = local_qpn_pair(0, 7)
    ca = RoceConnection(cfg, profile(topo, 0, 7, cfg), qa, qb, flow_key=b"h0h7")
    cb = RoceConnection(cfg, profile(topo, 7, 0, cfg), qb, qa, flow_key=b"h7h0")
    net = SimNet(seed=seed)
    net.attach("h0", ca, "h7")
    net.attach("h7", cb, "h0")
    return net, ca, cb


def test_one_path_and_integrity_with_loss():
    net, ca, cb = roce_pair(seed=3)
    net.default.loss = 0.02
    data = bytes((i * 7) & 0xFF for i in range(2 << 20))
    mr = cb.memory.register(len(data))
    ca.post_write(data, mr.base, mr.rkey, 0.0)
    net.run(60.0, stop=lambda: ca.idle)
    assert ca.idle and hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
    used = {ev for ev, n in ca.stats.per_ev.items() if n}
    assert len(used) == 1
    assert ca.stats.retransmits > 0 and (ca.stats.nacks_rx > 0 or ca.stats.rtos > 0)
    # the one port it sends on is the one the NIC gives it slots of
    assert ca.plane_mask == 1 << ca.profile.evs[used.pop()].path.plane


def test_blackholed_path_stalls_until_reconvergence():
    net, ca, cb = roce_pair()
    first = ca.ev.ev
    plane, spine = ev_fields(first)
    net.path("h0", plane, spine).blackhole = True
    data = bytes(1 << 20)
    mr = cb.memory.register(len(data))
    ca.post_write(data, mr.base, mr.rkey, 0.0)
    net.run(10.0, stop=lambda: ca.idle)
    assert ca.idle and not ca.failed
    events = drain(ca)
    rehashed = [e for e in events if isinstance(e, PathRehashed)]
    assert len(rehashed) == 1
    assert rehashed[0].old_ev == first and rehashed[0].new_ev == ca.ev.ev != first
    t_change = rehashed[0].t
    assert t_change >= ca.cfg.roce_reconvergence
    # Nothing delivered before the reconvergence: it kept retrying the dead path; the
    # message completes after the rehash, and that is the order the events say.
    done = [e for e in events if isinstance(e, MessageCompleted)]
    assert [type(e) for e in events] == [PathRehashed, MessageCompleted]
    assert done[0].done_at > t_change
    before = {ev for t, src, ev, op in net.sent_log if src == "h0" and t < t_change}
    assert len(before) == 1


def test_fails_the_qp_after_retry_count_without_reconvergence():
    net, ca, cb = roce_pair(roce_reconvergence=1e9, roce_retry_count=3)
    plane, spine = ev_fields(ca.ev.ev)
    net.path("h0", plane, spine).blackhole = True
    mr = cb.memory.register(8192)
    ca.post_write(bytes(8192), mr.base, mr.rkey, 0.0)
    net.run(30.0)
    assert ca.failed and ca.stats.rtos == 4
    # It says so once, and nothing completes.
    assert [type(e) for e in drain(ca)] == [ConnectionFailed]
    assert ca.next_timer() is None


def test_lost_acks_make_the_responder_rehash_after_reconvergence():
    net, ca, cb = roce_pair()
    plane, spine = ev_fields(cb.ev.ev)
    net.path("h7", plane, spine).blackhole = True  # h7's ACKs vanish; h0's data arrives
    data = bytes((i * 5) & 0xFF for i in range(1 << 20))
    mr = cb.memory.register(len(data))
    ca.post_write(data, mr.base, mr.rkey, 0.0)
    net.run(20.0, stop=lambda: ca.idle)
    assert ca.idle and not ca.failed
    assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
    rehashed = drain(cb, PathRehashed)
    assert len(rehashed) == 1 and rehashed[0].t >= cb.cfg.roce_reconvergence
    assert drain(ca, MessageCompleted)[0].done_at > rehashed[0].t


def test_an_ack_of_psns_never_sent_is_ignored_and_completes_nothing():
    net, ca, cb = roce_pair()
    mr = cb.memory.register(64 << 10)
    ca.post_write(b"a" * 8192, mr.base, mr.rkey, 0.0)  # msn 0: PSNs 0-1
    ca.post_write(b"b" * 8192, mr.base + 8192, mr.rkey, 0.0)  # msn 1: PSNs 2-3
    for _, p in ca.packets_to_send(0.0, budget=2):  # only msn 0 goes
        cb.receive(net.deliver(p), 0.001)
    ack = codec.decode(net.deliver(cb.packets_to_send(0.001)[-1][1]))
    assert ack.opcode == Opcode.RC_ACK and ack.psn == 1
    # The same ACK, as if for PSN 3: msn 1's bytes never left, so it is not our peer's.
    forged = copy.deepcopy(ack)
    forged.bth["psn"] = 3
    ca.receive_decoded(forged, 0.002)
    assert ca.una == 0 and ca.stats.acks_beyond_sent == 1
    assert drain(ca, MessageCompleted) == []
    ca.receive_decoded(ack, 0.003)  # the real one completes msn 0 alone
    assert ca.una == 2 and [e.msn for e in drain(ca, MessageCompleted)] == [0]
    assert ca.stats.acks_beyond_sent == 1 and bytes(mr.buf[8192:16384]) == bytes(8192)


def _refused_write(how: str):
    net, ca, cb = roce_pair()
    mr = cb.memory.register(3 * 4096 + 100)
    data = bytes((i * 11) & 0xFF for i in range(len(mr.buf) + (1 if how == "past" else 0)))
    rkey = mr.rkey + (7 if how == "rkey" else 0)
    ca.post_write(data, mr.base, rkey, 0.0)
    ca.post_write(b"after", mr.base, mr.rkey, 0.0)  # posted behind it: flushed
    net.run(5.0, stop=lambda: ca.failed)
    return net, ca, cb, mr


def test_a_write_past_the_region_or_with_a_wrong_key_fails_the_qp_with_a_remote_access_error():
    for how, reason in (("past", "va_out_of_range"), ("rkey", "bad_rkey")):
        net, ca, cb, mr = _refused_write(how)
        (failed,) = drain(ca, ConnectionFailed)
        assert failed.status == REMOTE_ACCESS and failed.msn == 0
        assert failed.t <= 3 * 2 * net.default.delay + 1e-9  # the first NAK's round trip
        assert ca.stats.remote_access_naks == 1 and cb.stats.dropped[reason] >= 1
        assert cb.stats.nacks_tx >= 1
        assert bytes(mr.buf) == bytes(len(mr.buf))  # nothing written
        assert drain(ca, MessageCompleted) == [] and drain(cb, MessageReceived) == []
        net.run(net.now + 2.0)
        assert ca.next_timer() is None  # a QP in error retries nothing
