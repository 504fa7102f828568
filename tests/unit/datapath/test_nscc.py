"""The compiled congestion window (mrcemu/datapath/nscc.c) against transport/nscc.py, the
reference: the same window, bit for bit, after any sequence of acks and losses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu import datapath
from mrcemu.transport.nscc import Nscc

MSS = 4096

ack = st.tuples(st.just("ack"), st.integers(0, 64 * MSS),
                st.one_of(st.none(), st.floats(0.0, 0.05)), st.booleans(),
                st.floats(0.0, 0.01), st.floats(1e-6, 0.05))
loss = st.tuples(st.just("loss"), st.floats(0.0, 0.01), st.floats(1e-6, 0.05))
trim = st.tuples(st.just("trim"), st.integers(0, 16 * MSS))


@settings(max_examples=300, deadline=None)
@given(start=st.floats(MSS, 256 * MSS), target=st.floats(1e-6, 1e-3),
       ops=st.lists(st.one_of(ack, loss, trim), max_size=60))
def test_the_compiled_window_is_the_references(start, target, ops):
    ref = Nscc(start, MSS, 2 * MSS, 512 * MSS, target)
    c = datapath.Nscc(start, MSS, 2 * MSS, 512 * MSS, target)
    now = 0.0
    for op in ops:
        if op[0] == "ack":
            _, acked, rtt, ecn, dt, srtt = op
            now += dt
            ref.on_ack(acked, rtt, ecn, now, srtt)
            c.on_ack(acked, rtt, ecn, now, srtt)
        elif op[0] == "trim":
            ref.on_trim(op[1])
            c.on_trim(op[1])
        else:
            _, dt, srtt = op
            now += dt
            ref.on_loss(now, srtt)
            c.on_loss(now, srtt)
        assert c.cwnd == ref.cwnd  # exactly: the same arithmetic in the same order
        assert (c.base_rtt, c.last_decrease, c.decreases) == (
            ref.base_rtt, ref.last_decrease, ref.decreases)


def test_bad_windows_and_samples_are_refused():
    with pytest.raises(ValueError, match="target_delay"):
        datapath.Nscc(MSS, MSS, 2 * MSS, MSS, 1e-4)  # floor above ceiling
    with pytest.raises(ValueError, match="target_delay"):
        datapath.Nscc(MSS, MSS, MSS, 2 * MSS, 0.0)
    c = datapath.Nscc(MSS, MSS, MSS, 2 * MSS, 1e-4)
    with pytest.raises(ValueError, match="negative RTT"):
        c.on_ack(MSS, -1.0, False, 0.0, 1e-3)
    assert c.cwnd == MSS and c.base_rtt == float("inf")
