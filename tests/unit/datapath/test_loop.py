"""The NIC's compiled event loop (mrcemu/datapath/loop.c) over AF_UNIX socketpairs: an
MRC pair the policy armed moves a whole write through it with the policy called only
for what is its own (completions, its timers), a QP it did not arm comes back on every
packet, and the epoll's other descriptors come back as events. No root, no namespaces."""

from __future__ import annotations

import select
import socket
import time

import pytest

from mrcemu import datapath
from mrcemu.transport.events import MessageCompleted, MessageReceived
from mrcemu.transport.simnet import SimNet
from mrcemu.wire import codec
from mrcemu.wire.constants import Wake
from tests.unit.datapath.test_ports import Rig
from tests.unit.transport.helpers import pair, write

BIN = 0.01


class Nic:
    """One end: its ports (Rig), its loop, its epoll, and what the daemon's loop does
    with what the compiled loop hands back (daemon.py: _took, flush)."""

    def __init__(self, host: int, conn) -> None:
        self.rig = Rig(host=host)
        self.loop = datapath.Loop(self.rig.ports)
        self.ep = select.epoll()
        for a, _ in self.rig.pairs.values():
            self.ep.register(a.fileno(), select.EPOLLIN)
        self.c = conn
        conn.attach(self.rig.ports)
        self.handed: list[int] = []  # the reasons of every hand-over

    def flush(self, now: float) -> None:
        given = self.rig.ports.budget_of(self.c.plane_mask)
        n = self.c.send_to(self.rig.ports, now, given)
        fast, due, data_due = self.c.loop_state()
        self.loop.arm(self.c.local_qpn, fast, self.c.plane_mask,
                      -1.0 if due is None else due, n >= given,
                      -1.0 if data_due is None else data_due)
        self.rig.ports.drain(now)

    def turn(self) -> None:
        """One pass of the loop (no waiting), and the policy's share of it."""
        events, wake, rest, _bins, _info = self.loop.run(self.ep.fileno(), None, 0.0, BIN, 0)
        assert events == []
        now = time.monotonic()
        for qpn, why in wake:
            assert qpn == self.c.local_qpn
            self.handed.append(why)
            if why & Wake.TOUCHED:
                self.c.received(now)
            if why & Wake.TIMER:
                self.c.timer(now)
        for _plane, d in rest:  # what only the policy reads: an ACK, a probe's answer
            assert isinstance(d, codec.Decoded) and d.bth["dqpn"] == self.c.local_qpn
            self.handed.append(0)
            self.c.receive_decoded(d, now)
        if wake or rest:
            self.flush(now)

    def close(self) -> None:
        self.ep.close()
        self.rig.close()


def carry(src: Nic, dst: Nic) -> int:
    """Every frame on src's wires through the fabric (SimNet: the uSIDs consumed) onto
    dst's ports of the same plane."""
    n = 0
    for plane in src.rig.pairs:
        for f in src.rig.wire(plane):
            dst.rig.inject(plane, f[:14] + SimNet().deliver(f[14:]))
            n += 1
    return n


@pytest.fixture
def ends():
    _, ca, cb = pair(seed=21)
    a, b = Nic(0, ca), Nic(7, cb)
    yield a, b
    a.close()
    b.close()


def test_an_armed_pair_moves_a_whole_write_through_the_loop(ends):
    a, b = ends
    size = 48 * 4096
    data, mr = write(a.c, b.c, size, now=time.monotonic())
    a.flush(time.monotonic())
    b.flush(time.monotonic())
    sent = 0
    deadline = time.monotonic() + 20
    while not a.c.idle and time.monotonic() < deadline:
        a.turn()
        sent += carry(a, b)
        b.turn()
        carry(b, a)
    assert a.c.idle, "the write never completed"
    assert bytes(mr.buf) == data
    assert sent >= size // 4096 and b.c.stats.sacks_tx > 2
    events = [a.c.next_event() for _ in range(4)]
    assert any(isinstance(e, MessageCompleted) for e in events)
    events = [b.c.next_event() for _ in range(4)]
    assert any(isinstance(e, MessageReceived) for e in events)
    # The policy saw the QPs for a handful of things of its own (each end's completion,
    # the ACK that completes the write, a probe), never per packet nor per SACK: every
    # data packet was placed, every SACK taken and every window's worth sent in C.
    assert len(a.handed) + len(b.handed) <= 8 < sent + b.c.stats.sacks_tx


