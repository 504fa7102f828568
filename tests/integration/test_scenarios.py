"""`mrcemu run` end to end: a short version of every built-in scenario on the small
topology, then Ctrl-C in the middle of one. Real namespaces, real captures."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mrcemu.fabric import state
from mrcemu.scenario.model import SCENARIO_DIR, builtin
from mrcemu.scenario.model import load as load_scenario
from tests.integration.conftest import mrcemu

LUA = Path(__file__).resolve().parents[2] / "mrcemu" / "wireshark" / "mrc.lua"
SIZES = {"all-to-all": "128KiB", "single": "4MiB", "incast": "512KiB",
         "ring-allreduce": "512KiB"}


def shrink(name: str, tmp: Path) -> Path:
    """The built-in scenario on the small topology (2 planes, 2 leaves, 2 spines, 4 hosts):
    names mapped into it, sizes and times cut down."""
    data = yaml.safe_load((SCENARIO_DIR / f"{name}.yaml").read_text())

    def remap(text: str) -> str:
        text = re.sub(r"p(\d+)", lambda m: f"p{int(m[1]) % 2}", text)
        text = re.sub(r"([ls])(\d+)", lambda m: f"{m[1]}{int(m[2]) % 2}", text)
        return re.sub(r"h(\d+)", lambda m: f"h{int(m[1]) % 4}", text)

    data["topology"] = "small"
    wl = data["workload"]
    wl["size"] = SIZES[wl["kind"]]
    wl["iterations"] = 4 if wl["kind"] == "all-to-all" else 2
    if name == "gray-link":
        wl["iterations"] = 16  # long enough after the fault for Clustermapper to judge
    for k in ("src", "dst"):
        if k in wl:
            wl[k] = remap(wl[k])
    if "senders" in wl:
        wl["senders"] = [h for h in {remap(h) for h in wl["senders"]} if h != wl["dst"]]
    for f in data.get("faults") or []:
        f["at"] = round(f["at"] * 0.3, 3)
        f["target"] = (str(int(f["target"]) % 2) if str(f["target"]).isdigit()
                       else remap(f["target"]))
        if "duration" in f:
            f["duration"] = 1.0
        if "period" in f:
            f["period"] = 0.3
    data["faults"] = list({json.dumps(f, sort_keys=True): f
                           for f in data.get("faults") or []}.values())
    data["capture"] = {"hosts": [remap(h) for h in data["capture"].get("hosts", ["h0"])],
                       "snaplen": 128, "max_mb": 5}
    data["timeout_s"] = 90
    data["settle_s"] = 0.5
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def run(path: Path, out: Path) -> tuple[dict, Path]:
    r = mrcemu("run", str(path), "--slowdown", "1", "--out", str(out), timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (folder,) = list(out.iterdir())
    assert str(folder) in r.stdout.replace("\n", "")
    return json.loads((folder / "report.json").read_text()), folder


def tshark(pcap: Path, *fields: str, filt: str = "mrc") -> list[str]:
    r = subprocess.run(["tshark", "-r", str(pcap), "-X", f"lua_script:{LUA}", "-Y", filt,
                        "-T", "fields", *sum((["-e", f] for f in fields), [])],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def _events(log: Path) -> list[dict]:
    if not log.exists():
        return []
    lines = log.read_bytes().decode(errors="replace").splitlines()
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line still being written
    return out


# real programs as the workload: test_a_perftest_scenario_... below
PROGRAMS = [n for n in builtin() if yaml.safe_load(
    (SCENARIO_DIR / f"{n}.yaml").read_text())["workload"]["kind"] == "exec"]


@pytest.mark.parametrize("name", [n for n in builtin() if n not in PROGRAMS])
def test_builtin_scenario_short(name, tmp_path, tidy):
    rep, folder = run(shrink(name, tmp_path), tmp_path / "runs")
    for f in ("report.json", "report.md", "goodput.png", "ev-states.png", "capture.pcapng"):
        assert (folder / f).stat().st_size > 0, f
    assert list((folder / "logs").glob("nic-h*.jsonl"))
    assert rep["scenario"] == name and rep["topology"] == "small" and not rep["partial"]
    assert set(rep["transports"]) == {"mrc", "roce"}
    # The scenario's seed went through the manager's snapshot to the transports.
    assert rep["transport_config"]["seed"] == rep["seed"] == yaml.safe_load(
        (SCENARIO_DIR / f"{name}.yaml").read_text())["seed"]
    mrc = rep["transports"]["mrc"]
    for t in rep["transports"].values():
        for k in ("job_completion_s", "iteration_s_p50", "iteration_s_p99", "goodput_mbps",
                  "retransmits", "trims", "nacks", "rtos", "integrity_ok", "faults"):
            assert k in t
        for f in t["faults"]:
            assert f["error"] is None and f["at_s"] is not None
            assert {"at_s", "last_packet_on_failed_path_s", "recovered_90pct_s"} <= set(f)
        # What the fabric did: every switch port counted over the run, drops by reason.
        fab = t["fabric"]
        assert set(fab["dropped"]) == {"buffer", "qdisc", "link", "fault", "path_loss"}
        assert sum(p.get("packets", 0) for p in fab["ports"].values()) > 0
        assert fab["false_retirements"] == len(fab["false_retirement_list"])
    # MRC delivers every message intact, through whatever the scenario breaks.
    assert mrc["integrity_ok"] and mrc["messages_ok"] == mrc["messages"] > 0
    assert mrc["job_completion_s"] > 0 and mrc["goodput_mbps"] > 0
    # The capture holds both transports' traffic, decoded by the Lua dissector (one pass
    # over it: each tshark start loads the dissector, about a second).
    mrc_frames = [row.split("\t") for row in tshark(
        folder / "capture.pcapng", "mrc.opcode", "ipv6.nxt", "frame.time_epoch")]
    assert len(mrc_frames) > 100
    # MRC as IPv6-in-IPv6 (outer header, inner header, MRC), and nothing malformed.
    assert {nxt for _op, nxt, _t in mrc_frames} == {"41,17"}
    assert tshark(folder / "capture.pcapng", "frame.number", filt="_ws.malformed") == []
    report_md = (folder / "report.md").read_text()
    assert "| job completion |" in report_md
    # Path health, told by the order of events (how soon is `make bench`'s): no trim
    # ever retires an EV, and an EV a loss retired names the lost packet, sent before.
    changes = mrc["ev_states"]["changes"]
    assert not [c for c in changes if c[5] == "ASSUMED_BAD" and "trim" in c[6]]
    if mrc["fidelity"]["ok"] and name != "loss-1pct":
        # A faithful run loses nothing the network did not: no EV is retired before the
        # first fault (its host lost and delayed nothing itself).
        first = min((f["at_s"] for f in mrc["faults"]), default=float("inf"))
        assert not [c for c in changes if c[5] == "ASSUMED_BAD" and c[0] < first]
    if name in ("failover", "gray-link"):
        for f in mrc["faults"]:
            # Every failed path MRC used after the fault was stopped, then retired on
            # proof of a loss on it, and no data (new or resent) went onto it once
            # stopped: only probes.
            # What to read when this fails: the fault's drops, and each path's story.
            seen = (f"{f['kind']} {f['target']} at {f['at_s']}: fault drops "
                    f"{mrc['fabric']['dropped']}, faithful {mrc['fidelity']['ok']}, "
                    f"end {mrc['job_completion_s']}; paths {f['failed_paths'][:6]}")
            assert f["paths_used_after_fault"] > 0, seen
            assert f["paths_detected"] == f["paths_used_after_fault"], seen
            assert f["data_packets_after_retire"] == 0, f
            for p in f["failed_paths"]:
                assert p["first_loss_s"] is not None and p["first_loss_s"] <= p["bad_s"], p
                assert p["stop_s"] is not None and p["stop_s"] <= p["bad_s"], p
                assert p["data_while_stopped"] in (0, None), p
        # A path is retired on proof: stopped first (its probes decided), or a later
        # packet on it arrived (per-EV order). (src, dst, EV) names a connection's EV.
        retired = {tuple(c[1:4]) for c in changes if c[5] == "ASSUMED_BAD"}
        stopped = {tuple(c[1:4]) for c in changes if c[5] == "STOPPED"}
        holes = {tuple(c[1:4]) for c in changes if c[6] == "lost: SACK hole"}
        assert retired and retired <= stopped | holes
        assert {c[6] for c in changes if c[5] == "ASSUMED_BAD"} <= {
            "lost: probe unanswered", "lost: probe proved", "lost: SACK hole",
            "plane back: probe first"}
    if name == "failover":
        # Probes on the broken paths, after the first fault.
        probes = [t for op, _nxt, t in mrc_frames if int(op, 0) == 222]
        assert probes
        # (How many new packets a dead path got before it was judged depends on CPU load:
        # `make bench`, section failover, reports it against the window.)
    if name == "plane-down":
        # h0 lost its plane-0 port: after the port-status update nothing more is
        # received on plane 0, while plane 1 keeps delivering.
        # Told by the order of events, not by how long the NICs took: plane 0 delivered
        # before the fault, then stopped for good while plane 1 went on delivering.
        f = mrc["faults"][0]
        s = mrc["goodput_series"]
        p0, p1 = s["per_plane_mbps"][0], s["per_plane_mbps"][1]
        assert f["last_packet_on_failed_path_s"] is not None
        assert sum(x for t, x in zip(s["t"], p0, strict=True) if t < f["at_s"]) > 0
        last_p0 = max(i for i, x in enumerate(p0) if x > 0)
        assert sum(p1[last_p0 + 1:]) > 0
    if name == "gray-link":
        # Clustermapper, probing through the run, names the gray link and only it.
        for t in rep["transports"].values():
            f = t["faults"][0]
            # (How soon depends on the CPU the prober gets: the report and `make bench`.)
            assert f["map_bad"] == [f["target"]] and f["map_bad_after_s"] > 0, f
            assert f["map_also"] == [], f
        assert "fault 1: mapped bad" in report_md
    if name == "incast":
        assert mrc["trims"] == mrc["nacks"] > 0  # trimmed, NACKed, retransmitted
    if name == "loss-1pct":
        assert mrc["retransmits"] > 0


def test_ctrl_c_leaves_a_partial_report_a_valid_capture_and_nothing_running(tmp_path, tidy):
    scen = shrink("failover", tmp_path)
    data = yaml.safe_load(scen.read_text())
    data["workload"]["iterations"] = 200  # far longer than we wait
    scen.write_text(yaml.safe_dump(data))
    out = tmp_path / "runs"
    log = state.RUN_DIR / "logs" / "nic-h0.jsonl"
    # the run's fabric starts its logs anew (rundir.rotate_logs): read only the new one
    before = log.stat().st_ino if log.exists() else None
    p = subprocess.Popen([sys.executable, "-m", "mrcemu", "run", str(scen), "--slowdown", "1",
                          "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Interrupt once h0 has posted its writes of the second MRC iteration: iterations end
    # at a barrier, so the first is then complete, however slowly the machine ran it.
    sc = load_scenario(scen)
    per_iteration = sum(1 for ph in sc.workload.phases(sc.topology.hosts)
                        for src, _dst, _n in ph if src == 0)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and p.poll() is None:
        fresh = log.exists() and log.stat().st_ino != before
        posts = [e for e in (_events(log) if fresh else []) if e["event"] == "post"
                 and e["transport"] == "mrc"]
        if len(posts) > per_iteration:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the MRC run never reached its second iteration")
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    (folder,) = list(out.iterdir())
    rep = json.loads((folder / "report.json").read_text())
    assert rep["partial"] and rep["transports"]["mrc"]["interrupted"]
    assert rep["transports"]["mrc"]["iterations_done"] > 0
    ops = tshark(folder / "capture.pcapng", "mrc.opcode")
    assert ops
    r = subprocess.run(["capinfos", str(folder / "capture.pcapng")], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "h0-p0" in r.stdout + subprocess.run(
        ["tshark", "-r", str(folder / "capture.pcapng"), "-T", "fields", "-e",
         "frame.interface_name", "-c", "50"], capture_output=True, text=True).stdout


def test_a_path_loss_with_clustermapper_on_still_writes_its_report(tmp_path, tidy):
    # Found tried as a new user would: a single write with a path's loss, Clustermapper
    # on (as by default with faults), died writing its report, as a path's loss breaks no
    # link for the map to name. The raw record is written first, the report beside it.
    sc = {"description": "a single write with a path's 20 % loss", "topology": "small",
          "workload": {"kind": "single", "src": "h1", "dst": "h2", "size": "4MiB",
                       "iterations": 2},
          "faults": [{"at": 0.3, "kind": "path-loss", "target": "h1-h2/p0s1", "value": 20}],
          "transports": ["mrc"], "seed": 3, "timeout_s": 90,
          "capture": {"hosts": ["h1"], "snaplen": 128, "max_mb": 5}}
    p = tmp_path / "path-loss.yaml"
    p.write_text(yaml.safe_dump(sc))
    rep, folder = run(p, tmp_path / "runs")
    mrc = rep["transports"]["mrc"]
    assert mrc["integrity_ok"] and not rep["partial"]
    (f,) = mrc["faults"]
    assert "not_computed" not in f, f
    assert f["map_bad"] == [] and f["map_bad_after_s"] is None  # no link to name
    assert "fault 1: mapped bad" in (folder / "report.md").read_text()
    raw = json.loads(gzip.decompress((folder / "logs" / "raw-mrc.json.gz").read_bytes()))
    assert raw["faults"][0]["kind"] == "path-loss" and raw["map"]["samples"]


def test_the_scenario_pages_example_runs(tmp_path, tidy):
    """docs/examples/scenario.yaml, the annotated example of "Write a scenario", runs as
    written (at full speed: this checks that it runs and what it writes, not its figures)."""
    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "scenario.yaml"
    rep, folder = run(example, tmp_path / "runs")
    assert set(rep["transports"]) == {"mrc", "roce"} and not rep["partial"]
    for t in rep["transports"].values():
        assert t["integrity_ok"] and t["messages_ok"] == t["messages"] > 0
        assert [f["kind"] for f in t["faults"]] == ["gray", "degrade"]
        assert all(f["error"] is None for f in t["faults"])
    assert (folder / "capture.pcapng").stat().st_size > 0
    assert "dropped in the fabric" in (folder / "report.md").read_text()


@pytest.mark.skipif(shutil.which("ib_write_bw") is None,
                    reason="perftest is not installed: make install")
def test_a_perftest_scenario_runs_the_programs_through_its_fault_and_reports_them(
        tmp_path, tidy):
    """perftest-failover, shrunk: ib_write_bw over MRC, a spine down mid-transfer."""
    assert PROGRAMS == ["perftest-failover"]
    data = yaml.safe_load((SCENARIO_DIR / "perftest-failover.yaml").read_text())
    size, iters = 65536, 300
    data.update(topology="small", transports=["mrc"], timeout_s=120,
                faults=[{"at": 0.4, "kind": "switch-down", "target": "p1s1"}],
                capture={"hosts": ["h0"], "snaplen": 128, "max_mb": 5})
    data["workload"]["programs"] = [
        {"host": "h3", "run": f"ib_write_bw -s {size} -n {iters}"},
        {"host": "h0", "run": f"ib_write_bw -s {size} -n {iters} h3"}]
    path = tmp_path / "perftest.yaml"
    path.write_text(yaml.safe_dump(data))
    rep, folder = run(path, tmp_path / "runs")
    mrc = rep["transports"]["mrc"]
    assert mrc["completed"] and mrc["integrity_ok"] is None  # the programs check their own
    server, client = mrc["programs"]
    # the server started first; both ended by themselves, with perftest's own figures
    assert (server["host"], client["host"]) == ("h3", "h0")
    assert server["started_at_s"] < client["started_at_s"]
    for p in (server, client):
        assert p["exit"] == 0 and p["ended_by"] is None, p["output"]
        assert (p["perftest"]["size"], p["perftest"]["iterations"]) == (size, iters)
        assert p["perftest"]["average_mbps"] > 0
    # the fault landed on the program's traffic: its connection used the dead spine's path
    # after the fault, and retired it
    (f,) = mrc["faults"]
    assert f["error"] is None and f["paths_used_after_fault"] >= 1
    assert f["paths_detected"] == f["paths_used_after_fault"]
    md = (folder / "report.md").read_text()
    assert "## MRC: `h0$ ib_write_bw -s 65536 -n 300 h3`" in md and "BW average" in md
