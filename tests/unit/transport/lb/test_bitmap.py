"""uet-htsim's penalty bitmap: ECN +1, a mid-path trim +4, a timeout 15 (the most); a
sweep passes a penalized EV over and takes one off."""

from __future__ import annotations

from collections import Counter

from mrcemu.transport.lb import Feedback
from mrcemu.transport.lb.bitmap import MAX_PENALTY
from tests.unit.transport.lb.helpers import plane_evs, profile_with


def sweeps(prof, plane: int, n: int) -> list[list[int]]:
    usable = plane_evs(prof, plane)
    return [prof.policy.choose(plane, usable, 2.0 + i) for i in range(n)]


def test_an_unpenalized_plane_is_swept_in_full_each_rotation():
    prof = profile_with("bitmap", seed=5)
    usable = {e.ev for e in plane_evs(prof, 6)}
    for picks in sweeps(prof, 6, 50):
        assert sorted(picks) == sorted(usable)


def test_an_ev_is_passed_over_until_its_penalty_is_paid():
    for what, passes in ((Feedback.ECN, 1), (Feedback.TRIM, 4), (Feedback.TIMEOUT, 15)):
        prof = profile_with("bitmap", seed=5)
        usable = plane_evs(prof, 2)
        marked = usable[1]
        prof.policy.hear(marked, what, 1.0)
        assert prof.policy.penalty[marked.ev] == passes
        got: Counter[int] = Counter()
        for i in range(40):
            owed = prof.policy.penalty[marked.ev]
            picks = prof.policy.choose(2, usable, 2.0 + i)
            got.update(picks)
            # a rotation that ends still owing never sent on it
            if prof.policy.penalty[marked.ev]:
                assert marked.ev not in picks
            # and a sweep pays one a visit: a rotation (four picks) visits it once or
            # twice (the last of one sweep, the first of the next)
            assert owed - prof.policy.penalty[marked.ev] <= 2
        assert prof.policy.penalty[marked.ev] == 0
        # Every sweep visits each EV once, so the EVs' visits differ by one at most;
        # the others were picked at every visit, the marked one at all but those that
        # paid, and those just after a payment where a new sweep began with it again
        # (only the first penalized EV met on the way to a pick pays, as in htsim).
        others = [n for ev, n in got.items() if ev != marked.ev]
        assert (min(others) - 1 - 2 * passes <= got[marked.ev]
                <= max(others) + 1 - passes), (what, got)
        assert sum(got.values()) == 160


def test_penalties_add_up_to_the_most_and_a_restored_ev_starts_clean():
    prof = profile_with("bitmap")
    e = plane_evs(prof, 0)[0]
    for _ in range(4):  # 16, held at the most
        prof.policy.hear(e, Feedback.TRIM, 1.0)
    assert prof.policy.penalty[e.ev] == MAX_PENALTY
    prof.assume_bad(e.ev, 1.1, "test")  # the monitor retires it ...
    prof.restore(e.ev, 1.5, marked=False)  # ... and its probes bring it back
    assert e.ev not in prof.policy.penalty


def test_a_whole_plane_penalized_still_sends():
    prof = profile_with("bitmap")
    usable = plane_evs(prof, 7)
    for e in usable:
        prof.policy.hear(e, Feedback.TIMEOUT, 1.0)
    picks = prof.policy.choose(7, usable, 2.0)
    assert len(picks) == len(usable)
