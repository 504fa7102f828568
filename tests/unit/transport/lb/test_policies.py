"""What every load-balancing policy owes the transport: it chooses only usable EVs (the
path monitor's verdicts bind it), it is selected by name, and it delivers intact."""

from __future__ import annotations

import hashlib

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.topology.paths import ev_fields
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.lb import POLICIES, Feedback, LoadBalancer
from tests.unit.transport.helpers import pair, write
from tests.unit.transport.lb.helpers import profile_with

NAMES = sorted(POLICIES)


def test_the_built_in_policies_are_selectable_by_name_and_an_unknown_one_is_refused():
    assert NAMES == ["bitmap", "mrc", "oblivious", "reps", "reps_ack"]
    for name in NAMES:
        prof = profile_with(name)
        assert type(prof.policy).name == name and prof.policy.profile is prof
    with pytest.raises(MrcemuError, match="load_balancing must be one of mrc, oblivious, "
                                          "reps, reps_ack, bitmap, not 'ecmp'"):
        TransportConfig(load_balancing="ecmp")


@pytest.mark.parametrize("name", NAMES)
def test_every_policy_skips_retired_stopped_and_down_evs(name):
    prof = profile_with(name)
    plane2 = [e for e in prof.evs.values() if e.path.plane == 2 and e.active]
    retired, stopped = plane2[0], plane2[1]
    prof.assume_bad(retired.ev, 1.0, "test")
    assert prof.stop(stopped.ev, 1.0, "test")
    prof.set_plane(5, False, 1.0)
    # Feedback that would favour them, for the policies that listen.
    for e in (retired, stopped):
        prof.policy.hear(e, Feedback.ACK, 1.0, 8)
    seen = set()
    for _ in range(200):
        prof.new_rotation()
        seen.update(prof._order)
    assert retired.ev not in seen and stopped.ev not in seen
    assert not any(prof.evs[ev].path.plane == 5 for ev in seen)
    assert {prof.evs[ev].path.plane for ev in seen} == set(prof.planes) - {5}


@pytest.mark.parametrize("name", NAMES)
def test_every_policy_delivers_a_write_intact_over_a_lossy_network(name):
    net, ca, cb = pair(seed=4, load_balancing=name)
    net.default.loss = 0.02
    data, mr = write(ca, cb, 1 << 20)
    net.run(30.0, stop=lambda: ca.idle)
    assert ca.idle and hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
    assert type(ca.profile.policy).name == name


def marked_share(name: str) -> float:
    """The share of h0's data packets on spine 1 of every plane, whose every packet the
    simulated network marks CE, over a 4 MiB write."""
    net, ca, cb = pair(seed=2, load_balancing=name)
    for plane in range(8):
        net.path("h0", plane, 1).ce = 1.0
    data, mr = write(ca, cb, 4 << 20)
    net.run(30.0, stop=lambda: ca.idle)
    assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
    per_ev = ca.stats.per_ev
    return sum(n for ev, n in per_ev.items() if ev_fields(ev)[1] == 1) / sum(per_ev.values())


def test_policies_that_hear_ecn_move_off_a_marked_path_and_oblivious_does_not():
    # Four spines a plane, one marking everything: oblivious keeps its quarter; MRC's
    # SKIPs, the bitmap's penalties and REPS's not recycling a marked EV each shed it.
    share = {name: marked_share(name) for name in NAMES}
    assert 0.20 <= share["oblivious"] <= 0.30, share
    for name in ("mrc", "bitmap", "reps"):
        assert share[name] < 0.8 * share["oblivious"], share


def test_a_policy_chooses_per_plane_and_the_planes_are_interleaved():
    class First(LoadBalancer):
        name = "first"

        def choose(self, plane, usable, now):
            return [usable[0].ev] * 2

    prof = profile_with("mrc")
    prof.lb = First(prof.policy.cfg, prof._rng)
    prof.lb.bind(prof)
    prof._usable_by_plane = None
    prof.new_rotation()
    planes = [prof.evs[ev].path.plane for ev in prof._order]
    assert planes == list(range(8)) * 2
    assert all(ev_fields(ev)[1] == 0 for ev in prof._order)  # each plane's lowest spine
