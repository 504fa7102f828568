"""REPS: an EV whose packet was acknowledged unmarked is used again, once a packet;
with none in hand, a random one is explored."""

from __future__ import annotations

import hashlib

from mrcemu.transport.lb import Feedback
from mrcemu.transport.lb.reps import RING
from tests.unit.transport.helpers import pair, write
from tests.unit.transport.lb.helpers import plane_evs, profile_with


def test_acked_evs_are_recycled_oldest_first_then_the_plane_explores():
    prof = profile_with("reps")
    reps, usable = prof.policy, plane_evs(prof, 1)
    a, b = usable[2], usable[0]
    reps.hear(a, Feedback.ACK, 1.0, count=2)
    reps.hear(b, Feedback.ACK, 1.1)
    picks = reps.choose(1, usable, 1.2)
    assert len(usable) == 4 and picks[:3] == [a.ev, a.ev, b.ev]
    assert reps.recycled == 3 and reps.explored == 1
    reps.choose(1, usable, 1.3)
    assert reps.recycled == 3 and reps.explored == 5


def test_marks_trims_and_timeouts_are_not_recycled_and_the_ring_holds_eight():
    prof = profile_with("reps")
    reps, usable = prof.policy, plane_evs(prof, 0)
    for what in (Feedback.ECN, Feedback.TRIM, Feedback.TIMEOUT, Feedback.RESTORED):
        reps.hear(usable[1], what, 1.0)
    assert not reps.rings.get(0)
    reps.hear(usable[0], Feedback.ACK, 1.0, count=3)
    reps.hear(usable[2], Feedback.ACK, 1.1, count=20)
    assert list(reps.rings[0]) == [usable[2].ev] * RING and RING == 8


def test_a_recycled_ev_stopped_since_is_passed_over():
    prof = profile_with("reps")
    reps, usable = prof.policy, plane_evs(prof, 4)
    gone, kept = usable[0], usable[1]
    reps.hear(gone, Feedback.ACK, 1.0, count=2)
    reps.hear(kept, Feedback.ACK, 1.0, count=2)
    assert prof.stop(gone.ev, 1.1, "test")
    picks = reps.choose(4, plane_evs(prof, 4), 1.2)
    assert picks[:2] == [kept.ev, kept.ev] and gone.ev not in picks


def test_the_compiled_sender_counts_each_evs_unmarked_acks_and_reps_hears_them_all():
    net, ca, cb = pair(seed=6, load_balancing="reps")
    data, mr = write(ca, cb, 8 << 20)
    net.run(30.0, stop=lambda: ca.idle)
    assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
    evs = ca.profile.evs.values()
    # A clean network with no loss: every packet sent was acknowledged once, by an
    # unmarked SACK, and counted on the EV it went on.
    assert all(e.fb.acks == e.fb.sent for e in evs)
    assert sum(e.fb.acks for e in evs) == ca.stats.tx_data > 0
    ca.profile.new_rotation()  # hears what came since the last rotation
    assert all(e.acks_heard == e.fb.acks for e in evs)
    # After the first window (64 packets, all explored), most packets recycle.
    reps = ca.profile.policy
    assert reps.recycled > 3 * reps.explored > 0
    # ... and the connection's stats say so (a run's report sums them as lb_*).
    assert ca.stats.to_json()["lb"] == {"recycled": reps.recycled, "explored": reps.explored}


def test_a_marked_path_is_not_counted_good():
    net, ca, cb = pair(seed=6, load_balancing="reps")
    net.path("h0", 2, 3).ce = 1.0
    data, mr = write(ca, cb, 4 << 20)
    net.run(30.0, stop=lambda: ca.idle)
    marked = [e for e in ca.profile.evs.values()
              if e.path.plane == 2 and e.path.spine == 3 and e.fb.sent]
    assert marked and all(e.fb.acks == 0 for e in marked)


def test_the_ring_holds_a_rotation_of_a_large_ev_set():
    """With 60 EVs a plane a rotation asks for 60 packets at once: the acks heard since
    the last are all recycled, not the newest eight."""
    prof = profile_with("reps", ev_per_path=15)
    reps, usable = prof.policy, plane_evs(prof, 3)
    assert len(usable) == 60
    reps.choose(3, usable, 1.0)
    for i, e in enumerate(usable[:50]):
        reps.hear(e, Feedback.ACK, 1.1 + i * 1e-3)
    picks = reps.choose(3, usable, 1.2)
    assert picks[:50] == [e.ev for e in usable[:50]]
    assert reps.recycled == 50 and reps.explored == 60 + 10
