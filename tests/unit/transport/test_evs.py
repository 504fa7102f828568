"""The EV profile's state machine: a wrongly accused path gets its share back."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu.errors import MrcemuError
from mrcemu.topology import load
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import EvStateChanged
from mrcemu.transport.evs import EvState
from mrcemu.transport.profiles import profile


def active_per_path(prof, plane: int) -> Counter:
    return Counter(e.path.spine for e in prof.evs.values()
                   if e.path.plane == plane and e.active)


def test_a_retired_evs_backup_takes_a_quiet_path_and_hands_it_back_at_its_first_mark():
    """plane_share `capacity`: every path of plane 3 has its EV, so the backup that takes
    the retired EV's share goes on another path beside that path's own EV. A mark there
    says the path cannot carry two: the backup steps back, the plane sprays its 3 paths,
    and tries again after a hold of 32 of the path's round trips, twice as long the next
    time. The EV, probed back, takes its own path back."""
    prof = profile(load("default"), 0, 7, TransportConfig())
    changes: list[EvStateChanged] = []
    prof.emit = changes.append
    plane = [e for e in prof.evs.values() if e.path.plane == 3]
    for e in plane:
        e.fb.rtt_sample(0.010, 0.001)
    accused = next(e for e in plane if e.path.spine == 2 and e.active)
    prof.assume_bad(accused.ev, 1.0, "test")
    extra = prof.evs[changes[-1].ev]
    assert changes[-1].new == "ACTIVE" and extra.path.spine != 2
    during = active_per_path(prof, 3)
    assert during[2] == 0 and sorted(during.values()) == [1, 1, 2]
    own = next(e for e in plane if e.active and e is not extra
               and e.path.spine == extra.path.spine)
    prof.congested(own, 1.2)
    assert not extra.active and active_per_path(prof, 3) == Counter({0: 1, 1: 1, 3: 1})
    assert (changes[-1].ev, changes[-1].new) == (extra.ev, "BACKUP")
    rtt = own.fb.rtt_raw
    assert prof.next_retry() == pytest.approx(1.2 + 32 * rtt)
    prof.retry(1.2 + 31 * rtt)
    assert sum(active_per_path(prof, 3).values()) == 3
    prof.retry(1.2 + 32 * rtt)
    again = prof.evs[changes[-1].ev]
    assert changes[-1].new == "ACTIVE" and sum(active_per_path(prof, 3).values()) == 4
    assert again.path.spine not in (2, extra.path.spine)  # the path marked longest ago
    mate = next(e for e in plane if e.active and e is not again
                and e.path.spine == again.path.spine)
    prof.congested(mate, 2.0)
    assert prof.next_retry() == pytest.approx(2.0 + 64 * mate.fb.rtt_raw)
    accused.last_probe = 2.05
    prof.restore(accused.ev, 2.1, marked=False)
    assert accused.active and active_per_path(prof, 3) == Counter({0: 1, 1: 1, 2: 1, 3: 1})
    prof.retry(10.0)  # the plane is whole: nothing to try
    assert active_per_path(prof, 3) == Counter({0: 1, 1: 1, 2: 1, 3: 1})


def test_with_plane_share_paths_a_retired_ev_is_replaced_by_no_second_ev_on_a_path():
    """The plane sprays its 3 other paths, one EV each, and the probed-back EV takes its
    path back."""
    prof = profile(load("default"), 0, 7, TransportConfig(plane_share="paths"))
    changes: list[EvStateChanged] = []
    prof.emit = changes.append
    accused = next(e for e in prof.evs.values()
                   if e.path.plane == 3 and e.path.spine == 2 and e.active)
    prof.assume_bad(accused.ev, 1.0, "test")
    assert active_per_path(prof, 3) == Counter({0: 1, 1: 1, 3: 1})
    assert not [c for c in changes if c.new == "ACTIVE"] and prof.next_retry() is None
    sprayed = Counter(e.path.plane for e in (prof.next_ev() for _ in range(31 * 8)))
    assert sprayed[3] == 3 * 8 and all(sprayed[p] == 4 * 8 for p in range(8) if p != 3)
    accused.last_probe = 1.05
    prof.restore(accused.ev, 1.1, marked=False)
    assert accused.active and accused.state.value == "GOOD"
    sprayed = Counter(e.path.plane for e in (prof.next_ev() for _ in range(32 * 8)))
    assert set(sprayed.values()) == {4 * 8}


def test_a_probed_back_ev_whose_path_is_covered_stays_a_backup():
    cfg = TransportConfig()
    prof = profile(load("default"), 0, 7, cfg)
    backup = next(e for e in prof.evs.values() if e.path.plane == 3 and not e.active)
    prof.assume_bad(backup.ev, 1.0, "test")  # a backup accused: nothing promoted
    before = active_per_path(prof, 3)
    prof.restore(backup.ev, 1.1, marked=False)
    assert not backup.active and active_per_path(prof, 3) == before


def test_a_restricted_set_sprays_its_paths_and_replaces_a_retired_ev_from_an_unused_one():
    """paper experiment E7: EV set 2 a plane. The retired EV's path is replaced by one the set did
    not use (EV-B), and the retired EV, probed back, waits as a backup: the set stays 2."""
    prof = profile(load("default"), 0, 7, TransportConfig(ev_set_per_plane=2))
    changes: list[EvStateChanged] = []
    prof.emit = changes.append
    for plane in range(8):  # the two lowest spines of every plane, one EV each
        assert active_per_path(prof, plane) == Counter({0: 1, 1: 1})
    sprayed = {(e.path.plane, e.path.spine) for e in (prof.next_ev() for _ in range(64))}
    assert sprayed == {(p, s) for p in range(8) for s in (0, 1)}
    a = next(e for e in prof.evs.values() if e.path.plane == 2 and e.path.spine == 0
             and e.active)
    prof.assume_bad(a.ev, 1.0, "lost: SACK hole")
    during = active_per_path(prof, 2)
    b = prof.evs[next(c.ev for c in changes if c.new == "ACTIVE")]
    assert b.path.spine in (2, 3) and during == Counter({1: 1, b.path.spine: 1})
    a.last_probe = 1.05
    prof.restore(a.ev, 1.1, marked=False)
    assert a.state.value == "GOOD" and not a.active and b.active
    assert active_per_path(prof, 2) == during


def test_an_unrestricted_set_sprays_every_path():
    prof = profile(load("default"), 0, 7, TransportConfig())
    assert all(active_per_path(prof, p) == Counter({0: 1, 1: 1, 2: 1, 3: 1}) for p in range(8))


def test_a_pinned_connection_sprays_one_ev_of_its_one_plane():
    """paper experiment E8: a connection on plane 2 alone with a set of one EV a plane sends
    every packet on the EV over plane 2's lowest spine; a plane the fabric does not have
    is one clear error."""
    prof = profile(load("default"), 1, 5, TransportConfig(ev_planes=(2,), ev_set_per_plane=1))
    assert prof.planes == [2] and {e.path.plane for e in prof.evs.values()} == {2}
    sent = {(e.path.plane, e.path.spine) for e in (prof.next_ev() for _ in range(20))}
    assert sent == {(2, 0)}
    with pytest.raises(MrcemuError, match="plane.s. 9, which the fabric does not have"):
        profile(load("default"), 1, 5, TransportConfig(ev_planes=(2, 9)))


@pytest.mark.parametrize("variant_first", [True, False])
def test_a_plane_that_comes_back_sprays_again_whichever_ev_is_probed_back_first(
        variant_first):
    """A host port down then up (paper experiment E1, E2): the plane's EVs are probed before use,
    and once answered the plane carries its share again, one active EV a path."""
    prof = profile(load("default"), 0, 1, TransportConfig())  # same leaf: one path a plane
    base = next(e for e in prof.evs.values() if e.path.plane == 2 and e.active)
    variant = next(e for e in prof.evs.values() if e.path.plane == 2 and not e.active)
    prof.set_plane(2, False, 1.0)
    prof.set_plane(2, True, 2.0)
    assert base.state.value == variant.state.value == "ASSUMED_BAD"
    for e in ((variant, base) if variant_first else (base, variant)):
        e.last_probe = 2.05
        prof.restore(e.ev, 2.1, marked=False)
    assert active_per_path(prof, 2) == Counter({None: 1})
    sprayed = {e.path.plane for e in (prof.next_ev() for _ in range(16))}
    assert 2 in sprayed


def test_probing_visits_exactly_the_assumed_bad_evs_of_live_planes():
    prof = profile(load("default"), 0, 7, TransportConfig())
    evs = [e for e in prof.evs.values() if e.active]
    a, b, c = evs[0], next(e for e in evs if e.path.plane != evs[0].path.plane), evs[-1]
    for e in (a, b, c):
        prof.assume_bad(e.ev, 1.0, "test")
    assert prof.bad_count == 3
    assert {e.ev for e in prof.needs_probe(2.0, 0.5)} == {a.ev, b.ev, c.ev}
    a.last_probe = 1.8  # probed 0.2 s ago: not due again before 2.3
    assert {e.ev for e in prof.needs_probe(2.0, 0.5)} == {b.ev, c.ev}
    prof.set_plane(b.path.plane, False, 2.0)  # nothing to probe through a dead port
    assert b.ev not in {e.ev for e in prof.needs_probe(2.0, 0.5)}
    prof.restore(c.ev, 2.1, marked=False)
    assert c.ev not in prof.bad and prof.bad_count == 2
    assert all(e.state.value == "ASSUMED_BAD" for e in prof.bad.values())


def test_a_rotation_holds_every_usable_ev_once_with_the_planes_interleaved():
    prof = profile(load("default"), 0, 7, TransportConfig())
    bad = next(e for e in prof.evs.values() if e.active)
    prof.assume_bad(bad.ev, 0.0, "test")
    prof.new_rotation()
    order = list(prof._order)
    usable = {e.ev for e in prof.evs.values() if prof.usable(e)}
    assert sorted(order) == sorted(usable) and bad.ev not in order
    planes = [prof.evs[ev].path.plane for ev in order]
    assert planes[:len(prof.planes)] == list(prof.planes)  # one of each plane in turn


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["skip", "bad", "probe", "plane", "rotate"]),
                              st.integers(0, 10_000), st.booleans()), max_size=80))
def test_the_cached_rotation_orders_exactly_what_a_fresh_scan_orders(ops):
    """new_rotation keeps each plane's usable EVs until one's usability changes: a
    profile whose cache is dropped before every rotation must spray identically."""
    topo = load("default")
    cfg = TransportConfig(seed=2)
    cached, fresh = profile(topo, 0, 7, cfg), profile(topo, 0, 7, cfg)
    seen: list[tuple[list[int], dict[str, str]]] = []
    for p in (cached, fresh):
        evs = list(p.evs)
        out = []
        for i, (op, k, flag) in enumerate(ops):
            now, ev = i * 1e-3, evs[k % len(evs)]
            if op == "skip":
                p.skip(ev, now, "test")
            elif op == "bad":
                p.assume_bad(ev, now, "test")
            elif op == "probe":
                p.restore(ev, now, marked=flag)
            elif op == "plane":
                p.set_plane(p.planes[k % len(p.planes)], flag, now)
            else:
                if p is fresh:
                    p._usable_by_plane = None
                p.new_rotation()
                out.append(list(p._order))
        seen.append((out, p.states()))
    assert seen[0] == seen[1]


def one_ev_a_plane(tmp_path, seed=3):
    """A profile with one usable EV in each plane: two planes, one spine each."""
    f = tmp_path / "thin.yaml"
    f.write_text("planes: 2\nleaves_per_plane: 2\nspines_per_plane: 1\nhosts: 4\n"
                 "host_link_mbps: 20\nfabric_link_mbps: 20\nmtu: 9000\n")
    prof = profile(load(str(f)), 0, 3, TransportConfig(seed=seed))
    assert all(n <= 1 for n in Counter(e.path.plane for e in prof.evs.values()
                                       if prof.usable(e)).values())
    return prof


def test_with_one_ev_a_plane_a_rotation_repeats_the_order_untold(tmp_path):
    # The fast path: the compiled sender is told an order once, then sprays it again
    # rotation after rotation; the order, the rotation count and the generator's state
    # are what the full path leaves (a profile whose cache is dropped every time).
    fast, full = one_ev_a_plane(tmp_path), one_ev_a_plane(tmp_path)
    told = {"fast": 0, "full": 0}
    fast.on_rotation = lambda _o: told.__setitem__("fast", told["fast"] + 1)
    full.on_rotation = lambda _o: told.__setitem__("full", told["full"] + 1)
    answers = []
    for _ in range(50):
        answers.append(fast.new_rotation())
        full._usable_by_plane = None
        assert full.new_rotation()
        assert fast._order == full._order and fast.rotation == full.rotation
    assert answers == [True] + [False] * 49 and told == {"fast": 1, "full": 50}
    assert fast._rng.getstate() == full._rng.getstate()
    # A change of usability gets a new order told: a stop takes the EV out, and its
    # resumption puts it back. (A SKIP never takes a plane's last usable EV.)
    ev = fast._order[0]
    fast.skip(ev, 1.0, "test")
    assert fast.evs[ev].fb.usable and fast.evs[ev].state is EvState.GOOD
    assert fast.stop(ev, 1.0, "test") and not fast.evs[ev].fb.usable
    assert fast.new_rotation() and told["fast"] == 2 and ev not in fast._order
    fast.resume(ev, 1.1, "test")
    assert fast.new_rotation() and told["fast"] == 3 and ev in fast._order
    assert not fast.new_rotation() and told["fast"] == 3
    # So does a new listener (a sender attached after the profile rotated).
    fast.on_rotation = lambda _o: told.__setitem__("new", 1)
    assert fast.new_rotation() and told.get("new") == 1


def test_several_evs_a_path_are_its_first_variants_and_a_restore_keeps_the_count():
    from mrcemu.topology.paths import ev_fields

    cfg = TransportConfig(ev_per_path=3, ev_backups_per_path=1)
    prof = profile(load("default"), 0, 7, cfg)
    active = Counter(ev_fields(e.ev) for e in prof.evs.values() if e.active)
    assert set(active.values()) == {3} and len(active) == 32
    assert sum(not e.active for e in prof.evs.values()) == 32  # one backup a path
    assert all((e.ev >> 12) & 0xF < 3 for e in prof.evs.values() if e.active)
    plane = [e for e in prof.evs.values() if e.path.plane == 4]
    victim = next(e for e in plane if e.active and e.path.spine == 2)
    prof.assume_bad(victim.ev, 1.0, "test")
    assert sum(e.active for e in plane) == 12  # a backup took its place
    prof.restore(victim.ev, 2.0, marked=False)
    per = Counter(e.path.spine for e in plane if e.active)
    assert victim.active and per == {0: 3, 1: 3, 2: 3, 3: 3}
    with pytest.raises(MrcemuError, match="ev_per_path \\(16\\) plus ev_backups_per_path"):
        TransportConfig(ev_per_path=16)


def sampled_plane(plane: int, per_path: int = 1, active: bool = True):
    """h0's profile toward h7 on `default` and one plane's EVs (the active ones, or all),
    each with a 10 ms round trip sampled."""
    prof = profile(load("default"), 0, 7, TransportConfig(ev_per_path=per_path))
    evs = [e for e in prof.evs.values() if e.path.plane == plane and (e.active or not active)]
    for e in evs:
        e.fb.rtt_sample(0.010, 0.001)
    return prof, evs


def test_a_hot_path_is_shed_whole_with_several_evs_and_its_evs_share_the_skip():
    # One mark on a path hotter than its plane's others sheds every EV of the path for
    # the same round trips (they cross the same queues), not the one marked EV: with
    # 15 EVs a path, shedding one left the path 14/15 of its share.
    prof, plane = sampled_plane(2, per_path=3)
    hot = [e for e in plane if e.path.spine == 1]
    assert len(hot) == 3
    prof.skip(hot[1].ev, 1.0, "test")
    assert {e.state for e in hot} == {EvState.SKIP}
    assert len({(e.thin_until, e.skip_until_rotation, e.skip_len) for e in hot}) == 1
    assert hot[0].thin_until > 1.0 and all(e.fb.thinned for e in hot)
    assert all(e.state is EvState.GOOD for e in plane if e.path.spine != 1)
    # An occasional mark (the plane loaded throughout: not hotter) skips its EV alone.
    cool = [e for e in plane if e.path.spine == 2]
    prof.skip(cool[0].ev, 1.001, "test")
    assert [e.state for e in cool] == [EvState.SKIP, EvState.GOOD, EvState.GOOD]


def test_a_plane_keeps_its_last_path_whole():
    prof, plane = sampled_plane(5, per_path=3)
    last = [e for e in plane if e.path.spine == 0]
    for e in plane:
        if e.path.spine != 0:
            assert prof.stop(e.ev, 0.5, "test")
    prof.skip(last[0].ev, 1.0, "test")
    # The marked EV sits out, its path's others carry the plane.
    assert [e.state for e in last] == [EvState.SKIP, EvState.GOOD, EvState.GOOD]


def test_one_ev_a_path_sheds_only_it_and_never_wakes_its_backup():
    prof, plane = sampled_plane(2, active=False)
    hot = [e for e in plane if e.path.spine == 1]
    assert [e.active for e in hot] == [True, False]  # the path's EV and its backup
    prof.skip(hot[0].ev, 1.0, "test")
    assert [e.state for e in hot] == [EvState.SKIP, EvState.GOOD]


def test_a_marked_path_with_several_evs_is_hotter_than_its_planes_other_paths():
    # Every EV of the hot path is marked within a round trip (one queue marks them all):
    # the path is still hotter than the plane's other paths, and each EV is shed for
    # round trips. A mark on another path of the plane makes the plane loaded throughout.
    prof, plane = sampled_plane(2, per_path=3)
    hot = [e for e in plane if e.path.spine == 1]
    for i, e in enumerate(hot):
        prof.skip(e.ev, 1.0 + i * 1e-3, "test")
        assert e.state is EvState.SKIP and e.thin_until > 1.0 + i * 1e-3, i
    other = next(e for e in plane if e.path.spine == 3)
    prof.skip(other.ev, 1.004, "test")
    assert other.state is EvState.SKIP and other.thin_until == 0.0 and not other.fb.thinned


def test_an_explicit_profile_uses_its_evs_alone_and_a_denied_one_comes_back_by_probe():
    prof = profile(load("default"), 0, 7, TransportConfig())
    changes: list[EvStateChanged] = []
    prof.emit = changes.append
    first = [e.ev for e in prof.evs.values() if e.active][:3]
    prof.use_only(set(first[:2]), 1.0)
    assert {ev for ev, e in prof.evs.items() if e.state is not EvState.DENIED} == set(first[:2])
    assert {e.ev for e in (prof.next_ev() for _ in range(16))} == set(first[:2])
    # Listed again, a denied EV is probed first, not sprayed at once.
    prof.use_only(set(first), 2.0)
    assert prof.evs[first[2]].state is EvState.ASSUMED_BAD
    assert (changes[-1].ev, changes[-1].new) == (first[2], "ASSUMED_BAD")
    with pytest.raises(ValueError, match="no EV 0x0000dead"):
        prof.use_only({first[0], 0xDEAD}, 3.0)
    with pytest.raises(ValueError, match="at least one"):
        prof.use_only(set(), 3.0)


def test_plane_share_full_puts_a_backup_on_a_path_that_has_its_share():
    """The rule before, kept to compare (`plane_share: full`): the plane keeps 4 active
    EVs, two of them through one spine."""
    prof = profile(load("default"), 0, 7, TransportConfig(plane_share="full"))
    accused = next(e for e in prof.evs.values()
                   if e.path.plane == 3 and e.path.spine == 2 and e.active)
    prof.assume_bad(accused.ev, 1.0, "test")
    during = active_per_path(prof, 3)
    assert during[2] == 0 and sum(during.values()) == 4 and max(during.values()) == 2
    with pytest.raises(MrcemuError, match="plane_share must be one of capacity, paths, full"):
        TransportConfig(plane_share="even")