def test_a_qp_not_armed_comes_back_on_every_packet(ends):
    a, b = ends
    data, mr = write(a.c, b.c, 8 * 4096, now=time.monotonic())
    a.flush(time.monotonic())
    b.loop.arm(b.c.local_qpn, False, b.c.plane_mask, -1.0, False, -1.0)
    frames = carry(a, b)
    assert frames >= 8
    events, wake, rest, bins, (waits, _left) = b.loop.run(b.ep.fileno(), None, 0.0, BIN, 0)
    # placed in C all the same, and handed back once (one QP, touched)
    assert wake == [(b.c.local_qpn, Wake.TOUCHED)] and events == [] and waits >= 1
    assert bytes(mr.buf) == data
    assert sum(n for _plane, _bin, n in bins) == len(data)


def test_the_epolls_other_descriptors_come_back_as_events(ends):
    a, _b = ends
    x, y = socket.socketpair()
    try:
        a.ep.register(x.fileno(), select.EPOLLIN)
        y.send(b"request")
        events, wake, rest, bins, (waits, left) = a.loop.run(a.ep.fileno(), None, 5.0, BIN,
                                                             0)
        assert events == [(x.fileno(), select.EPOLLIN)]
        assert (wake, rest, bins, left) == ([], [], [], 0) and waits == 1
    finally:
        x.close()
        y.close()


def test_arm_refuses_what_the_loop_cannot_serve(ends):
    a, _b = ends
    with pytest.raises(KeyError):
        a.loop.arm(12345, True, 0xFF, -1.0, False, -1.0)
    with pytest.raises(TypeError):
        a.loop.arm(a.c.local_qpn, True)
    with pytest.raises(ValueError):
        a.loop.run(a.ep.fileno(), None, -1.0, BIN, 0)
    with pytest.raises(TypeError):
        datapath.Loop(object())


def _timers_late(nic: Nic) -> tuple[int, float]:
    """The loop's own timers: how many ran, and the latest (seconds)."""
    _buckets, n, worst = nic.rig.ports.timer_late()
    return n, worst


def _handed_timer(nic: Nic) -> bool:
    _events, wake, _rest, _bins, _info = nic.loop.run(nic.ep.fileno(), None, 0.0, BIN, 0)
    return any(qpn == nic.c.local_qpn and why & Wake.TIMER for qpn, why in wake)


def test_a_due_time_already_past_when_armed_is_late_from_the_arming_not_its_age(ends):
    """As the policy's own timers (nic/wakeups.py): a deadline first known late (a probe
    due since an EV's last probe) is not the host's delay, so its lateness counts from
    when the loop was given it."""
    a, _b = ends
    before = time.monotonic()
    a.loop.arm(a.c.local_qpn, True, a.c.plane_mask, before - 5.0, False, -1.0)
    assert _handed_timer(a)
    n, worst = _timers_late(a)
    assert n == 1 and worst <= time.monotonic() - before


def test_a_known_due_time_a_stall_kept_waiting_stays_late_when_armed_again(ends):
    a, _b = ends
    due = time.monotonic() + 0.01
    a.loop.arm(a.c.local_qpn, True, a.c.plane_mask, due, False, -1.0)
    time.sleep(0.1)  # the loop does not run meanwhile: a stall
    again = time.monotonic()
    a.loop.arm(a.c.local_qpn, True, a.c.plane_mask, due, False, -1.0)
    assert _handed_timer(a)
    n, worst = _timers_late(a)
    assert n == 1 and worst >= again - due >= 0.09
