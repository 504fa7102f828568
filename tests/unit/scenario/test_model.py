"""Scenario files: built-ins load; every mistake names the file, the field and a fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mrcemu.errors import ConfigError
from mrcemu.scenario import load
from mrcemu.scenario.model import builtin

BASE = {"topology": "small", "workload": {"kind": "all-to-all", "size": "64KiB",
                                          "iterations": 2}}


def write(tmp_path: Path, data: object, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def test_every_builtin_loads_and_failover_is_as_specified():
    assert set(builtin()) >= {"failover", "gray-link", "plane-down", "flap", "incast",
                              "loss-1pct"}
    for name in builtin():
        sc = load(name)
        assert sc.transports == ("mrc", "roce") and sc.capture.interfaces
    fo = load("failover")
    assert fo.topology.name == "default" and fo.workload.kind == "all-to-all"
    assert [(f.at, f.kind, f.target) for f in fo.faults] == [
        (0.4, "switch-down", "p3s1"), (0.6, "gray", "p5l0-p5s2")]
    assert fo.workload.iterations == 10
    assert fo.map_interval_ms == 100  # a run with faults is mapped unless told not to


def test_workload_phases():
    sc = load("failover")
    (phase,) = sc.workload.phases(8)
    assert len(phase) == 56 and {(a, b) for a, b, _ in phase} == {
        (a, b) for a in range(8) for b in range(8) if a != b}
    from mrcemu.scenario.model import Workload

    w = Workload("ring-allreduce", 8000, 1)
    phases = w.phases(4)
    assert len(phases) == 6 and all(p == [(0, 1, 2000), (1, 2, 2000), (2, 3, 2000),
                                         (3, 0, 2000)] for p in phases)
    assert Workload("incast", 10, 1, dst=3, senders=(0, 1)).phases(4) == [[(0, 3, 10),
                                                                          (1, 3, 10)]]


@pytest.mark.parametrize("patch, field, words", [
    ({"wokload": 1}, "wokload", "did you mean 'workload'"),
    ({"topology": "nonesuch"}, "topology", "cannot be loaded"),
    ({"workload": {"kind": "alltoall", "size": "1MiB"}}, "workload.kind", "all-to-all"),
    ({"workload": {"kind": "single", "size": "lots"}}, "workload.size", "512KiB"),
    ({"workload": {"kind": "single", "size": "1MiB", "src": "h9"}}, "workload.src", "h0..h3"),
    ({"workload": {"kind": "incast", "size": "1MiB", "dst": "h1", "senders": ["h1"]}},
     "workload.senders", "remove it"),
    ({"faults": [{"at": 1, "kind": "switch-down", "target": "p3s1"}]}, "faults[0].target",
     "no switch 'p3s1'"),
    ({"faults": [{"at": 1, "kind": "gray", "target": "p0l0-p0s9"}]}, "faults[0].target",
     "links are named"),
    ({"faults": [{"at": 1, "kind": "swich-down", "target": "p1s1"}]}, "faults[0].kind",
     "did you mean 'switch-down'"),
    ({"faults": [{"at": -1, "kind": "link-down", "target": "p0l0-p0s0"}]}, "faults[0].at",
     "seconds"),
    ({"faults": [{"at": 1, "kind": "loss", "target": "p0l0-p0s0"}]}, "faults[0].value",
     "value: 1"),
    ({"faults": [{"at": 1, "kind": "flap", "target": "p0l0-p0s0"}]}, "faults[0].period",
     "period"),
    # Live injection refuses a degrade to 0 %: so must the file, before anything starts.
    ({"faults": [{"at": 1, "kind": "degrade", "target": "p0l0-p0s0", "value": 0}]},
     "faults[0].value", "0 < x <= 100"),
    ({"faults": [{"at": 1, "kind": "link-down", "target": "p0l0-p0s0", "when": 2}]},
     "faults[0].when", "known fields"),
    ({"transports": ["mrc", "tcp"]}, "transports", "[mrc, roce]"),
    ({"capture": {"interfaces": ["h0-p9"]}}, "capture.interfaces[0]", "did you mean"),
    ({"capture": {"snaplen": 10}}, "capture.snaplen", "bytes kept"),
    ({"seed": "one"}, "seed", "seed: 1"),
    ({"map_interval_ms": 2}, "map_interval_ms", "0 (off) or at least 10"),
    ({"map_interval_ms": -1}, "map_interval_ms", "0 for none"),
    ({"workload": {"kind": "stream", "size": "1MiB", "pairs": ["h0-h3"]}},
     "workload.duration", "duration: 3"),
    ({"workload": {"kind": "stream", "size": "1MiB", "duration": 1, "pairs": ["h0h3"]}},
     "workload.pairs[0]", "h0-h7"),
    ({"workload": {"kind": "stream", "size": "1MiB", "duration": 1, "pairs": ["h0-h0"]}},
     "workload.pairs[0]", "two hosts"),
    ({"workload": {"kind": "stream", "size": "1MiB", "duration": 1,
                   "pairs": ["h0-h3", "h3-h0"], "both_ways": True}}, "workload.pairs", "once"),
    ({"workload": {"kind": "stream", "size": "1MiB", "duration": 1, "iterations": 3}},
     "workload.iterations", "its duration"),
    ({"workload": {"kind": "single", "size": "1MiB", "duration": 1}}, "workload.duration",
     "kind: stream"),
    ({"faults": [{"at": 1, "kind": "host-port-down", "targets": ["h0-p0", "h0-p9"]}]},
     "faults[0].targets[1]", "no host port 'h0-p9'"),
    ({"faults": [{"at": 1, "kind": "link-down", "target": "p0l0-p0s0", "every": 1}]},
     "faults[0].every", "needs targets"),
    ({"faults": [{"at": 1, "kind": "link-down", "target": "p0l0-p0s0",
                  "targets": ["p0l0-p0s1"]}]}, "faults[0].targets", "given with target"),
    ({"faults": [{"at": 1, "kind": "link-down", "targets": []}]}, "faults[0].targets",
     "list of targets"),
    ({"faults": [{"at": 1, "kind": "link-down", "targets": ["p0l0-p0s0", "p0l0-p0s0"]}]},
     "faults[0].targets", "twice"),
    ({"faults": [{"at": 1, "kind": "link-down"}]}, "faults[0].target", "is required"),
    ({"transport": {"ev_set_per_plan": 2}}, "transport.ev_set_per_plan",
     "did you mean 'ev_set_per_plane'"),
    ({"transport": {"min_rto": 1}}, "transport.min_rto", "settable: ev_set_per_plane"),
    ({"transport": {"ev_set_per_plane": -2}}, "transport.ev_set_per_plane", ">= 0"),
    ({"transport": {"probes_to_restore": 0}}, "transport", "probes_to_restore must be"),
    ({"transport": {"stop_deviations": "1"}}, "transport.stop_deviations", "a number"),
    ({"transport": {"stop_deviations": 7}}, "transport", "must not exceed overdue_deviations"),
    ({"transport": {"overdue_deviations": 17}}, "transport", "from 0 to 16"),
    ({"transport": [2]}, "transport", "{ev_set_per_plane: 2}"),
    ({"transport": {"ev_planes": [2]}}, "transport.ev_planes", "planes of small (0-1)"),
    ({"transport": {"ev_planes": 1}}, "transport.ev_planes", "e.g. ev_planes: [2]"),
    ({"transport": {"ev_planes": [1, 1]}}, "transport.ev_planes", "distinct"),
    ({"transport": {"plane_share": "even"}}, "transport.plane_share",
     "must be one of capacity, paths, full"),
    ({"workload": {"kind": "stream", "size": "1MiB", "duration": 1, "pairs": ["h0-h3"],
                   "pair_transport": {"h1-h2": {"ev_set_per_plane": 1}}}},
     "workload.pair_transport.h1-h2", "one of workload.pairs"),
    ({"workload": {"kind": "stream", "size": "1MiB", "duration": 1, "pairs": ["h0-h3"],
                   "pair_transport": {"h0-h3": {"min_rto": 1}}}},
     "workload.pair_transport.h0-h3.min_rto", "settable"),
    ({"workload": {"kind": "stream", "size": "1MiB", "duration": 1, "pairs": ["h0-h3"],
                   "pair_transport": ["h0-h3"]}}, "workload.pair_transport", "a mapping"),
    ({"workload": {"kind": "single", "size": "1MiB",
                   "pair_transport": {"h0-h3": {"ev_set_per_plane": 1}}}},
     "workload.pair_transport", "kind: stream"),
    ({"faults": [{"at": 1, "kind": "path-loss", "target": "h0-h1/p0s0", "value": 20}]},
     "faults[0].target", "share a leaf"),
    ({"workload": {"kind": "all-to-all", "size": []}}, "workload.size", "empty sweep"),
    ({"workload": {"kind": "all-to-all", "size": ["1MiB", "big"]}}, "workload.size[1]",
     "not a size"),
    ({"workload": {"kind": "stream", "size": ["1MiB"], "duration": 1}}, "workload.size",
     "sweep of an iterated workload"),
    ({"workload": {"kind": "all-to-all", "size": "1MiB", "qps": 17}}, "workload.qps",
     "1..16 RoCE QPs"),
    ({"workload": {"kind": "exec"}}, "workload.programs", "required for exec"),
    ({"workload": {"kind": "exec", "programs": []}}, "workload.programs", "non-empty list"),
    ({"workload": {"kind": "exec", "size": "1MiB", "programs": [{"host": "h0", "run": "true"}]}},
     "workload.size", "does not apply to exec"),
    ({"workload": {"kind": "exec", "programs": [{"host": "h9", "run": "true"}]}},
     "workload.programs[0].host", "h0..h3"),
    ({"workload": {"kind": "exec", "programs": [{"host": "h0"}]}},
     "workload.programs[0].run", "is required"),
    ({"workload": {"kind": "exec", "programs": [{"host": "h0", "run": "'true"}]}},
     "workload.programs[0].run", "close the quote"),
    ({"workload": {"kind": "exec", "programs": [{"host": "h0", "run": "no-such-program-x"}]}},
     "workload.programs[0].run", "not a program found on PATH"),
    ({"workload": {"kind": "exec", "programs": [{"host": "h0", "run": "true", "wait": 1}]}},
     "workload.programs[0].wait", "known fields are host, run, ready"),
    ({"workload": {"kind": "exec", "programs": [{"host": "h0", "run": "true", "ready": 1}]}},
     "workload.programs[0].ready", "use listen"),
    ({"workload": {"kind": "single", "size": "1MiB", "programs": []}}, "workload.programs",
     "kind: exec"),
    ({"usid_engine": "seg6"}, "usid_engine", "one of auto, kernel, bpf"),
    ({"workload": {"kind": "all-to-all", "size": "1MiB", "steps": 3}}, "workload.steps",
     "kind: permutation"),
    ({"workload": {"kind": "permutation", "steps": 0}}, "workload.steps", "e.g. 20"),
    ({"workload": {"kind": "all-to-all", "size": "1MiB", "repeat": 2}}, "workload.repeat",
     "kind: permutation"),
    # BASE: an all-to-all of 2 iterations, a step each
    ({"faults": [{"at": 0, "step": 2, "kind": "link-down", "target": "p0l0-p0s0"}]},
     "faults[0].step", "of the workload's 2"),
    ({"faults": [{"at": 0, "step": 0.5, "kind": "link-down", "target": "p0l0-p0s0"}]},
     "faults[0].step", "whole number"),
    ({"workload": {"kind": "stream", "size": "1MiB", "duration": 1},
      "faults": [{"at": 0, "step": 0, "kind": "link-down", "target": "p0l0-p0s0"}]},
     "faults[0].step", "needs a workload of steps"),
    ({"topology": "default", "workload": {"kind": "single"}}, "workload.size", "required"),
])
def test_bad_scenarios_name_file_field_and_fix(tmp_path, patch, field, words):
    p = write(tmp_path, {**BASE, **patch})
    with pytest.raises(ConfigError) as e:
        load(p)
    assert e.value.source == str(p) and e.value.field == field, str(e.value)
    assert words in str(e.value)


def test_a_stream_names_its_pairs_and_runs_slowed_for_longer(tmp_path):
    sc = load(write(tmp_path, {**BASE, "workload": {
        "kind": "stream", "size": "256KiB", "pairs": ["h0-h3", "h1-h2"], "both_ways": True,
        "duration": 2}}))
    w = sc.workload
    assert w.pairs == ((0, 3), (1, 2), (3, 0), (2, 1)) and w.depth == 4
    assert w.duration == 2.0 and sc.slowed(4).workload.duration == 8.0


def test_a_sequence_of_faults_is_one_entry_each_target_in_turn(tmp_path):
    """paper experiment E1: a host's ports go down one every 2 s and each comes back 8 s after
    it went, so the goodput steps down four times and up four times."""
    sc = load(write(tmp_path, {**BASE, "faults": [
        {"at": 1, "kind": "host-port-down", "targets": ["h0-p0", "h0-p1"], "every": 2,
         "duration": 8},
        {"at": 3, "kind": "flap", "targets": ["p0l0-p0s0", "p1l0-p1s1"], "period": 0.5,
         "duty": 0.5}]}))
    assert [(f.at, f.kind, f.target, f.duration) for f in sc.faults] == [
        (1.0, "host-port-down", "h0-p0", 8.0), (3.0, "host-port-down", "h0-p1", 8.0),
        (3.0, "flap", "p0l0-p0s0", None), (3.0, "flap", "p1l0-p1s1", None)]
    assert [f.at for f in sc.slowed(2).faults] == [2.0, 6.0, 6.0, 6.0]


def test_a_scenario_changes_transport_settings_and_nothing_else(tmp_path):
    sc = load(write(tmp_path, {**BASE, "transport": {"ev_set_per_plane": 2}}))
    assert sc.transport == {"ev_set_per_plane": 2}
    assert load(write(tmp_path, BASE, "t.yaml")).transport == {}


def test_a_stream_pins_one_pair_and_leaves_the_others_to_the_scenarios_settings(tmp_path):
    sc = load(write(tmp_path, {**BASE, "transport": {"ev_set_per_plane": 2}, "workload": {
        "kind": "stream", "size": "256KiB", "pairs": ["h0-h3", "h1-h2"], "duration": 2,
        "pair_transport": {"h1-h2": {"ev_planes": [1], "ev_set_per_plane": 1}}}}))
    assert sc.workload.pair_transport == {(1, 2): {"ev_planes": [1], "ev_set_per_plane": 1}}
    assert sc.transport == {"ev_set_per_plane": 2}
    assert sc.slowed(3).workload.pair_transport == sc.workload.pair_transport


def test_a_scenario_names_a_load_balancing_policy_or_lists_several_to_run_in_turn(tmp_path):
    one = load(write(tmp_path, {**BASE, "transport": {"load_balancing": "reps"}}))
    assert one.transport == {"load_balancing": "reps"}
    assert one.runs() == [("mrc", "mrc", None), ("roce", "roce", None)]
    many = load(write(tmp_path, {**BASE, "transports": ["mrc", "roce"],
                                 "transport": {"load_balancing": ["mrc", "oblivious"]}},
                      "m.yaml"))
    assert many.runs() == [("mrc-mrc", "mrc", "mrc"), ("mrc-oblivious", "mrc", "oblivious"),
                           ("roce", "roce", None)]
    assert many.slowed(2).runs() == many.runs()


@pytest.mark.parametrize(("transport", "field"), [
    ({"load_balancing": "ecmp"}, "transport.load_balancing"),
    ({"load_balancing": ["reps", "reps"]}, "transport.load_balancing"),
    ({"load_balancing": []}, "transport.load_balancing"),
])
def test_a_bad_load_balancing_policy_names_the_field_and_the_policies(tmp_path, transport,
                                                                       field):
    with pytest.raises(ConfigError) as e:
        load(write(tmp_path, {**BASE, "transport": transport}))
    assert e.value.field == field and "mrc, oblivious, reps, reps_ack, bitmap" in e.value.fix


def test_a_pair_takes_one_policy_not_a_list(tmp_path):
    wl = {"kind": "stream", "size": "256KiB", "pairs": ["h0-h3"], "duration": 2}
    ok = load(write(tmp_path, {**BASE, "workload": {
        **wl, "pair_transport": {"h0-h3": {"load_balancing": "bitmap"}}}}))
    assert ok.workload.pair_transport == {(0, 3): {"load_balancing": "bitmap"}}
    with pytest.raises(ConfigError) as e:
        load(write(tmp_path, {**BASE, "workload": {
            **wl, "pair_transport": {"h0-h3": {"load_balancing": ["mrc", "reps"]}}}}, "p.yaml"))
    assert e.value.field == "workload.pair_transport.h0-h3.load_balancing"


def test_yaml_syntax_error_names_the_line(tmp_path):
    p = write(tmp_path, "topology: small\nworkload: [\n")
    with pytest.raises(ConfigError) as e:
        load(p)
    assert e.value.field == "<yaml>" and "line" in str(e.value.value)


def test_missing_file_lists_the_builtins():
    with pytest.raises(ConfigError) as e:
        load("no-such-scenario")
    assert "failover" in e.value.fix


def test_cli_rejects_a_bad_file_before_anything_starts(tmp_path):
    p = write(tmp_path, {**BASE, "faults": [{"at": 1, "kind": "gray", "target": "nowhere"}]})
    r = subprocess.run([sys.executable, "-m", "mrcemu", "run", str(p), "--out",
                        str(tmp_path / "runs")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert str(p) in r.stderr and "faults[0].target" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "runs").exists()


def test_a_slowed_scenario_is_the_same_experiment_on_a_slower_clock():
    sc = load("failover")
    slow = sc.slowed(20)
    assert slow.slowdown == 20 and sc.slowdown == 1.0
    t, st = sc.topology, slow.topology
    assert (st.host_link_mbps, st.fabric_link_mbps) == (t.host_link_mbps / 20,
                                                       t.fabric_link_mbps / 20)
    assert [f.at for f in slow.faults] == [f.at * 20 for f in sc.faults]
    assert [(f.kind, f.target) for f in slow.faults] == [(f.kind, f.target) for f in sc.faults]
    assert (slow.timeout_s, slow.settle_s, slow.map_interval_ms) == (
        sc.timeout_s * 20, sc.settle_s * 20, sc.map_interval_ms * 20)
    # What is sent, and where, does not change.
    assert (slow.workload, slow.transports, slow.seed, st.hosts, st.buffer_bytes) == (
        sc.workload, sc.transports, sc.seed, t.hosts, t.buffer_bytes)


def test_slowing_scales_a_flaps_period_and_a_faults_duration():
    sc = load("flap").slowed(4)
    (f,) = [f for f in load("flap").faults if f.period]
    (g,) = [g for g in sc.faults if g.period]
    assert (g.period, g.duty, g.at) == (f.period * 4, f.duty, f.at * 4)
    assert g.duration == (None if f.duration is None else f.duration * 4)


def test_run_refuses_a_slowdown_below_one():
    from click.testing import CliRunner

    from mrcemu import cli
    r = CliRunner().invoke(cli.main, ["run", "failover", "--slowdown", "0.5"])
    assert r.exit_code == 2 and "--slowdown" in r.output


def test_a_size_list_is_a_sweep_and_qps_are_roce_qps(tmp_path):
    p = write(tmp_path, {**BASE, "workload": {"kind": "ring-allreduce", "iterations": 2,
                                              "size": ["64KiB", "1MiB"], "qps": 4}})
    wl = load(p).workload
    assert wl.sizes == (65536, 1 << 20) and wl.size == 65536 and wl.qps == 4
    one = load(write(tmp_path, {**BASE, "workload": {"kind": "all-to-all", "size": "1MiB"}},
                     "one.yaml")).workload
    assert one.sizes == (1 << 20,) and one.qps == 1


def test_an_exec_workload_starts_its_programs_in_order_the_last_one_at_once(tmp_path):
    p = write(tmp_path, {**BASE, "workload": {"kind": "exec", "programs": [
        {"host": "h3", "run": "sh -c 'exit 0'"}, {"host": "h1", "run": ["true", "a b"],
                                                 "ready": "start"},
        {"host": "h0", "run": "true h3"}]}})
    wl = load(p).workload
    assert [(x.host, x.argv, x.ready) for x in wl.programs] == [
        (3, ("sh", "-c", "exit 0"), "listen"), (1, ("true", "a b"), "start"),
        (0, ("true", "h3"), "start")]
    assert wl.programs[1].command == "true 'a b'"
    # the pace `auto` picks assumes every later program writes to the first at line rate
    assert wl.phases(4) == [[(1, 3, 0), (0, 3, 0)]]


def test_the_annotated_example_of_the_scenario_page_loads_and_shows_every_section():
    import yaml

    from mrcemu.scenario import model
    from mrcemu.scenario.model import load

    path = Path(__file__).resolve().parents[3] / "docs" / "examples" / "scenario.yaml"
    sc = load(path)
    assert sc.workload.kind == "stream" and len(sc.faults) == 2
    # every top-level key a scenario may hold is in it, so the example shows them all
    assert set(yaml.safe_load(path.read_text())) == set(model.SECTIONS[""])


def test_every_key_the_parser_accepts_is_documented_and_every_kind_too():
    from mrcemu.scenario import model
    from mrcemu.topology import faults
    from mrcemu.transport.config import TransportConfig

    assert all(doc.strip() for keys in model.SECTIONS.values() for doc in keys.values())
    assert set(faults.KIND_DOCS) == set(faults.KINDS)
    assert set(model.TRANSPORT_SETTINGS) <= set(TransportConfig().to_json())


def test_a_scenario_may_choose_the_usid_engine_its_topology_is_run_with(tmp_path):
    assert load(write(tmp_path, BASE)).topology.usid_engine == "auto"
    sc = load(write(tmp_path, {**BASE, "usid_engine": "bpf"}))
    assert sc.topology.usid_engine == "bpf" and sc.topology.name == "small"


def test_a_synchronous_job_draws_its_steps_from_the_seed_bandwidth_bound_by_default(tmp_path):
    from mrcemu.scenario.model import BDPS_A_STEP, flow_bdp_bytes

    p = write(tmp_path, {"topology": "rack4", "seed": 3,
                         "workload": {"kind": "permutation", "steps": 5}})
    sc = load(p)
    steps = sc.workload.phases(16)
    assert len(steps) == 5 and sc.workload.draw_seed == 3
    leaf = sc.topology.leaf_of
    assert all(leaf(a) != leaf(b) for st in steps for a, b, _n in st)
    assert sc.workload.size >= BDPS_A_STEP * flow_bdp_bytes(sc.topology)
    # slowed, the same steps (a BDP in bytes is the same at any pace)
    assert sc.slowed(4).workload.phases(16) == steps
    other = load(write(tmp_path, {"topology": "rack4", "seed": 4,
                                  "workload": {"kind": "permutation", "steps": 5}}, "o.yaml"))
    assert other.workload.phases(16) != steps
    shifted = load(write(tmp_path, {"topology": "default",
                                    "workload": {"kind": "all-to-all-steps"}}, "a.yaml"))
    assert len(shifted.workload.phases(8)) == 7


def test_a_permutation_repeated_runs_each_draw_as_twins_and_a_fault_may_name_a_step(tmp_path):
    once = load(write(tmp_path, {"topology": "rack4", "workload": {"kind": "permutation",
                                                                   "steps": 3}}))
    twice = load(write(tmp_path, {"topology": "rack4", "workload": {
        "kind": "permutation", "steps": 3, "repeat": 2}, "faults": [
        {"step": 5, "at": 0.1, "kind": "gray", "target": "p0l0-p0s0"}]}, "t.yaml"))
    a, b = once.workload.phases(16), twice.workload.phases(16)
    assert b == [a[0], a[0], a[1], a[1], a[2], a[2]]
    (f,) = twice.faults
    assert (f.step, f.at, f.duration) == (5, 0.1, None)
    # slowed, its moment inside the step is slowed too; the step it names is the same
    assert (twice.slowed(4).faults[0].at, twice.slowed(4).faults[0].step) == (0.4, 5)


def test_a_permutation_on_one_leaf_is_refused_naming_the_fix(tmp_path):
    topo = write(tmp_path, {"planes": 2, "leaves_per_plane": 1, "spines_per_plane": 2,
                            "hosts": 4}, "oneleaf.yaml")
    p = write(tmp_path, {"topology": str(topo), "workload": {"kind": "permutation"}})
    with pytest.raises(ConfigError) as e:
        load(p)
    assert e.value.field == "workload.kind" and "two leaves or more" in str(e.value)
