"""`mrcemu paper`'s experiments and rules, on synthetic reports: no fabric, no clock."""

from __future__ import annotations

import json

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.paper import experiments as ex
from mrcemu.paper import rules
from mrcemu.paper.run import markdown, select
from mrcemu.scenario.model import from_mapping


def series(level_at, until: float, bin_s: float = 0.05) -> dict:
    """A goodput series whose total is level_at(t) Mb/s (t: the bin's start)."""
    ts = [round(i * bin_s, 6) for i in range(int(until / bin_s))]
    return {"bin_s": bin_s, "t": ts, "total_mbps": [level_at(t) for t in ts],
            "per_plane_mbps": {}}


def report(level_at, until: float, slowdown: float = 1.0, faults: list | None = None) -> dict:
    """A run's report: its figures at full speed whatever its `slowdown`, as every
    report gives them (scenario/fullspeed.py)."""
    return {"slowdown": slowdown, "transports": {"mrc": {
        "goodput_series": series(level_at, until, 0.05 / slowdown), "faults": faults or []}}}


@pytest.mark.parametrize("quick", [True, False])
def test_every_runnable_experiment_is_a_valid_scenario(quick):
    runnable = [e for e in ex.EXPERIMENTS if e.scenario is not None]
    assert [e.id for e in runnable] == ["E1", "E2", "E3", "E4", "E5", "E6", "E7", "E8",
                                        "E11"]
    for e in runnable:
        sc = from_mapping(e.scenario(quick), f"<paper {e.id}>", e.id)
        assert sc.workload.kind == "stream" and sc.transports == ("mrc",)
    e11 = from_mapping(ex.e11_scenario(quick), "<e11>", "E11")
    assert e11.topology.name == "rack4" and len(e11.workload.pairs) == 8
    # the incast's senders are all in other racks than h0's, the victim's source too
    assert all(e11.topology.leaf_of(a) != 0 and b == 0 for a, b in e11.workload.pairs[:7])
    e8 = from_mapping(ex.e8_scenario(quick), "<e8>", "E8")
    assert e8.workload.pairs == ((0, 4), (1, 5)) and e8.transport == {}
    assert e8.workload.pair_transport == {
        (0, 4): {"ev_planes": [2], "ev_set_per_plane": 2},
        (1, 5): {"ev_planes": [2], "ev_set_per_plane": 1}}
    e7 = from_mapping(ex.e7_scenario(quick), "<e7>", "E7")
    assert e7.transport == {"ev_set_per_plane": 2}
    assert [f.target for f in from_mapping(ex.e1_scenario(quick), "<e1>", "E1").faults] == [
        "h0-p0", "h0-p1", "h0-p2", "h0-p3"]


@pytest.mark.parametrize("quick", [True, False])
def test_every_stream_keeps_twice_a_hosts_bdp_in_flight(quick):
    # On the scale model a host's BDP is 319 packets, 1.3 MB: four 256 KiB writes in
    # flight left E5's stream latency-bound (a plane down then cost it nothing).
    from mrcemu.topology import latency
    for e in ex.EXPERIMENTS:
        if e.scenario is None or e.id == "E11":
            continue
        sc = from_mapping(e.scenario(quick), f"<paper {e.id}>", e.id)
        bdp = latency.bdp_packets(sc.topology, 4096) * 4096
        assert sc.workload.depth * sc.workload.size >= 2 * bdp, e.id
    assert ex.stream_depth() == 10
    # without the fixed latency the BDP is a few packets: the old depth stands
    from mrcemu.topology.model import TOPOLOGY_DIR
    assert ex.stream_depth(str(TOPOLOGY_DIR / "small.yaml")) >= 4


def test_every_experiment_runs_one_scenario_or_a_sweep():
    for e in ex.EXPERIMENTS:
        assert (e.scenario is None) == (e.sweep is not None), e.id
        assert not e.missing, e.id
    assert [e.id for e in ex.EXPERIMENTS if e.sweep] == ["E0", "E9", "E10"]


