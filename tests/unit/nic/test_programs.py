"""A program's session at the NIC daemon (nic/programs.py): each request the shim can
send, and what a program that is not the shim may send instead, refused with an errno and
nothing kept. Driven through `Session.handle`, as the server calls it."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcemu.nic.programs import Session
from mrcemu.topology.addressing import host_address
from mrcemu.verbs import layout as vl
from mrcemu.verbs import rings
from tests.unit.verbs.fakenic import LoopNic


@pytest.fixture
def session(tmp_path: Path):
    nic = LoopNic(tmp_path / "nic-h0.verbs")
    s = Session(nic, None, nic.programs)  # type: ignore[arg-type]
    yield s
    nic.stop()


def _memfd(size: int, sealed: bool = True) -> int:
    fd = os.memfd_create("t", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if sealed:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def _err(reply: bytes) -> int:
    return vl.REPLY.unpack(reply)["err"]


def _hello(s: Session) -> dict:
    r = vl.HELLO_REPLY.unpack(s.handle(vl.HELLO.pack(op=vl.Op.HELLO, version=vl.VERSION,
                                                     transport=0, pid=7), []))
    assert r["err"] == 0
    return r


def test_hello_names_the_host_and_its_gid(session):
    r = _hello(session)
    assert r["host"] == 0 and r["gid"] == host_address(0, 0).packed
    assert r["max_qp"] == vl.MAX_QP and r["mtu"] == session.nic.cfg.pmtu


@pytest.mark.parametrize("data, code", [
    (b"", errno.EPROTO),
    ((99).to_bytes(4, "little") + bytes(4), errno.EPROTO),  # no such op
    (vl.HELLO.pack(op=vl.Op.HELLO, version=vl.VERSION)[:12], errno.EPROTO),  # short
    (vl.HELLO.pack(op=vl.Op.HELLO, version=vl.VERSION + 1), errno.EPROTO),
    (vl.HELLO.pack(op=vl.Op.HELLO, version=vl.VERSION, transport=9), errno.EINVAL),
    (vl.DEREG_MR.pack(op=vl.Op.DEREG_MR, lkey=1), errno.EPROTO),  # before HELLO
])
def test_a_message_no_shim_sends_is_refused(session, data, code):
    assert _err(session.handle(data, [])) == code
    assert session.nic.logged[-1][0] == "verbs_refused"


def test_a_region_must_be_a_sealed_memfd_big_enough(session):
    _hello(session)
    req = vl.REG_MR.pack(op=vl.Op.REG_MR, addr=0x7000, length=8192, offset=0)
    assert _err(session.handle(req, [_memfd(8192, sealed=False)])) == errno.EINVAL
    assert _err(session.handle(req, [_memfd(4096)])) == errno.EINVAL
    r = vl.REG_MR_REPLY.unpack(session.handle(req, [_memfd(8192)]))
    assert r["err"] == 0 and r["lkey"] in session.nic.memory.regions
    assert session.nic.memory.used == 0  # the program's memory, not the NIC's budget


def test_descriptors_not_kept_are_closed_whatever_the_answer(session):
    _hello(session)
    before = len(os.listdir("/proc/self/fd"))
    fds = [_memfd(4096) for _ in range(3)]
    assert _err(session.handle(vl.DEREG_MR.pack(op=vl.Op.DEREG_MR, lkey=5), fds)) != 0
    ring = _memfd(rings.ring_bytes(4, vl.CQE.codec.size))
    r = vl.CREATE_CQ_REPLY.unpack(session.handle(
        vl.CREATE_CQ.pack(op=vl.Op.CREATE_CQ, entries=4), [ring]))
    assert r["err"] == 0
    assert len(os.listdir("/proc/self/fd")) == before + 1  # the CQ's mapping holds one


@pytest.mark.parametrize("entries, size", [(3, None), (4, 100), (1 << 20, None)])
def test_a_queue_of_a_size_no_shim_makes_is_refused(session, entries, size):
    _hello(session)
    ring = _memfd(size or rings.ring_bytes(entries, vl.WQE.codec.size))
    cq = vl.CREATE_CQ_REPLY.unpack(session.handle(
        vl.CREATE_CQ.pack(op=vl.Op.CREATE_CQ, entries=4),
        [_memfd(rings.ring_bytes(4, vl.CQE.codec.size))]))["cq"]
    bell = os.eventfd(0)
    req = vl.CREATE_QP.pack(op=vl.Op.CREATE_QP, send_cq=cq, recv_cq=cq, max_send_wr=entries)
    assert _err(session.handle(req, [ring, bell])) == errno.EINVAL
    assert session.qps == {}


def test_rtr_needs_a_gid_of_another_host(session):
    _hello(session)
    cq = vl.CREATE_CQ_REPLY.unpack(session.handle(
        vl.CREATE_CQ.pack(op=vl.Op.CREATE_CQ, entries=4),
        [_memfd(rings.ring_bytes(4, vl.CQE.codec.size))]))["cq"]
    qpn = vl.CREATE_QP_REPLY.unpack(session.handle(
        vl.CREATE_QP.pack(op=vl.Op.CREATE_QP, send_cq=cq, recv_cq=cq, max_send_wr=4),
        [_memfd(rings.ring_bytes(4, vl.WQE.codec.size)), os.eventfd(0)]))["qpn"]
    rtr = vl.VERBS["IBV_QPS_RTR"]
    for gid in (bytes(16), host_address(0, 0).packed):  # nobody's, and our own
        req = vl.MODIFY_QP.pack(op=vl.Op.MODIFY_QP, qpn=qpn, state=rtr, dgid=gid)
        assert _err(session.handle(req, [])) == errno.EINVAL
    rts = vl.MODIFY_QP.pack(op=vl.Op.MODIFY_QP, qpn=qpn, state=vl.VERBS["IBV_QPS_RTS"])
    assert _err(session.handle(rts, [])) == errno.EINVAL  # RTS before RTR
    req = vl.MODIFY_QP.pack(op=vl.Op.MODIFY_QP, qpn=qpn, state=rtr,
                            dgid=host_address(5, 3).packed)  # h3, by its plane-5 address
    assert _err(session.handle(req, [])) == 0
    assert session.qps[qpn].peer == 3
    session.close()
    assert session.qps == {} and not session.programs.doorbells


def test_a_forged_send_ring_is_counted_and_the_queue_pair_no_longer_heard(session):
    _hello(session)
    cq = vl.CREATE_CQ_REPLY.unpack(session.handle(
        vl.CREATE_CQ.pack(op=vl.Op.CREATE_CQ, entries=4),
        [_memfd(rings.ring_bytes(4, vl.CQE.codec.size))]))["cq"]
    ring = _memfd(rings.ring_bytes(4, vl.WQE.codec.size))
    mine = os.dup(ring)  # the program's own view of its ring
    bell = os.eventfd(0, os.EFD_NONBLOCK)
    qpn = vl.CREATE_QP_REPLY.unpack(session.handle(
        vl.CREATE_QP.pack(op=vl.Op.CREATE_QP, send_cq=cq, recv_cq=cq, max_send_wr=4),
        [ring, os.dup(bell)]))["qpn"]
    os.pwrite(mine, (1000).to_bytes(4, "little"), vl.RING_PROD_AT)  # 1000 in a ring of 4
    session.doorbell(qpn)  # as the server does when the doorbell rings (not rung here:
    # the test's server thread would answer it too)
    assert session.malformed == 1 and session.nic.malformed == {"verbs_ring": 1}
    assert session.qps[qpn].state == vl.VERBS["IBV_QPS_ERR"]
    assert session.qps[qpn].doorbell not in session.programs.doorbells
    assert session.nic.conns == {}
    os.close(mine)
    os.close(bell)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from([*vl.Op, 0, 99]), body=st.binary(max_size=64),
       hello=st.booleans())
def test_whatever_a_program_sends_the_session_answers_and_keeps_nothing(
        session, op, body, hello):
    if hello and not session.pid:
        _hello(session)
    fds = len(os.listdir("/proc/self/fd"))
    reply = session.handle(int(op).to_bytes(4, "little") + body, [])
    assert int.from_bytes(reply[:4], "little") == int(op)
    assert len(reply) >= vl.REPLY.codec.size
    assert len(os.listdir("/proc/self/fd")) <= fds + 1  # at most a region's mapping
