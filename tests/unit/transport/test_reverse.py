"""The reverse EV set's rules, one at a time, with explicit `now` (the white paper, 2.4)."""

from __future__ import annotations

import random

from mrcemu.topology import load
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.evs import Ev, EvProfile
from mrcemu.transport.profiles import profile
from mrcemu.transport.reverse import ReverseEvs


def rig() -> tuple[EvProfile, ReverseEvs]:
    prof = profile(load("default"), 7, 0, TransportConfig())
    return prof, ReverseEvs(prof, random.Random(4))


def in_plane(prof: EvProfile, plane: int) -> list[Ev]:
    return [e for e in prof.evs.values() if e.path.plane == plane]


def test_the_set_starts_with_one_ev_a_plane_in_plane_order():
    prof, rev = rig()
    assert len(prof.planes) == 8
    assert [e.path.plane for e in rev.evs()] == prof.planes
    # Taken in turn, a control packet at a time.
    assert sorted(rev.next().path.plane for _ in range(8)) == prof.planes


def test_a_plane_that_is_down_leaves_the_set_and_comes_back_with_its_port():
    prof, rev = rig()
    prof.set_plane(3, False, 1.0)
    assert 3 not in {e.path.plane for e in rev.evs()} and len(rev.evs()) == 7
    assert all(rev.next().path.plane != 3 for _ in range(20))
    prof.planes_down.discard(3)
    assert 3 in {e.path.plane for e in rev.evs()}


def test_a_retired_ev_is_replaced_by_its_planes_ev_heard_from_last():
    prof, rev = rig()
    old = rev.chosen[2]
    others = [e for e in in_plane(prof, 2) if e is not old]
    others[2].last_feedback, others[5].last_feedback = 3.0, 4.0
    prof.assume_bad(old.ev, 5.0, "test")
    assert rev.retired(old.ev)
    assert rev.chosen[2] is others[5] and rev.confirmed[2] == 4.0
    assert all(e is not old for e in rev.evs())
    # An EV outside the set changes nothing.
    assert not rev.retired(others[1].ev)


def test_with_data_flowing_a_stale_plane_takes_the_ev_heard_from_last():
    prof, rev = rig()
    cur1, cur2 = rev.chosen[1], rev.chosen[2]
    fresh1 = next(e for e in in_plane(prof, 1) if e is not cur1)
    fresh2 = next(e for e in in_plane(prof, 2) if e is not cur2)
    cur1.last_feedback = 9.95  # heard within the interval: kept
    fresh1.last_feedback = 9.99
    fresh2.last_feedback = 9.98  # plane 2's EV silent since the start: replaced
    assert rev.refresh(10.0, 0.1)
    assert rev.chosen[1] is cur1 and rev.chosen[2] is fresh2
    # At most once an interval.
    cur1.last_feedback = 0.0
    rev.confirmed[1] = 0.0
    assert not rev.refresh(10.05, 0.1) and rev.chosen[1] is cur1
    assert rev.refresh(10.2, 0.1) and rev.chosen[1] is fresh1


def test_a_stale_plane_with_nothing_heard_since_keeps_its_ev():
    prof, rev = rig()
    cur = rev.chosen[4]
    rev.confirmed[4] = 2.0  # answered a probe at 2.0; nothing else heard
    assert not rev.refresh(10.0, 0.1) and rev.chosen[4] is cur


def test_only_receiving_probes_the_planes_in_turn_once_an_interval():
    prof, rev = rig()
    probed = []
    t = 0.0
    for _ in range(16):
        e = rev.probe_due(t, 0.02)
        assert e is not None and rev.probe_due(t + 0.01, 0.02) is None
        probed.append(e)
        t += 0.02
    assert [e.path.plane for e in probed] == prof.planes * 2
    assert rev.next_probe_at(0.02) == rev.last_probe + 0.02
    # Random EVs of the plane (eight a plane here), not always the one in the set.
    assert len({e.ev for e in probed}) > 8


def test_an_answered_probe_adopts_its_ev_and_nothing_else_does():
    prof, rev = rig()
    e = None
    while e is None or e is rev.chosen[e.path.plane]:
        e = rev.probe_due(rev.last_probe + 1.0, 0.02)
    plane = e.path.plane
    stranger = next(x for x in in_plane(prof, plane)
                    if x is not e and x is not rev.chosen[plane])
    assert not rev.answered(stranger.ev, 5.0)  # not our probe
    assert rev.answered(e.ev, 5.0) and rev.chosen[plane] is e and rev.confirmed[plane] == 5.0
    assert not rev.answered(e.ev, 5.1)  # one answer a probe


def test_an_answer_for_an_ev_retired_meanwhile_is_not_adopted():
    prof, rev = rig()
    e = rev.probe_due(1.0, 0.02)
    while e is rev.chosen[e.path.plane]:
        e = rev.probe_due(rev.last_probe + 1.0, 0.02)
    prof.assume_bad(e.ev, 1.01, "test")
    assert not rev.answered(e.ev, 1.02) and rev.chosen[e.path.plane] is not e


def test_probes_skip_planes_that_are_down_and_unanswered_ones_are_forgotten():
    prof, rev = rig()
    for p in prof.planes[1:]:
        prof.set_plane(p, False, 0.0)
    planes = {rev.probe_due(t * 0.025, 0.02).path.plane for t in range(10)}
    assert planes == {prof.planes[0]}
    rev.probe_due(10.0, 0.02)
    assert set(rev.pending.values()) == {10.0}  # those 10 s old went