@pytest.mark.parametrize("quick", [True, False])
def test_e0_is_ib_write_lat_local_and_cross_and_ib_write_bw(quick):
    runs = dict(ex.BY_ID["E0"].sweep.runs(quick))
    perftest = {"perftest-lat-local", "perftest-lat-cross", "perftest-bw"}
    assert set(runs) == {"lat-local", "lat-cross", "bw"} | (
        perftest if ex.perftest_installed() else set())
    for where, (a, b) in (("local", (0, 1)), ("cross", (0, 7))):
        sc = from_mapping(runs[f"lat-{where}"], "<e0>", "E0")
        assert (sc.workload.kind, sc.workload.size) == ("single", 2)
        assert (sc.workload.src, sc.workload.dst) == (a, b)
        # the pair is where the paper measured it: one switch, or leaf-spine-leaf
        from mrcemu.topology import latency
        assert latency.hops(sc.topology, a, b) == (1 if where == "local" else 3)
    bw = from_mapping(runs["bw"], "<e0>", "E0")
    assert bw.workload.kind == "stream" and bw.workload.size == 32 * 1024
    # more in flight than a host's bandwidth-delay product, or the window, not the
    # link, would set the rate
    assert bw.workload.depth * bw.workload.size > latency.bdp_packets(bw.topology, 4096) * 4096


def test_e0_also_runs_perftest_unmodified_the_server_first_when_it_is_installed(monkeypatch):
    monkeypatch.setattr(ex, "perftest_installed", lambda: True)
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    runs = dict(ex.BY_ID["E0"].sweep.runs(True))
    for where, (a, b) in (("local", (0, 1)), ("cross", (0, 7))):
        sc = from_mapping(runs[f"perftest-lat-{where}"], "<e0>", "E0")
        server, client = sc.workload.programs
        assert (server.host, client.host) == (b, a)
        assert client.argv == (*server.argv, f"h{b}") and server.argv[:3] == (
            "ib_write_lat", "-s", "2")
    bw = from_mapping(runs["perftest-bw"], "<e0>", "E0").workload.programs
    assert bw[1].argv[:5] == ("ib_write_bw", "-s", "32768", "-q", "4")
    monkeypatch.setattr(ex, "perftest_installed", lambda: False)
    assert not [n for n, _ in ex.BY_ID["E0"].sweep.runs(True) if n.startswith("perftest")]


def perftest_report(slowdown: float, **fig) -> dict:
    from mrcemu.topology import latency, load
    scale = latency.describe(load("default").slowed(slowdown), slowdown)
    pt = ({"kind": "latency", "typical_one_way_s": fig["one_way"]} if "one_way" in fig
          else {"kind": "bandwidth", "average_mbps": fig["mbps"]})
    return {"slowdown": slowdown, "scale": scale, "transports": {"mrc": {"programs": [
        {"host": "h7", "perftest": None}, {"host": "h0", "perftest": pt}]}}}


def e0_report(kind: str, slowdown: float, **fig) -> dict:
    from mrcemu.topology import latency, load
    scale = latency.describe(load("default").slowed(slowdown), slowdown)  # full speed
    mrc = ({"per_size": {"2": {"transport_s_p50": fig["p50"]}}} if kind == "lat"
           else {"goodput_mbps": fig["mbps"]})
    return {"slowdown": slowdown, "scale": scale, "transports": {"mrc": mrc}}


