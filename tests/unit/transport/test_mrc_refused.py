"""MRC's remote access errors: a WRITE the peer refuses (past its region, or a key it
does not know) fails at the requester on the NAK, nothing outside the region is written,
and the connection goes on for the writes behind it, whatever is lost on the way."""

from __future__ import annotations

import hashlib

import pytest

from mrcemu.transport.events import (
    REMOTE_ACCESS,
    MessageCompleted,
    MessageFailed,
    MessageReceived,
)
from tests.unit.transport.helpers import drain, pair

PMTU = 4096


def _data(n: int, seed: int) -> bytes:
    return bytes((i * 131 + seed) & 0xFF for i in range(n))


def _refused_then_good(how: str, loss: float = 0.0, seed: int = 1):
    net, ca, cb = pair(seed=seed)
    net.default.loss = loss
    net.default.delay = 0.002
    target = cb.memory.register(10 * PMTU - 100)  # its last packet: 1 byte past the end
    bad = _data(len(target.buf) + (1 if how == "past" else 0), 5)
    rkey = target.rkey + (99 if how == "rkey" else 0)
    ca.post_write(bad, target.base, rkey, 0.0)
    other = cb.memory.register(64 << 10)
    good = _data(64 << 10, 9)
    ca.post_write(good, other.base, other.rkey, 0.0)  # behind it on the connection
    net.run(60.0, stop=lambda: ca.idle)
    return net, ca, cb, target, bad, other, good


@pytest.mark.parametrize("how", ["past", "rkey"])
def test_a_refused_write_fails_on_the_nak_and_the_one_behind_it_completes(how):
    net, ca, cb, target, bad, other, good = _refused_then_good(how)
    assert ca.idle  # every PSN taken: the connection is whole
    evs = drain(ca)
    (failed,) = [e for e in evs if isinstance(e, MessageFailed)]
    assert failed.msn == 0 and failed.status == REMOTE_ACCESS
    rtt = 2 * net.default.delay
    assert failed.t <= 3 * rtt  # E1/E2: within three round trips
    assert [e.msn for e in evs if isinstance(e, MessageCompleted)] == [1]
    assert [e.msn for e in drain(cb, MessageReceived)] == [1]  # no receive for the refused
    assert hashlib.sha256(other.buf).digest() == hashlib.sha256(good).digest()
    if how == "past":
        # the packets wholly inside were placed; the last, one byte past, wrote nothing
        assert bytes(target.buf[:9 * PMTU]) == bad[:9 * PMTU]
        assert bytes(target.buf[9 * PMTU:]) == bytes(PMTU - 100)
        assert cb.stats.dropped["va_out_of_range"] >= 1
    else:
        assert bytes(target.buf) == bytes(len(target.buf))
        assert cb.stats.dropped["bad_rkey"] >= 10
    assert ca.stats.remote_access_naks == 1 and cb.stats.access_naks_tx >= 1
    assert not ca.failed


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lost_naks_and_packets_still_fail_the_refused_write_and_only_it(seed):
    net, ca, cb, target, bad, other, good = _refused_then_good("past", loss=0.1, seed=seed)
    assert ca.idle
    evs = drain(ca)
    assert [e.msn for e in evs if isinstance(e, MessageFailed)] == [0]
    assert [e.msn for e in evs if isinstance(e, MessageCompleted)] == [1]
    assert hashlib.sha256(other.buf).digest() == hashlib.sha256(good).digest()
    assert bytes(target.buf[9 * PMTU:]) == bytes(PMTU - 100)
