"""The path monitor's rules, one at a time, with explicit `now` (the white paper, 2.1)."""

from __future__ import annotations

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.topology import load
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import EvStateChanged
from mrcemu.transport.evs import MAX_THIN, Ev, EvState
from mrcemu.transport.pathmon import PathMonitor
from mrcemu.transport.profiles import profile


def rig(**cfg_kw) -> tuple[PathMonitor, list[EvStateChanged], Ev]:
    cfg = TransportConfig(**cfg_kw)
    prof = profile(load("default"), 0, 7, cfg)
    changes: list[EvStateChanged] = []
    prof.emit = changes.append
    mon = PathMonitor(prof, cfg)
    e = next(x for x in prof.evs.values() if x.active and x.path.plane == 2)
    return mon, changes, e


def rotations_in(mon: PathMonitor, e: Ev, state: EvState) -> int:
    """How many rotations pass before `e` leaves `state` (at most 100)."""
    for n in range(100):
        if e.state is not state:
            return n
        mon.profile.new_rotation()
    return 100


def test_an_echoed_ce_skips_the_ev_for_its_rotations():
    mon, changes, e = rig(ce_skip_rotations=3)
    mon.ce_echoed(e.ev, 1.0)
    assert e.state is EvState.SKIP and changes[-1].why == "ECN echoed"
    assert rotations_in(mon, e, EvState.SKIP) == 3


def test_a_mid_path_trim_skips_the_ev_longer_than_a_mark():
    mon, changes, e = rig()
    mon.trimmed(e.ev, 1.0, last_hop=False)
    assert e.state is EvState.SKIP and changes[-1].why == "NACK trimmed"
    assert rotations_in(mon, e, EvState.SKIP) == 2  # the default trim hold, CE's is 1


def test_a_hot_path_is_thinned_for_as_many_of_its_round_trips_as_rotations():
    """Two EVs rotate in two packets (paper experiment E8): a SKIP of rotations alone would end
    long before the feedback on the packets sent after it could return. A hot path is
    thinned for its round trips instead: in SKIP throughout, in use one rotation in
    skip_len + 1, so it keeps a share its marks can still size (switched off whole,
    the flows that share its queue left it and came back to it together)."""
    mon, changes, e = rig()
    e.fb.rtt_sample(0.065, 0.0)  # the EV's own round trip
    prof = mon.profile
    prof.now = 1.0
    mon.ce_echoed(e.ev, 1.0)  # skip_len 1: one rotation out, one round trip thinned
    assert e.fb.thinned and not prof.usable(e) and e.skip_len == 2
    used = []
    for _ in range(9):
        prof.new_rotation()
        assert e.state is EvState.SKIP and e.fb.usable == prof.usable(e)
        used.append(prof.usable(e))
    assert used == [True, False, False] * 3  # then one rotation in skip_len + 1 = 3
    prof.now = 1.064
    prof.new_rotation()
    assert e.state is EvState.SKIP
    prof.now = 1.065  # its round trip is over: GOOD when its rotations run out
    assert rotations_in(mon, e, EvState.SKIP) == 1
    assert changes[-1].why == "skip over" and not e.fb.thinned and prof.usable(e)
    # marked again as soon as it is back: twice as long, in rotations and round trips
    mon.ce_echoed(e.ev, 1.07)
    assert e.thin_until == pytest.approx(1.07 + 2 * 0.065) and e.skip_len == 4