def test_e0_judges_one_way_latency_on_the_papers_scale_and_the_bandwidth_share():
    k = 4  # slowed 4 times; its report at full speed, 1:5000: a paper microsecond is 5 ms
    good = {"lat-local": e0_report("lat", k, p50=2 * 5.2e-6 * 5000),
            "lat-cross": e0_report("lat", k, p50=2 * 6.7e-6 * 5000),
            "bw": e0_report("bw", k, mbps=0.93 * 160)}
    measured, ok, why = ex.e0_measure(good, quick=True)
    assert ok, why
    assert measured["one_way_us"] == {"local": pytest.approx(5.2), "cross": pytest.approx(6.7)}
    assert measured["bandwidth_share"] == pytest.approx(0.93)
    # 12 % over the paper's cross-T1 figure, or 0.85 of line rate: not as the paper
    slow = {**good, "lat-cross": e0_report("lat", k, p50=2 * 6.54 * 1.12e-6 * 5000)}
    assert not ex.e0_measure(slow, quick=True)[1]
    thin = {**good, "bw": e0_report("bw", k, mbps=0.85 * 160)}
    assert not ex.e0_measure(thin, quick=True)[1]
    assert ex.e0_measure({**good, "bw": {}}, quick=True)[:2][1] is False
    # perftest's own runs, judged by the same rules beside the analogue's
    tools = {"perftest-lat-local": perftest_report(k, one_way=5.3e-6 * 5000),
             "perftest-lat-cross": perftest_report(k, one_way=6.8e-6 * 5000),
             "perftest-bw": perftest_report(k, mbps=0.95 * 160)}
    measured, ok, why = ex.e0_measure({**good, **tools}, quick=True)
    assert ok and "perftest itself: one way 5.30 µs within a leaf" in why, why
    assert measured["perftest"]["bandwidth_share"] == pytest.approx(0.95)
    slow = {**tools, "perftest-lat-local": perftest_report(k, one_way=5.09 * 1.2e-6 * 5000)}
    assert not ex.e0_measure({**good, **slow}, quick=True)[1]
    failed = {**tools, "perftest-bw": {"transports": {"mrc": {"programs": []}}}}
    measured, ok, why = ex.e0_measure({**good, **failed}, quick=True)
    assert not ok and "perftest: a run did not complete" in why


@pytest.mark.parametrize("quick", [True, False])
def test_e9_e10_sweep_mrc_on_default_against_roce_on_ecmp(quick):
    for e, kind in (("E9", "ring-allreduce"), ("E10", "all-to-all")):
        runs = ex.BY_ID[e].sweep.runs(quick)
        assert len(runs) == 3 * len(ex.sweep_losses(quick))
        for label, m in runs:
            sc = from_mapping(m, f"<{label}>", label)
            assert sc.workload.kind == kind and len(sc.workload.sizes) == len(
                ex.sweep_sizes(quick))
            if label.startswith("mrc"):
                assert sc.topology.name == "default" and sc.transports == ("mrc",)
            else:
                assert sc.topology.name == "ecmp" and sc.transports == ("roce",)
                assert sc.workload.qps == (8 if "8qp" in label else 1)
            lossy = not label.endswith("loss0")
            assert len(sc.faults) == (8 if lossy else 0)
            assert all(f.kind == "host-loss" and f.at == 0 for f in sc.faults)
        # the same aggregate bandwidth a host on both fabrics
        topos = {from_mapping(m, "x", "x").topology for _, m in runs}
        assert len({t.planes * t.host_link_mbps for t in topos}) == 1


def sweep_reports(busbw: dict[str, dict[str, list[float | None]]], slowdown: float = 4.0
                  ) -> dict[str, dict]:
    """Reports of a --quick sweep: busbw (full-speed Mb/s, as a slowed run's report gives
    it) per loss label, config, size."""
    out = {}
    for loss, per in busbw.items():
        for label, values in per.items():
            transport = "mrc" if label == "mrc" else "roce"
            out[f"{label}-{loss}"] = {"slowdown": slowdown, "transports": {transport: {
                "per_size": {str(n): {"busbw_mbps": v}
                             for n, v in zip((64 << 10, 1 << 20), values, strict=True)
                             if v is not None}}}}
    return out


