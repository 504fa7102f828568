"""The EV profile's state machine: a wrongly accused path gets its share back."""

from __future__ import annotations

from collections import Counter

from mrcemu.topology import load
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import EvStateChanged
from mrcemu.transport.profiles import profile


def active_per_path(prof, plane: int) -> Counter:
    return Counter(e.path.spine for e in prof.evs.values()
                   if e.path.plane == plane and e.active)


def test_a_probed_back_ev_takes_its_path_back_from_the_substitute():
    cfg = TransportConfig()
    prof = profile(load("default"), 0, 7, cfg)
    changes: list[EvStateChanged] = []
    prof.emit = changes.append
    spines = set(active_per_path(prof, 3))
    accused = next(e for e in prof.evs.values()
                   if e.path.plane == 3 and e.path.spine == 2 and e.active)
    prof.assume_bad(accused.ev, 1.0, "test")
    # A backup on another path took its place: path 2 carries nothing meanwhile.
    during = active_per_path(prof, 3)
    assert during[2] == 0 and sum(during.values()) == len(spines)
    substitute = next(c.ev for c in changes if c.new == "ACTIVE")
    accused.last_probe = 1.05
    prof.probe_answered(accused.ev, 1.1, marked=False)
    assert accused.active and accused.state.value == "GOOD"
    assert active_per_path(prof, 3) == Counter({s: 1 for s in spines})
    assert not prof.evs[substitute].active
    assert (changes[-1].ev, changes[-1].old, changes[-1].new) == (substitute, "ACTIVE",
                                                                  "BACKUP")
    # Every path is in the spraying order again.
    sprayed = {(e.path.plane, e.path.spine) for e in (prof.next_ev() for _ in range(64))}
    assert (3, 2) in sprayed


def test_a_probed_back_ev_whose_path_is_covered_stays_a_backup():
    cfg = TransportConfig()
    prof = profile(load("default"), 0, 7, cfg)
    backup = next(e for e in prof.evs.values() if e.path.plane == 3 and not e.active)
    prof.assume_bad(backup.ev, 1.0, "test")  # a backup accused: nothing promoted
    before = active_per_path(prof, 3)
    prof.probe_answered(backup.ev, 1.1, marked=False)
    assert not backup.active and active_per_path(prof, 3) == before