def test_a_mark_on_a_thinned_path_halves_its_share_again_once_a_round_trip():
    """The marks on what went before the thinning are the same news: only a round trip
    after the last growth does a mark thin the path further (and for longer)."""
    mon, changes, e = rig()
    rtt = 0.065
    e.fb.rtt_sample(rtt, 0.0)
    prof = mon.profile
    prof.now = 1.0
    mon.ce_echoed(e.ev, 1.0)
    prof.now = 1.07
    while e.state is EvState.SKIP:
        prof.new_rotation()
    mon.ce_echoed(e.ev, 1.07)  # thinned for 2 round trips, one rotation in 5
    assert (e.skip_len, e.thin_until) == (4, pytest.approx(1.07 + 2 * rtt))
    mon.ce_echoed(e.ev, 1.07 + rtt / 2)  # within the round trip: nothing more
    assert (e.skip_len, e.thin_until) == (4, pytest.approx(1.07 + 2 * rtt))
    later = 1.07 + rtt + 0.001
    mon.ce_echoed(e.ev, later)  # a round trip on: one rotation in 9, for 4 round trips
    assert (e.skip_len, e.thin_until) == (8, pytest.approx(later + 4 * rtt))
    assert e.state is EvState.SKIP and e.fb.thinned
    assert [c.new for c in changes].count("SKIP") == 2  # thinning further is silent
    for k in range(4):  # a mark every round trip: one rotation in 65 at most
        mon.ce_echoed(e.ev, later + (k + 1) * (rtt + 0.001))
    assert e.skip_len == MAX_THIN == 64


def test_a_thinned_path_of_a_two_ev_set_grows_between_its_visits():
    """paper experiment E8's flow 1: two EVs, one plane. Between EV-A's visits EV-B alone is
    usable, so the set is at its floor; the marks on a visit come back then. They must
    still halve EV-A's share and lengthen its thinning: nothing more goes out of use
    (EV-A already is). Refused, EV-A's share stayed one rotation in 17-33, and its
    thinning ran out and it came back whole."""
    mon, changes, e = rig(ev_planes=(2,), ev_set_per_plane=2)
    prof, rtt = mon.profile, 0.065
    assert sum(x.active for x in prof.evs.values()) == 2  # the rest are backups
    e.fb.rtt_sample(rtt, 0.0)
    prof.now = 1.0
    mon.ce_echoed(e.ev, 1.0)
    assert e.fb.thinned and prof.at_floor() and not prof.usable(e)
    later = 1.0 + rtt + 0.001
    mon.ce_echoed(e.ev, later)  # the visit's packets, marked, heard out of its visit
    assert (e.skip_len, e.thin_until) == (4, pytest.approx(later + 2 * rtt))
    assert e.state is EvState.SKIP and [c.new for c in changes] == ["SKIP"]


def test_a_set_at_its_floor_takes_no_good_ev_out_of_use_and_still_grows_a_thinned_one():
    """The floor guards what is in use: at `ev_min_active` usable EVs, a mark on a GOOD
    one leaves it in use, where a mark on a thinned one between its visits halves its
    share again. Three EVs of one plane, two the floor: with EV-A thinned, the other
    two are the floor, and each has a usable path beside it in the plane (the plane's
    own check, that its last path keeps its load, is not what refuses)."""
    mon, changes, e = rig(ev_planes=(2,), ev_set_per_plane=3, ev_min_active=2)
    prof, rtt = mon.profile, 0.065
    good = [x for x in prof.evs.values() if x.active and x is not e]
    assert len(good) == 2
    for x in (e, *good):
        x.fb.rtt_sample(rtt, 0.0)
    prof.now = 1.0
    mon.ce_echoed(e.ev, 1.0)
    assert e.fb.thinned and not prof.usable(e) and prof.at_floor()
    later = 1.0 + rtt + 0.001
    mon.ce_echoed(good[0].ev, later)
    assert good[0].state is EvState.GOOD and prof.usable(good[0]) and prof.usable(good[1])
    mon.ce_echoed(e.ev, later)
    assert (e.skip_len, e.thin_until) == (4, pytest.approx(later + 2 * rtt))
    assert [(c.ev, c.new) for c in changes] == [(e.ev, "SKIP")]