def test_e10_wants_mrc_ahead_at_every_size_and_loss():
    ahead = {"loss0": {"mrc": [30.0, 38.0], "roce-1qp": [20.0, 30.0], "roce-8qp": [10, 20.0]},
             "loss1": {"mrc": [20.0, 30.0], "roce-1qp": [5.0, None], "roce-8qp": [2.0, 1.0]}}
    m, ok, why = ex.e10_measure(sweep_reports(ahead), True)
    assert ok, why
    # as the reports give them: the slowdown is not applied again
    assert m["busbw_mbps"]["0"]["mrc"] == {"64KiB": 30.0, "1MiB": 38.0}
    # RoCE 1 QP gave no 1 MiB figure at 1 %: that comparison is left out, not counted
    # as MRC's lead; the other seven are judged
    assert "all 7 comparisons" in why
    assert "1 comparisons without both figures not judged (1%/1MiB/mrc:roce-1qp)" in why
    behind = {**ahead, "loss0": {**ahead["loss0"], "roce-1qp": [31.0, 30.0]}}
    m, ok, why = ex.e10_measure(sweep_reports(behind), True)
    assert not ok and "behind in 1 of" in why and "0%/64KiB/mrc:roce-1qp" in why
    assert m["roce_1qp_share_of_mrc"] == pytest.approx(30 / 38)
    # E9 judges the largest size only: there MRC is ahead
    assert ex.e9_measure(sweep_reports(behind), True)[1]
    # an MRC run that did not complete a size is no verdict of MRC's lead either way
    missing = {**ahead, "loss1": {**ahead["loss1"], "mrc": [20.0, None]}}
    m, ok, why = ex.e10_measure(sweep_reports(missing), True)
    assert ok and "2 comparisons without both figures not judged" in why


AHEAD = {"loss0": {"mrc": [30.0, 38.0], "roce-1qp": [20.0, 30.0], "roce-8qp": [10, 20.0]},
         "loss1": {"mrc": [20.0, 30.0], "roce-1qp": [5.0, 6.0], "roce-8qp": [2.0, 1.0]}}


@pytest.mark.parametrize("measure", [ex.e9_measure, ex.e10_measure])
def test_a_sweep_with_a_run_missing_is_not_judged_and_names_the_run(measure):
    reports = sweep_reports(AHEAD)
    assert measure(reports, True)[1] is True
    del reports["roce-8qp-loss1"]
    m, ok, why = measure(reports, True)
    assert ok is None
    assert why == "not judged: run roce-8qp-loss1 missing: no report"
    assert m["runs_without_figures"] == {"roce-8qp-loss1": "missing: no report"}


@pytest.mark.parametrize("measure", [ex.e9_measure, ex.e10_measure])
def test_a_sweep_with_a_failed_run_is_not_judged_and_names_the_run(measure):
    reports = sweep_reports(AHEAD)
    reports["mrc-loss0"] = {"slowdown": 4.0, "transports": {}}  # it never finished
    m, ok, why = measure(reports, True)
    assert ok is None and "run mrc-loss0 failed: its report has no mrc result" in why


def test_a_sweep_with_no_comparison_that_has_both_figures_is_not_judged():
    none_big = {loss: {k: [v[0], None] for k, v in per.items()} for loss, per in AHEAD.items()}
    # E9 compares at the largest size only: nothing is left to compare
    m, ok, why = ex.e9_measure(sweep_reports(none_big), True)
    assert ok is None and why.startswith("not judged: no comparison of MRC over RoCE")
    # E10 still has the small size's comparisons
    assert ex.e10_measure(sweep_reports(none_big), True)[1] is True


def test_the_committed_full_run_judged_again_from_its_figures_gets_its_verdicts():
    from pathlib import Path

    doc = json.loads((Path(ex.__file__).parent / "example" / "paper.json").read_text())
    rows = [r for r in doc["experiments"] if r["measured"] is not None]
    assert [r["id"] for r in rows] == [e.id for e in ex.EXPERIMENTS]
    for row in rows:
        ok, why = ex.rejudge(row)
        assert ok == row["consistent"], (row["id"], why, row["reason"])
        # the words too, up to the notes a run adds after the rule's own (bins, fidelity)
        assert row["reason"].startswith(why.split("; its ")[0]), (row["id"], why)


