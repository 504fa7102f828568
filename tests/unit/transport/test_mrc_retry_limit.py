"""MRC's retry limit: a QP fails with a retry-exceeded error only when nothing at all was
acknowledged on any path for its whole budget (timeout x (retry_cnt + 1), scaled)."""

from __future__ import annotations

import hashlib

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.transport.config import TransportConfig, retry_budget
from mrcemu.transport.events import RETRY_EXCEEDED, ConnectionFailed, MessageCompleted
from tests.unit.transport.helpers import drain, pair, write


def _cut(net, host: str) -> None:
    for plane in range(8):
        for spine in range(4):
            net.path(host, plane, spine).blackhole = True


def test_the_budget_is_the_verbs_timeout_times_its_tries_times_the_slowdown():
    assert retry_budget(14, 7, 1.0) == pytest.approx(4.096e-6 * 2**14 * 8)
    assert retry_budget(14, 7, 3.0) == pytest.approx(3 * 4.096e-6 * 2**14 * 8)
    assert retry_budget(0, 7, 1.0) is None  # the verbs' "wait forever"
    assert TransportConfig(qp_timeout=10, qp_retry_cnt=2, slowdown=2.0).retry_budget == (
        pytest.approx(4.096e-6 * 2**10 * 3 * 2))
    for bad in ({"qp_timeout": 32}, {"qp_retry_cnt": 8}, {"qp_timeout": -1}, {"slowdown": 0}):
        with pytest.raises(MrcemuError, match=next(iter(bad))):
            TransportConfig(**bad)


def test_a_responder_that_answers_nothing_fails_the_qp_at_the_budget():
    net, ca, cb = pair(qp_timeout=12)  # 4.096 us x 2^12 x 8 = 0.134 s
    budget = ca.retry_budget
    _cut(net, "h0")  # nothing of h0's reaches h7: no SACK ever comes back
    write(ca, cb, 256 << 10, now=0.0)
    net.run(10.0, stop=lambda: ca.failed)
    failed = drain(ca, ConnectionFailed)
    assert ca.failed and len(failed) == 1
    assert failed[0].status == RETRY_EXCEEDED and failed[0].msn is None
    # at the budget, and not a timer's granularity later (no timer of the core is later)
    assert budget <= failed[0].t <= budget + 0.02
    assert "nothing acknowledged on any path" in failed[0].why
    sent = len(net.sent_log)
    net.run(net.now + 5.0)
    # a QP in error sends no more data or probes, and wakes for nothing
    assert [op for t, src, ev, op in net.sent_log[sent:] if src == "h0"] == []
    assert ca.next_timer() is None and not ca.busy


def test_a_path_set_that_dies_mid_transfer_fails_a_budget_after_the_last_ack():
    net, ca, cb = pair(qp_timeout=12)
    budget = ca.retry_budget
    write(ca, cb, 32 << 20, now=0.0)
    net.run(1.0, stop=lambda: ca.una > 1000)
    assert not ca.idle and not ca.failed
    _cut(net, "h7")  # h7's SACKs vanish from now on; h0's data still arrives
    cut_at = net.now
    net.run(20.0, stop=lambda: ca.failed)
    (failed,) = drain(ca, ConnectionFailed)
    heard = max(e.fb.last_feedback for e in ca._evs)
    assert heard <= cut_at + 0.01  # the last acks were the ones already on their way
    assert failed.t == pytest.approx(heard + budget, abs=0.02)


def test_answered_probes_are_progress_while_no_data_gets_through():
    # Every path drops data but forwards control (as one that drops big packets would):
    # for several budgets nothing but probes is acknowledged, and that is progress. The
    # paths heal and the write completes whole; the QP never failed.
    net, ca, cb = pair(qp_timeout=12)
    budget = ca.retry_budget
    for plane in range(8):
        for spine in range(4):
            net.path("h0", plane, spine).drop_data = True
    data, mr = write(ca, cb, 1 << 20, now=0.0)
    net.run(4 * budget)
    assert not ca.failed and ca.una == 0 and ca.stats.probes_answered > 0
    for props in net.paths.values():
        props.drop_data = False
    net.run(net.now + 30.0, stop=lambda: ca.idle or ca.failed)
    assert ca.idle and not ca.failed
    assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
    assert len(drain(ca, MessageCompleted)) == 1 and drain(ca, ConnectionFailed) == []


def test_an_idle_spell_is_not_counted_against_the_next_request():
    net, ca, cb = pair(qp_timeout=12)
    write(ca, cb, 64 << 10, now=0.0)
    net.run(1.0, stop=lambda: ca.idle)
    assert ca.idle
    net.run(5.0)  # idle far longer than the budget
    write(ca, cb, 64 << 10, now=net.now, seed=9)
    net.run(net.now + 2.0, stop=lambda: ca.idle)
    assert ca.idle and not ca.failed


def test_no_limit_with_timeout_zero():
    net, ca, cb = pair(qp_timeout=0)
    assert ca.retry_budget is None
    _cut(net, "h0")
    write(ca, cb, 64 << 10, now=0.0)
    net.run(30.0)
    assert not ca.failed and not ca.idle


def test_a_write_not_yet_sent_is_not_counted_against_the_limit():
    # An all-to-all's writes wait their turn at the NIC's ports: nothing of this one went
    # for three budgets, which is the NIC's own doing, not the peer's silence.
    net, ca, cb = pair(qp_timeout=12)
    budget = ca.retry_budget
    data, mr = write(ca, cb, 256 << 10, now=0.0)
    later = 3 * budget
    ca.timer(later)  # its timer, with nothing sent yet
    assert not ca.failed and ca.tx.outstanding == 0
    net.now = later
    net.run(later + 5.0, stop=lambda: ca.idle or ca.failed)
    assert ca.idle and not ca.failed
    assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