def test_a_path_marked_as_soon_as_its_feedback_can_say_skips_longer_each_time():
    """paper experiment E8: flow 2 fills EV-A's link. Each time flow 1's SKIP ends, the first
    feedback on what it sent there after (a round trip later) is marked again: the SKIP
    doubles, up to MAX_SKIP, whatever unmarked acks came between."""
    mon, changes, e = rig()
    rtt = 0.065
    e.fb.rtt_sample(rtt, 0.0)
    prof, now, lengths = mon.profile, 1.0, []
    for _ in range(6):
        prof.now = now
        mon.ce_echoed(e.ev, now)
        start = now
        while e.state is EvState.SKIP:
            now += 0.001
            prof.now = now
            prof.new_rotation()
        lengths.append(round((now - start) / rtt))
        now += rtt  # the first feedback on the packets sent after it: marked
    assert lengths == [1, 2, 4, 8, 16, 16]
    # Quiet for three round trips beyond the first feedback's: 16 halved three times
    prof.now = now = now + 3 * rtt
    mon.ce_echoed(e.ev, now)
    assert e.thin_until == pytest.approx(now + 2 * rtt) and e.skip_len == 4


def test_a_plane_marked_throughout_is_left_to_rotations_and_the_window():
    """When another path of the plane was marked within the EV's round trip, the plane
    is loaded throughout: shedding one path for round trips would only load the rest
    (paper experiment E8's flow 1 saw no mark on EV-B; a permutation at capacity marks every
    spine). The SKIP is its rotations alone, and its memory does not grow."""
    mon, changes, e = rig()
    sibling = next(x for x in mon.profile.evs.values()
                   if x.active and x.path.plane == 2 and x is not e)
    e.fb.rtt_sample(0.065, 0.0)
    mon.ce_echoed(sibling.ev, 1.0)
    mon.ce_echoed(e.ev, 1.03)  # within a round trip of the sibling's mark
    assert e.state is EvState.SKIP and e.thin_until == 0.0 and e.skip_len == 1
    assert rotations_in(mon, e, EvState.SKIP) == 1
    # a round trip after the sibling's mark, this one alone is hot: round trips, memory
    mon.ce_echoed(e.ev, 1.0 + 0.066)
    assert e.thin_until == pytest.approx(1.066 + 0.065) and e.skip_len == 2


def test_a_mark_never_skips_the_last_usable_path_of_a_plane():
    mon, changes, e = rig()
    plane = [x for x in mon.profile.evs.values() if x.active and x.path.plane == 2]
    assert len(plane) == 4
    for x in plane:
        mon.ce_echoed(x.ev, 1.0)
    assert [x.state for x in plane].count(EvState.SKIP) == 3
    assert sum(mon.profile.usable(x) for x in plane) == 1


def test_a_last_hop_trim_changes_nothing():
    mon, changes, e = rig()
    mon.trimmed(e.ev, 1.0, last_hop=True)
    assert e.state is EvState.GOOD and e.active and changes == []


def test_a_sack_hole_retires_the_ev_at_once_and_a_backup_of_its_plane_takes_over():
    mon, changes, e = rig()
    mon.lost(e.ev, 0.95, 1.0)
    assert e.state is EvState.ASSUMED_BAD and not e.active
    (bad, promoted) = changes
    assert (bad.ev, bad.new, bad.why, bad.lost_sent, bad.t) == (
        e.ev, "ASSUMED_BAD", "lost: SACK hole", 0.95, 1.0)
    assert promoted.new == "ACTIVE"
    assert mon.profile.evs[promoted.ev].path.plane == e.path.plane


def test_a_mark_on_the_path_a_backup_doubled_sends_the_backup_back():
    mon, changes, e = rig()
    mon.lost(e.ev, 0.95, 1.0)
    extra = mon.profile.evs[changes[-1].ev]
    own = next(x for x in mon.profile.evs.values() if x.active and x is not extra
               and (x.path.plane, x.path.spine) == (extra.path.plane, extra.path.spine))
    mon.ce_echoed(own.ev, 1.1)
    assert not extra.active and (extra.ev, "BACKUP") in [(c.ev, c.new) for c in changes]