def test_a_leaf_down_at_seven_eighths_is_as_the_paper_and_at_half_it_is_not():
    k = 4.0  # a slowed run, whose report gives the experiment's own times and rates
    good = report(lambda t: 80.0 if t < 1.0 else 70.0, 3.0, k)
    m, ok, why = ex.e5_measure(good, quick=True)
    assert ok and m["share_after"] == pytest.approx(7 / 8)
    assert m["level_before_mbps"] == pytest.approx(80.0)  # not multiplied again
    m, ok, why = ex.e5_measure(report(lambda t: 80.0 if t < 1.0 else 40.0, 3.0), quick=True)
    assert not ok and "expected 0.875" in why


def test_e1_judges_each_step_against_the_planes_left():
    s = ex.E1_EVERY

    def staircase(t: float) -> float:
        if t < 1.0:
            return 80.0
        i = min(int((t - 1.0) // s), 7)
        return 10.0 * (8 - [1, 2, 3, 4, 3, 2, 1, 0][i])

    m, ok, _ = ex.e1_measure(report(staircase, 9.0), quick=True)
    assert ok and m["share_of_before"] == pytest.approx([7 / 8, 6 / 8, 5 / 8, 4 / 8, 5 / 8,
                                                         6 / 8, 7 / 8, 1.0])
    _, ok, why = ex.e1_measure(report(lambda t: 80.0 if t < 1.0 else 50.0, 9.0), quick=True)
    assert not ok and "step 1 was 0.62" in why


def test_e7_needs_the_ev_retired_no_data_after_and_its_loss_costing_a_few_round_trips():
    def fault(cost, bad_s=1.2):
        return {"cost_rtts": cost, "failed_paths": [
            {"bad_s": bad_s, "first_loss_s": 1.1, "data_after_retire": 0}]}
    flat = report(lambda t: 100.0, 3.0, faults=[fault(0.8)])
    m, ok, why = ex.e7_measure(flat, quick=True)
    assert ok and m["retired"] == 1 and m["retire_after_first_loss_s"] == [0.1]
    assert m["cost_rtts"] == 0.8 and "1.000 of the level" in why  # the bins beside
    # The 200 ms bins are reported, not judged: a dip in one with a cost of 2 RTTs is
    # consistent, a cost of 3.5 is not.
    dip = report(lambda t: 50.0 if 1.2 <= t < 1.4 else 100.0, 3.0, faults=[fault(2.0)])
    _, ok, why = ex.e7_measure(dip, quick=True)
    assert ok and "0.500 of the level" in why
    _, ok, why = ex.e7_measure(report(lambda t: 100.0, 3.0, faults=[fault(3.5)]), quick=True)
    assert not ok and "3.50" in why
    never = report(lambda t: 100.0, 3.0, faults=[fault(0.5, bad_s=None)])
    assert ex.e7_measure(never, quick=True)[1:] == (False, "the lossy EV was never retired")


def test_e3_and_e4_judge_each_failure_by_its_cost_in_round_trips():
    def rep(costs):
        return report(lambda t: 100.0, 6.0, faults=[{"cost_rtts": c} for c in costs])
    m, ok, why = ex.e3_measure(rep([0.5] * 8), quick=True)
    assert ok and m["cost_rtts"] == [0.5] * 8 and "at most 0.50 round trips" in why
    _, ok, why = ex.e3_measure(rep([0.5] * 7 + [3.2]), quick=True)
    assert not ok and "the failures: 1 of 8 cost more than 3" in why
    _, ok, why = ex.e4_measure(rep([1.0] * 7 + [None]), quick=True)
    assert not ok and why.startswith("no cost measured")


def test_e11_wants_the_victim_at_its_ports_rate_and_the_incast_fair():
    k = 4.0
    flows = {f: {"goodput_mbps": 22.0} for f in ex.E11_INCAST}
    rep = {"slowdown": k, "transports": {"mrc": {"per_flow": {
        **flows, ex.E11_VICTIM: {"goodput_mbps": 150.0}}}}}
    m, ok, why = ex.e11_measure(rep, quick=True)
    assert ok and m["fairness"] == pytest.approx(1.0) and m["victim_mbps"] == pytest.approx(150)
    rep["transports"]["mrc"]["per_flow"]["h4-h0"] = {"goodput_mbps": 100.0}
    m, ok, why = ex.e11_measure(rep, quick=True)
    assert not ok and m["fairness"] < 0.95 and "fairness" in why
    del rep["transports"]["mrc"]["per_flow"][ex.E11_VICTIM]
    assert ex.e11_measure(rep, quick=True)[1:] == (False, "a flow delivered nothing")
    assert rules.jain([1.0, 0.0]) == pytest.approx(0.5) and rules.jain([]) is None


def e8_report(k: float, flow1_a: int, flow1_b: int, rate1: float, rate2: float) -> dict:
    """Flow 1 sprays evenly over EV-A and EV-B in the first half, then `flow1_a` and
    `flow1_b` packets a bin; flow 2 stays on EV-A. A run slowed k times: its report's
    bins are 0.05 s of the slowed run, 0.05 / k at full speed."""
    bin_s = 0.05 / k
    n = round(ex.STREAM / bin_s)
    half = n // 2
    return {"slowdown": k, "transports": {"mrc": {
        "per_flow": {ex.E8_FLOW1: {"goodput_mbps": rate1},
                     ex.E8_FLOW2: {"goodput_mbps": rate2}},
        "flow_paths": {"bin_s": bin_s, "flows": {
            ex.E8_FLOW1: {ex.E8_EV_A: [5] * half + [flow1_a] * (n - half),
                          ex.E8_EV_B: [5] * half + [flow1_b] * (n - half)},
            ex.E8_FLOW2: {ex.E8_EV_A: [10] * n}}}}}}


def test_e8_wants_flow_1_off_ev_a_and_both_flows_near_a_ports_rate():
    k = 4.0
    m, ok, why = ex.e8_measure(e8_report(k, 1, 9, 18.5, 18.0), quick=True)
    assert ok, why
    assert m["flow1_on_ev_a_second_half"] == pytest.approx(0.1)
    assert m["share_of_port"][ex.E8_FLOW2] == pytest.approx(18.0 / ex.PORT_MBPS)
    # flow 1 stayed on both EVs: not moved
    m, ok, why = ex.e8_measure(e8_report(k, 5, 5, 18.5, 18.0), quick=True)
    assert not ok and m["flow1_on_ev_a_second_half"] == pytest.approx(0.5) and "0.50" in why
    # moved, but the pinned flow starved
    _, ok, why = ex.e8_measure(e8_report(k, 0, 10, 18.5, 9.0), quick=True)
    assert not ok and "0.46" in why
    # a pinned flow that used another path is not the experiment
    rep = e8_report(k, 0, 10, 18.5, 18.0)
    rep["transports"]["mrc"]["flow_paths"]["flows"][ex.E8_FLOW2]["p2s3"] = [1]
    assert "left their EVs" in ex.e8_measure(rep, quick=True)[2]


def test_rules_read_whole_bins_of_the_series():
    g = series(lambda t: t, 1.0)  # 0, 0.05, .. 0.95
    assert rules.level(g, 0.0, 0.1) == pytest.approx(0.025)
    assert rules.level(g, 5.0, 6.0) is None
    assert rules.bins(g, 0.0, 0.5, 0.2) == pytest.approx([0.075, 0.275])
    assert rules.floor_consistent([0.96, None], "x")[0] is False


def test_unknown_ids_are_one_clear_error_and_the_table_says_what_was_not_run():
    with pytest.raises(MrcemuError, match="no experiment E12: the ids are E0, E1"):
        select(["E7", "E12"])
    assert [e.id for e in select(["e5", "E1"])] == ["E1", "E5"]
    md = markdown({"quick": True, "slowdown": 4.0, "experiments": [
        {"id": "E9", "figure": "16", "paper": "p", "measured": None, "consistent": None,
         "reason": "not run: needs x"}]})
    assert "| E9 | 16 | p | - | not run | 4 | not run: needs x |" in md
    # with auto, each row says the slowdown picked for it
    md = markdown({"quick": True, "slowdown": "auto", "experiments": [
        {"id": "E1", "figure": "7", "paper": "p", "measured": None, "consistent": None,
         "reason": "r", "slowdown": 6.0}]})
    assert "as `--slowdown auto` picked for it" in md
    assert "| E1 | 7 | p | - | not run | 6 | r |" in md
    md = markdown({"quick": True, "slowdown": 4.0, "experiments": [
        {"id": "E9", "figure": "16", "paper": "p", "measured": {"a": 1}, "consistent": None,
         "reason": "not judged: run x missing"}]})
    assert "| **not judged** | 4 | not judged: run x missing |" in md


def test_e11_is_contrasted_with_trimming_off_on_the_same_topology_otherwise(tmp_path):
    from dataclasses import replace

    from mrcemu.paper.run import contrast_topology
    from mrcemu.topology import load as load_topology

    e = ex.BY_ID["E11"]
    assert e.contrast is not None and e.contrast.key == "no_trim"
    assert [x.id for x in ex.EXPERIMENTS if x.contrast] == ["E11"]
    rack4 = from_mapping(e.scenario(True), "<e11>", "E11").topology
    path = contrast_topology(e, rack4, tmp_path)
    changed = load_topology(path)
    assert changed.trim_threshold_bytes == 0 and rack4.trim_threshold_bytes > 0
    assert replace(changed, trim_threshold_bytes=rack4.trim_threshold_bytes, name=rack4.name,
                   source=rack4.source) == rack4
    # the scenario reads it as its topology: the same hosts, pairs and times
    sc = from_mapping({**e.scenario(True), "topology": str(path)}, "<c>", "E11-no_trim")
    assert sc.workload == from_mapping(e.scenario(True), "<e11>", "E11").workload


def test_e11_reports_how_the_losses_were_recovered():
    flows = {f: {"goodput_mbps": 20.0} for f in ex.E11_INCAST}
    rep = {"slowdown": 1.0, "transports": {"mrc": {
        "per_flow": {**flows, ex.E11_VICTIM: {"goodput_mbps": 150.0}},
        "trims": 12, "retransmits": 30, "rtos": 2}}}
    m, _, _ = ex.e11_measure(rep, quick=True)
    assert (m["trims"], m["retransmits"], m["rtos"]) == (12, 30, 2)


def e6_report(plane3_during: float, others_during: float) -> dict:
    """E6's quick run: 8 planes at 75 Mb/s each; with p3s1 down (1 s to 1 + d) plane 3
    carries `plane3_during` and each other plane `others_during`."""
    d = ex.E6_DOWN
    rep = report(lambda t: 0.0, 1 + d + 1)
    g = rep["transports"]["mrc"]["goodput_series"]

    def at(plane: int, t: float) -> float:
        if not 1.0 <= t < 1 + d:
            return 75.0
        return plane3_during if plane == 3 else others_during
    g["per_plane_mbps"] = [[at(p, t) for t in g["t"]] for p in range(8)]
    g["total_mbps"] = [sum(col) for col in zip(*g["per_plane_mbps"], strict=True)]
    return rep


def test_e6_judges_the_level_and_gives_it_against_its_bound_and_the_planes_share():
    # plane 3 at 3/4 of its share, the others unchanged: the bound itself
    m, ok, why = ex.e6_measure(e6_report(0.75 * 75, 75.0), quick=True)
    assert ok and m["share_during"] == pytest.approx(7.75 / 8)
    assert m["bound"] == pytest.approx(7.75 / 8)
    assert m["plane_share_before"] == pytest.approx(1 / 8)
    assert m["plane_share_during"] == pytest.approx(m["plane_capacity_share"])
    assert m["plane_capacity_share"] == pytest.approx(0.75 / 7.75)
    assert "1.000 of what the fabric can carry (0.969)" in why
    assert "plane 3 carried 0.125 of the data before, 0.097 with its spine down" in why
    # every plane cut for plane 3's queue (the rule before): below the paper's floor
    m, ok, why = ex.e6_measure(e6_report(0.58 * 75, 0.98 * 75), quick=True)
    assert not ok and why.startswith("the steady state with the spine down fell to 0.930")
    assert ex.rejudge({"id": "E6", "measured": m})[0] is False
