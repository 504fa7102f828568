"""REPS as uet-htsim runs it: one EV back to the ring for each `sack_every` good
packets of a plane (an ACK's one EV), where `reps` takes every one back."""

from __future__ import annotations

from mrcemu.transport.lb import Feedback
from tests.unit.transport.lb.helpers import plane_evs, profile_with


def test_one_good_ev_in_sack_every_is_recycled_a_plane_at_a_time():
    prof = profile_with("reps_ack", sack_every=4)
    reps, one, two = prof.policy, plane_evs(prof, 1), plane_evs(prof, 2)
    reps.hear(one[0], Feedback.ACK, 1.0, count=6)  # one EV back, 2 packets owed
    reps.hear(two[0], Feedback.ACK, 1.0, count=3)  # plane 2's own count: none yet
    reps.hear(one[1], Feedback.ACK, 1.1, count=2)  # 4 more on plane 1: one EV
    reps.hear(one[2], Feedback.ECN, 1.2)
    assert list(reps.rings[1]) == [one[0].ev, one[1].ev]
    assert not reps.rings.get(2)
    picks = reps.choose(1, one, 1.3)
    assert picks[:2] == [one[0].ev, one[1].ev]
    assert reps.recycled == 2 and reps.explored == len(one) - 2


def test_with_a_sack_a_packet_it_is_reps():
    prof = profile_with("reps_ack", sack_every=1)
    reps, one = prof.policy, plane_evs(prof, 1)
    reps.hear(one[3], Feedback.ACK, 1.0, count=3)
    assert list(reps.rings[1]) == [one[3].ev] * 3