def test_a_sack_hole_in_a_restricted_set_promotes_a_backup_on_a_path_it_did_not_use():
    mon, changes, e = rig(ev_set_per_plane=2)
    mon.lost(e.ev, 0.95, 1.0)
    (bad, promoted) = changes
    assert bad.new == "ASSUMED_BAD" and promoted.new == "ACTIVE"
    took = mon.profile.evs[promoted.ev].path
    assert took.plane == e.path.plane and took.spine in (2, 3)


def test_an_rto_stops_an_ev_only_if_no_later_packet_on_it_arrived_and_retires_none():
    mon, changes, e = rig()
    e.heard_sent = 0.96  # a packet sent on it after the lost one arrived
    assert not mon.timed_out(e.ev, 0.95, 1.0)
    assert e.state is EvState.GOOD and changes == [] and mon.losses_ignored == 1
    # An ack that came back on it since, for a packet sent before, proves nothing: the
    # EV is stopped, as an overdue one, and its probes will decide.
    e.heard_sent, e.last_feedback = 0.90, 1.05
    assert mon.timed_out(e.ev, 0.95, 1.1)
    assert e.state is EvState.STOPPED and (changes[0].why, changes[0].lost_sent) == (
        "RTO", 0.95)


def test_a_hole_retires_an_ev_even_if_a_later_packet_on_it_arrived():
    mon, _, e = rig()
    e.heard_sent = 0.99
    mon.lost(e.ev, 0.95, 1.0)
    assert e.state is EvState.ASSUMED_BAD


def test_the_peers_always_skip_retires_the_ev():
    mon, changes, e = rig()
    mon.remote_bad(e.ev, 1.0)
    assert e.state is EvState.ASSUMED_BAD and changes[0].why == "SACK ALWAYS_SKIP"


@pytest.mark.parametrize("n", [1, 2, 3])
def test_an_ev_comes_back_after_n_answered_probes_and_not_before(n):
    mon, changes, e = rig(probes_to_restore=n)
    mon.lost(e.ev, 0.95, 1.0)
    for i in range(n - 1):
        mon.probe_answered(e.ev, 1.1 + i, marked=False)
        assert e.state is EvState.ASSUMED_BAD
    mon.probe_answered(e.ev, 2.0, marked=False)
    assert e.state is EvState.GOOD and e.active
    assert [c.new for c in changes if c.ev == e.ev][-1] == "GOOD"


def test_a_new_retirement_starts_the_probe_count_again():
    mon, _, e = rig(probes_to_restore=2)
    mon.lost(e.ev, 0.95, 1.0)
    mon.probe_answered(e.ev, 1.1, marked=False)
    mon.probe_answered(e.ev, 1.2, marked=False)
    assert e.state is EvState.GOOD
    mon.lost(e.ev, 1.25, 1.3)
    mon.probe_answered(e.ev, 1.4, marked=False)
    assert e.state is EvState.ASSUMED_BAD


def test_a_marked_probe_answer_brings_the_ev_back_in_skip():
    mon, _, e = rig(probes_to_restore=1)
    mon.lost(e.ev, 0.95, 1.0)
    mon.probe_answered(e.ev, 1.1, marked=True)
    assert e.state is EvState.SKIP


def test_probes_go_to_retired_evs_once_per_interval():
    mon, _, e = rig()
    assert mon.probes_due(1.0) == [] and mon.next_probe_at() is None
    mon.lost(e.ev, 0.95, 1.0)
    assert mon.probes_due(1.0) == [e]
    e.last_probe = 1.0
    assert mon.probes_due(1.0 + mon.probe_interval / 2) == []
    assert mon.next_probe_at() == 1.0 + mon.probe_interval


