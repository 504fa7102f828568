"""`--slowdown auto`'s calibration on a real fabric: measured, kept, used again, and
nothing left behind."""

from __future__ import annotations

import json
import math

from mrcemu import rundir
from mrcemu import slowdown as auto
from mrcemu.scenario import calibrate
from mrcemu.topology import load
from tests.integration.conftest import assert_clean, mrcemu


def test_calibrate_measures_a_packets_cost_keeps_it_and_tears_its_fabric_down(tidy):
    topo = load("small")
    key = calibrate.fingerprint(topo)
    kept = rundir.CALIBRATION.read_text() if rundir.CALIBRATION.exists() else None
    try:
        r = mrcemu("calibrate", "small", timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        assert_clean()  # its fabric is down again
        cal = auto.Calibration.from_json(json.loads(rundir.CALIBRATION.read_text())[key])
        # every pair's message, whole, in PMTU-sized packets
        size = auto.cal_message_bytes(topo.host_link_mbps, topo.planes, topo.hosts)
        assert cal.packets == topo.hosts * (topo.hosts - 1) * math.ceil(size / 4096)
        assert cal.cpu_us_per_packet > 0 and 0 < cal.busy_share <= 1
        assert cal.slowdown == auto.CAL_SLOWDOWN and cal.topology == key
        assert f"{cal.cpu_us_per_packet:.1f} us of CPU per delivered packet" in r.stdout
        # kept: a run's pick reads it without bringing anything up
        from mrcemu.scenario.job import machine
        assert calibrate.cached(topo, machine()) == cal
        said = []
        pick = calibrate.choose(topo, [[(0, 3, 1)]], lambda e, d: said.append(e))
        assert pick.calibration == cal and said == [] and pick.slowdown in auto.LADDER
    finally:
        if kept is None:
            rundir.CALIBRATION.unlink(missing_ok=True)
        else:
            rundir.CALIBRATION.write_text(kept)
