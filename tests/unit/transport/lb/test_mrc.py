"""MRC's own profile as a policy: a fresh shuffle of every usable EV each rotation, and
a SKIP (the profile's mechanism) for a CE mark or a mid-path trim."""

from __future__ import annotations

from mrcemu.transport.evs import EvState
from mrcemu.transport.lb import Feedback
from tests.unit.transport.lb.helpers import plane_evs, profile_with


def test_a_rotation_is_a_permutation_of_the_usable_evs():
    prof = profile_with("mrc", seed=9)
    usable = {e.ev for e in plane_evs(prof, 1)}
    orders = [tuple(prof.policy.choose(1, plane_evs(prof, 1), 1.0)) for _ in range(30)]
    assert all(sorted(o) == sorted(usable) for o in orders) and len(set(orders)) > 1


def test_ecn_and_a_trim_ask_the_profile_for_a_skip_and_acks_and_timeouts_do_not():
    prof = profile_with("mrc", ce_skip_rotations=2, trim_skip_rotations=5)
    a, b, c = plane_evs(prof, 0)[:3]
    prof.policy.hear(c, Feedback.ACK, 1.0, 5)
    prof.policy.hear(c, Feedback.TIMEOUT, 1.0)
    assert c.state is EvState.GOOD
    prof.policy.hear(a, Feedback.ECN, 1.0)
    prof.policy.hear(b, Feedback.TRIM, 1.0)
    assert a.state is EvState.SKIP and b.state is EvState.SKIP
    assert a.skip_until_rotation - prof.rotation == 2
    assert b.skip_until_rotation - prof.rotation == 5