def test_a_retired_evs_first_probe_is_due_when_it_retired_not_before():
    """The due time the NIC's loop is armed with, and meters a timer's lateness from: a
    never-probed EV's (last_probe -1) would otherwise be negative, which the loop reads as
    no timer; one probed in an earlier retirement's, seconds in the past."""
    mon, _, e = rig(probes_to_restore=1)
    mon.lost(e.ev, 0.95, 1.0)
    assert mon.next_probe_at() == 1.0 and mon.probes_due(1.0) == [e]
    e.last_probe = 1.0
    mon.probe_answered(e.ev, 1.1, marked=False)
    assert e.state is EvState.GOOD and mon.next_probe_at() is None
    mon.lost(e.ev, 7.95, 8.0)  # long after the last probe
    assert mon.next_probe_at() == 8.0 and mon.probes_due(8.0) == [e]


def test_an_ev_retired_before_its_plane_went_down_is_probed_from_its_return():
    mon, _, e = rig()
    mon.lost(e.ev, 0.95, 1.0)
    e.last_probe = 1.0
    mon.profile.set_plane(e.path.plane, False, 2.0)
    assert e not in mon.probes_due(5.0) and mon.next_probe_at() is None
    mon.profile.set_plane(e.path.plane, True, 5.0)
    assert mon.next_probe_at() == 5.0 and e in mon.probes_due(5.0)

def test_hold_times_must_be_whole_positive_numbers():
    with pytest.raises(MrcemuError, match="probes_to_restore"):
        TransportConfig(probes_to_restore=0)
    with pytest.raises(MrcemuError, match="ce_skip_rotations"):
        TransportConfig(ce_skip_rotations=1.5)


# ---- loss recovery in round trips (docs/transport.md, loss recovery) -----------------------------
def test_a_per_ev_order_hole_waits_the_slack_for_a_nack_then_retires():
    mon, changes, e = rig(ack_slack=0.01)
    mon.hole(e.ev, 17, 0.95, 1.0)
    assert e.state is EvState.GOOD and mon.pending and mon.next_deadline(0.02) == 1.01
    mon.check(1.009, 0.02)
    assert e.state is EvState.GOOD  # a NACK may still say it was trimmed
    mon.check(1.01, 0.02)
    assert e.state is EvState.ASSUMED_BAD and changes[0].why == "lost: SACK hole"
    assert changes[0].lost_sent == 0.95 and not mon.pending


def test_a_per_ev_order_hole_a_trailing_nack_explains_retires_nothing():
    mon, changes, e = rig(ack_slack=0.01)
    mon.hole(e.ev, 17, 0.95, 1.0)
    mon.nacked(17)  # its trimmed header's NACK crossed the reverse path after the SACK
    mon.check(2.0, 0.02)
    assert e.state is EvState.GOOD and changes == [] and mon.holes_trimmed == 1


def test_a_per_ev_order_hole_is_a_loss_even_if_its_resent_copy_was_acked_meanwhile():
    # The hole sent the packet again at once; that copy's ack, within the slack, cannot
    # say the lost one arrived (a path is FIFO: only a trim, and its NACK, explains it).
    mon, changes, e = rig(ack_slack=0.01)
    mon.hole(e.ev, 17, 0.95, 1.0)
    mon.check(1.01, 0.02)
    assert e.state is EvState.ASSUMED_BAD and changes[0].why == "lost: SACK hole"


def test_an_overdue_ev_is_stopped_then_back_in_use_when_its_packet_arrives_late():
    mon, changes, e = rig()
    assert mon.overdue(e.ev, 0.95, 1.0)
    assert e.state is EvState.STOPPED and e.active and e.fb.stopped and not e.fb.usable
    assert (changes[0].new, changes[0].why, changes[0].lost_sent) == ("STOPPED", "overdue", 0.95)
    mon.probes_sent(e.ev, 1.0, 5, 17)
    mon.heard(1.001)  # nothing from it yet
    assert e.state is EvState.STOPPED
    e.last_feedback, e.heard_sent = 1.004, 0.95  # its late packet was acked
    mon.heard(1.004)
    assert e.state is EvState.GOOD and e.fb.usable and not e.fb.stopped
    assert changes[-1].why == "heard from" and mon.stops_cleared == 1
    # Its probe's deadline went with the stop: nothing retires it later.
    mon.check(5.0, 0.02)
    assert e.state is EvState.GOOD and not mon.pending


