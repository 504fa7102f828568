"""`--slowdown auto`'s calibration on a real fabric: measured, kept, used again, and
nothing left behind."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from mrcemu import rundir
from mrcemu import slowdown as auto
from mrcemu.scenario import calibrate, pace
from mrcemu.topology import load
from tests.integration.conftest import assert_clean, mrcemu

PERFTEST = pytest.mark.skipif(shutil.which("ib_write_lat") is None,
                              reason="perftest is not installed: make install")
LATENCY = ("topology: small\nworkload:\n  kind: exec\n  programs:\n"
           "    - {{host: h3, run: ib_write_lat -s 2 -n {n}}}\n"
           "    - {{host: h0, run: ib_write_lat -s 2 -n {n} h3}}\ntransports: [mrc]\n")


@pytest.fixture
def calibration_file():
    """The machine's kept calibrations: as they were before the test, after it."""
    kept = rundir.CALIBRATION.read_text() if rundir.CALIBRATION.exists() else None
    yield kept
    if kept is None:
        rundir.CALIBRATION.unlink(missing_ok=True)
    else:
        rundir.CALIBRATION.write_text(kept)


def test_calibrate_measures_a_packets_cost_keeps_it_and_tears_its_fabric_down(
        tidy, calibration_file):
    topo = load("small")
    key = calibrate.fingerprint(topo)
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


@PERFTEST
def test_auto_for_real_programs_runs_them_once_and_paces_by_how_late_the_nics_ran(
        tidy, tmp_path, calibration_file):
    from mrcemu.scenario import load as load_scenario
    from mrcemu.scenario import program_pace

    f = tmp_path / "lat.yaml"
    f.write_text(LATENCY.format(n=10))
    r = mrcemu("calibrate", "--scenario", str(f), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "pacing: its 2 programs" in r.stderr
    assert_clean()  # the probe's fabric, and the programs' group, gone
    kept_probes = {k: v for k, v in json.loads(rundir.CALIBRATION.read_text()).items()
                   if k.startswith("programs:")}
    sc = load_scenario(str(f))
    said = []
    pick = pace.choose_for(sc, lambda e, d: said.append(d))
    key = program_pace.key(sc, pick.probe.slowdown)
    probe = auto.Probe.from_json(kept_probes[key])
    # kept: the pick reads it without running anything, and says what it measured
    assert said == [] and pick.probe == probe
    assert pick.slowdown == auto.settle(probe.slowdown, probe.share)
    assert probe.seconds > 0 and probe.share >= 0 and probe.worst
    assert f"its programs, run {probe.seconds:.1f} s at {probe.slowdown:g}" in r.stdout


@PERFTEST
def test_ctrl_c_while_the_programs_are_probed_runs_nothing_and_leaves_nothing(
        tidy, tmp_path, calibration_file):
    import signal
    import subprocess
    import sys
    import time

    f = tmp_path / "lat.yaml"
    f.write_text(LATENCY.format(n=2000))
    if calibration_file is not None:  # no probe kept: this run must measure one
        rundir.CALIBRATION.write_text(json.dumps(
            {k: v for k, v in json.loads(calibration_file).items()
             if not k.startswith("programs:")}))
    p = subprocess.Popen([sys.executable, "-m", "mrcemu", "run", str(f), "--slowdown",
                          "auto", "--out", str(tmp_path / "runs")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = ""
        deadline = time.monotonic() + 300
        while "pacing" not in seen and time.monotonic() < deadline:
            line = p.stdout.readline()
            assert line, seen
            seen += line
        time.sleep(3)  # its fabric coming up, or its programs running
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, seen + out
    assert "interrupted while choosing the slowdown" in out
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert_clean()  # the probe's fabric, its programs and their group gone
