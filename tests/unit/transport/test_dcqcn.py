"""DCQCN's reaction point (transport/dcqcn.py), and the RoCE baseline's CNPs end to end
in the simulated network."""

from __future__ import annotations

import hashlib

import pytest

from mrcemu.transport.dcqcn import FAST_RECOVERY_STEPS, Dcqcn, DcqcnParams
from mrcemu.wire.constants import Opcode
from tests.unit.transport.test_roce import roce_pair

LINE = 1_000_000.0  # bytes/s
COST = 4_000


def rp(**kw) -> Dcqcn:
    return Dcqcn(DcqcnParams(LINE, alpha_interval=0.01, increase_interval=0.03,
                             increase_bytes=32 * COST, **kw))


def test_at_line_rate_the_rate_never_limits():
    d = rp()
    assert not d.limited and d.allowed(0.0, COST) >= 1 << 20
    d.sent(1000, COST, 0.0)
    assert d.rc == LINE and d.next_time(COST, True) is None


def test_a_cnp_halves_the_rate_first_then_less_as_alpha_decays():
    d = rp()
    d.on_cnp(0.0)
    assert d.rc == pytest.approx(LINE / 2) and d.rt == LINE  # alpha starts at 1
    g = d.p.g
    assert g == 1 / 256  # the reference's
    assert d.alpha == pytest.approx(g + (1 - g))
    d.on_time(0.1)  # 10 alpha periods without a CNP: alpha decays
    a = d.alpha
    assert a == pytest.approx((1 - g) ** 10)
    before = d.rc
    d.on_cnp(0.1)
    assert d.rc == pytest.approx(before * (1 - a / 2))
    assert d.cnps == d.cuts == 2


def test_the_rate_bucket_spaces_packets_at_the_cut_rate():
    d = rp()
    d.on_cnp(0.0)  # 500 kB/s: a 4 kB packet every 8 ms
    assert d.allowed(0.0, COST) == 0
    t = d.next_time(COST, True)
    assert t == pytest.approx(COST / d.rc)
    assert d.allowed(t, COST) == 1
    d.sent(1, COST, t)
    assert d.allowed(t, COST) == 0
    # never more than a 4-packet burst, however long it waited
    assert d.allowed(t + 10.0, COST) == 4


def test_timers_recover_the_rate_fast_then_additive_then_hyper():
    d = rp()
    d.on_cnp(0.0)
    rates = []
    for k in range(1, 40):
        d.on_time(0.03 * k)
        rates.append(d.rc)
        if not d.limited:
            break
    # fast recovery halves the distance to the target rate (line rate here) each step
    assert rates[0] == pytest.approx(LINE * 0.75)
    assert rates[1] == pytest.approx(LINE * 0.875)
    assert all(b >= a for a, b in zip(rates, rates[1:], strict=False))
    assert d.rc == LINE and not d.limited  # back at line rate, the bucket off
    assert len(rates) > FAST_RECOVERY_STEPS - 2


def test_the_rate_has_a_floor():
    d = rp()
    for k in range(200):
        d.on_cnp(k * 1e-4)
    assert d.rc == pytest.approx(LINE / 100)


def test_roce_answers_ce_with_paced_cnps_and_cuts_its_rate():
    net, ca, cb = roce_pair(seed=2)
    net.default.ce = 1.0  # every data packet marked
    data = bytes((i * 13) & 0xFF for i in range(1 << 20))
    mr = cb.memory.register(len(data))
    ca.post_write(data, mr.base, mr.rkey, 0.0)
    net.run(120.0, stop=lambda: ca.idle)
    assert ca.idle and hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
    cnps = [t for t, src, _ev, op in net.sent_log if src == "h7" and op == Opcode.CNP]
    # every packet arrived marked (retransmissions too, counted by rx_ce, not rx_data)
    assert cb.stats.rx_ce >= cb.stats.rx_data > 0
    assert len(cnps) == cb.stats.cnps_tx > 1
    # each arrived, but maybe the last: the write can complete with it in flight
    assert cb.stats.cnps_tx - 1 <= ca.stats.cnps_rx <= cb.stats.cnps_tx
    # the notification point sends at most one a QP per interval, however many marks
    gaps = [b - a for a, b in zip(cnps, cnps[1:], strict=False)]
    assert min(gaps) >= ca.cfg.dcqcn_cnp_interval - 1e-9
    assert cb.stats.cnps_tx < cb.stats.rx_ce
    assert ca.dcqcn.cuts == ca.stats.cnps_rx and ca.dcqcn.limited


def test_roce_without_marks_or_with_dcqcn_off_sends_no_cnp():
    net, ca, cb = roce_pair(seed=2)
    data = bytes(256 << 10)
    mr = cb.memory.register(len(data))
    ca.post_write(data, mr.base, mr.rkey, 0.0)
    net.run(60.0, stop=lambda: ca.idle)
    assert ca.idle and cb.stats.rx_ce == cb.stats.cnps_tx == 0 and not ca.dcqcn.limited
    net, ca, cb = roce_pair(seed=2, roce_dcqcn=False)
    net.default.ce = 1.0  # not ECN-capable: a switch does not mark it
    mr = cb.memory.register(len(data))
    ca.post_write(data, mr.base, mr.rkey, 0.0)
    net.run(60.0, stop=lambda: ca.idle)
    assert ca.idle and ca.dcqcn is None and cb.stats.rx_ce == cb.stats.cnps_tx == 0