def test_an_ev_heard_from_after_its_overdue_packet_was_lost_keeps_its_round_trips():
    # The overdue packet may have been lost; its age is no sample of the path's round
    # trip (as one, never less than the patience it exceeded, it ran an estimate up
    # without bound). Which copy arrived late is the data path's to say.
    mon, changes, e = rig()
    e.fb.rtt_sample(0.02, 0.005)
    mon.overdue(e.ev, 0.95, 1.0)
    e.last_feedback, e.heard_sent = 30.0, 29.9  # a packet sent 29 s later arrived
    mon.heard(30.0)
    assert e.state is EvState.GOOD and changes[-1].why == "heard from"
    assert e.fb.rtt_raw == 0.02


def test_a_late_ack_of_a_packet_sent_before_the_overdue_one_leaves_the_ev_stopped():
    # Queued ahead of the overdue packet, it crossed before the path failed: the path's
    # state now is what the probes say, and no data goes onto it meanwhile.
    mon, changes, e = rig()
    mon.overdue(e.ev, 0.95, 1.0)
    mon.probes_sent(e.ev, 1.0, 5, 17)
    e.last_feedback, e.heard_sent = 1.001, 0.94
    mon.heard(1.001)
    assert e.state is EvState.STOPPED and not e.fb.usable and mon.stops_cleared == 0
    assert [c.new for c in changes] == ["STOPPED"]
    # The overdue packet itself arrives: the path is slow, not broken.
    e.last_feedback, e.heard_sent = 1.01, 0.95
    mon.heard(1.01)
    assert e.state is EvState.GOOD and changes[-1].why == "heard from"


def test_a_later_packet_that_makes_the_overdue_one_a_hole_does_not_resume_its_ev():
    mon, changes, e = rig(ack_slack=0.01)
    mon.overdue(e.ev, 0.95, 1.0)
    mon.probes_sent(e.ev, 1.0, 5, 17)
    # A packet sent after it arrived; per-EV order calls the overdue one a hole.
    mon.hole(e.ev, 17, 0.95, 1.002)
    e.last_feedback, e.heard_sent = 1.002, 0.96
    mon.heard(1.002)
    assert e.state is EvState.STOPPED
    mon.check(1.02, 0.5)  # the slack passed with no NACK: lost
    assert [(c.new, c.why) for c in changes if c.ev == e.ev] == [
        ("STOPPED", "overdue"), ("ASSUMED_BAD", "lost: SACK hole")]


def test_a_hole_a_nack_explains_lets_the_later_packet_resume_the_ev():
    mon, changes, e = rig(ack_slack=0.01)
    mon.overdue(e.ev, 0.95, 1.0)
    mon.hole(e.ev, 17, 0.95, 1.002)
    e.last_feedback, e.heard_sent = 1.002, 0.96
    mon.nacked(17)  # it was trimmed, not lost
    mon.heard(1.003)
    assert e.state is EvState.GOOD and changes[-1].why == "heard from"


def test_a_stopped_ev_whose_control_probe_goes_unanswered_is_retired():
    mon, changes, e = rig(ack_slack=0.01)
    mon.overdue(e.ev, 0.95, 1.0)
    mon.probes_sent(e.ev, 1.0, 5, 17)
    assert mon.next_deadline(0.02) == pytest.approx(1.03)  # srtt + the slack
    mon.check(1.029, 0.02)
    assert e.state is EvState.STOPPED
    mon.check(1.03, 0.02)
    assert e.state is EvState.ASSUMED_BAD and not e.active
    assert (changes[1].why, changes[1].lost_sent) == ("lost: probe unanswered", 0.95)


def test_a_stopped_ev_whose_control_probe_is_answered_is_slow_not_broken():
    mon, changes, e = rig()
    mon.overdue(e.ev, 0.95, 1.0)
    mon.probes_sent(e.ev, 1.0, 5, 17)
    mon.probe_answered(e.ev, 1.01, False, 4)  # not the data probe: the control one
    assert e.state is EvState.GOOD and changes[-1].why == "probe answered"
    # The data probe comes back behind the EV's queue; the packet had arrived.
    mon.probe_answered(e.ev, 1.05, False, 5, lambda psn: False)
    assert e.state is EvState.GOOD and mon.probe_proofs == 0


def test_a_data_probe_whose_answer_reports_the_overdue_packet_missing_proves_a_tail_loss():
    mon, changes, e = rig()
    mon.overdue(e.ev, 0.95, 1.0)
    mon.probes_sent(e.ev, 1.0, 5, 17)
    mon.probe_answered(e.ev, 1.01, False, 4)  # the path forwards...
    # ...and the probe sent behind every packet on it arrived without packet 17: lost.
    mon.probe_answered(e.ev, 1.02, False, 5, lambda psn: psn == 17)
    assert e.state is EvState.ASSUMED_BAD and mon.probe_proofs == 1
    (bad,) = [c for c in changes if c.new == "ASSUMED_BAD"]
    assert (bad.why, bad.lost_sent) == ("lost: probe proved", 0.95)


def test_a_data_probe_reporting_a_packet_a_nack_said_was_trimmed_proves_nothing():
    """A trimmed packet is missing at the receiver until its copy arrives: the data
    probe's answer reports it missing, and the NACK already said why."""
    mon, changes, e = rig()
    mon.overdue(e.ev, 0.95, 1.0)
    mon.probes_sent(e.ev, 1.0, 5, 17)
    mon.probe_answered(e.ev, 1.01, False, 4)
    mon.nacked(17, e.ev)  # packet 17 was trimmed on this EV
    mon.probe_answered(e.ev, 1.02, False, 5, lambda psn: psn == 17)
    assert e.state is EvState.GOOD and mon.probe_proofs == 0
    # A NACK about packet 17's copy on another EV says nothing of this one: a proof.
    mon, changes, e = rig()
    other = next(x for x in mon.profile.evs.values() if x.active and x is not e)
    mon.overdue(e.ev, 0.95, 1.0)
    mon.probes_sent(e.ev, 1.0, 5, 17)
    mon.nacked(17, other.ev)
    mon.probe_answered(e.ev, 1.02, False, 5, lambda psn: psn == 17)
    assert e.state is EvState.ASSUMED_BAD and mon.probe_proofs == 1


def test_a_stop_whose_ev_was_retired_otherwise_leaves_no_deadline_behind():
    mon, changes, e = rig()
    mon.overdue(e.ev, 0.95, 1.0)
    mon.probes_sent(e.ev, 1.0, 5, 17)
    mon.profile.set_plane(e.path.plane, False, 1.001)  # its port went down...
    mon.profile.set_plane(e.path.plane, True, 1.002)  # ...and back: ASSUMED_BAD, probe first
    assert e.state is EvState.ASSUMED_BAD
    mon.check(2.0, 0.02)
    assert not mon.pending and mon.next_deadline(0.02) is None


def test_with_an_oblivious_policy_a_mark_leaves_the_doubled_path_as_it_is():
    """`oblivious` is deaf to congestion by definition: the profile keeps the backup."""
    mon, changes, e = rig(load_balancing="oblivious")
    mon.lost(e.ev, 0.95, 1.0)
    extra = mon.profile.evs[changes[-1].ev]
    own = next(x for x in mon.profile.evs.values() if x.active and x is not extra
               and (x.path.plane, x.path.spine) == (extra.path.plane, extra.path.spine))
    mon.ce_echoed(own.ev, 1.1)
    assert extra.active and mon.profile.next_retry() is None
