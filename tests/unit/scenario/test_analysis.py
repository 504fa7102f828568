"""Report numbers from a synthetic run record: every figure is computed, none assumed."""

from __future__ import annotations

import pytest

from mrcemu.scenario import analysis, report
from mrcemu.topology import Layout, faults, load
from mrcemu.topology.paths import make_ev

LAYOUT = Layout(load("default"))
DEAD = make_ev(3, 1, 13)  # through spine p3s1
ALIVE = make_ev(0, 0, 0)
T0 = 100.0


def raw_record() -> dict:
    # h0 -> h7 sends on DEAD until 0.3 s after the fault at t=1 s (two new packets and a
    # retransmission), retires it at 1.25 s for the loss of the packet sent at 1.1 s, and
    # keeps using ALIVE (but for one retransmission on DEAD after it was retired).
    tx_t = [T0 + 0.5, T0 + 1.1, T0 + 1.2, T0 + 1.3, T0 + 1.4, T0 + 2.0]
    tx_ev = [DEAD, DEAD, DEAD, DEAD, ALIVE, ALIVE]
    tx_rtx = [0, 0, 0, 1, 1, 0]
    # 100 Mb/s before the fault, 40 Mb/s for 0.3 s, then 100 Mb/s again: bins of 10 ms.
    width = 0.01
    bins = {}
    for i in range(300):
        t = T0 + i * width
        rate = 40e6 if 1.0 <= i * width < 1.3 else 100e6
        bins[str(int(round(t / width)))] = int(rate * width / 8)
    conn = {"peer": 7, "transport": "mrc", "rto": 0.1, "srtt": 0.05, "cwnd": 64 * 4096,
            "pmtu": 4096,
            "stats": {"retransmits": 5, "trims_nacked": 1, "nacks_rx": 2, "rtos": 3,
                      "probes_tx": 4, "per_ev": {f"0x{DEAD:08x}": 4, f"0x{ALIVE:08x}": 2}},
            "tx": {"t": tx_t, "ev": tx_ev, "rtx": tx_rtx, "overflow": 0},
            "ev_changes": [[T0 + 1.25, DEAD, "GOOD", "ASSUMED_BAD", "test", T0 + 1.1]],
            "path_changes": []}
    flows = [{"src": 0, "dst": 7, "size": 1 << 20, "posted_at": T0, "done_at": T0 + 2.5,
              "ok": True}]
    return {"transport": "mrc", "t0": T0, "t_end": T0 + 3.0, "completed": True,
            "interrupted": False, "timed_out": False,
            "iterations": [{"index": 0, "flows": flows, "complete": True, "start": T0,
                            "end": T0 + 2.5}],
            "stats_before": {"0": {"7:mrc": {"retransmits": 1, "trims_nacked": 0,
                                             "nacks_rx": 0, "rtos": 1, "probes_tx": 0}}},
            "faults": [{"kind": "switch-down", "target": "p3s1", "at_s": 1.0,
                        "t_inject": T0 + 1.0, "t_heal": None, "error": None,
                        "spec": {"one_way": False}}],
            "traces": {"0": {"conns": [conn], "rx_bin_s": width, "rx_bins": {"0": {}}},
                       "7": {"conns": [], "rx_bin_s": width, "rx_bins": {"3": bins}}}}


def test_summary_counts_and_failover_times():
    s = analysis.summarize(raw_record(), LAYOUT, window_packets=64)
    assert s["job_completion_s"] == 2.5 and s["integrity_ok"] and s["messages_ok"] == 1
    assert s["goodput_mbps"] == round((1 << 20) * 8 / 2.5 / 1e6, 2)
    assert (s["retransmits"], s["trims"], s["nacks"], s["rtos"]) == (4, 1, 2, 2)
    (f,) = s["faults"]
    assert f["at_s"] == 1.0
    assert f["last_packet_on_failed_path_s"] == 0.3  # the retransmission at 1.3 s
    assert f["new_packets_on_failed_path"] == 2
    assert f["new_packets_on_failed_path_max_per_connection"] == 2
    assert f["detect_s_p50"] == 0.25 and f["paths_not_detected"] == 0
    # Retired 0.15 s (3 smoothed RTTs) after the send of the lost packet that retired it,
    # and one packet (the retransmission at 1.3 s) still went onto it after that.
    (path,) = f["failed_paths"]
    assert (path["first_loss_s"], path["bad_s"], path["retire_rtts"],
            path["data_after_retire"]) == (0.1, 0.25, 3.0, 1)
    assert path["sends_after_fault_s"] == [0.1, 0.2, 0.3]
    assert f["retire_after_loss_s_max"] == 0.15 and f["retire_after_loss_rtts_max"] == 3.0
    assert f["paths_retired_within_2_rtts_of_loss"] == 0
    assert f["data_packets_after_retire"] == 1
    assert f["goodput_before_mbps"] == 100.0
    # Below 90 % from 1.0 s; the 0.1 s average is back above 90 % in the bin ending 1.4 s.
    assert f["recovered_90pct_s"] == 0.4
    assert s["goodput_series"]["per_plane_mbps"][3][0] == 100.0


def test_a_policys_own_counters_are_summed_over_the_run():
    raw = raw_record()
    (conn,) = raw["traces"]["0"]["conns"]
    conn["stats"]["lb"] = {"recycled": 90, "explored": 30}
    raw["stats_before"]["0"]["7:mrc"]["lb"] = {"recycled": 10}
    counters = analysis.summarize(raw, LAYOUT, window_packets=64)["counters"]
    assert (counters["lb_recycled"], counters["lb_explored"]) == (80, 30)


def test_a_stop_cleared_before_the_one_that_retired_the_path_is_not_the_paths_stop():
    # DEAD is stopped 5 ms after the fault for a packet queued before it, back in use
    # 1 ms later (that packet arrived), takes the new packets at 1.1 and 1.2 s, is
    # stopped again at 1.22 s for the one sent at 1.1 s, and retired at 1.25 s.
    raw = raw_record()
    (conn,) = raw["traces"]["0"]["conns"]
    conn["ev_changes"] = [
        [T0 + 1.005, DEAD, "GOOD", "STOPPED", "overdue", T0 + 0.95],
        [T0 + 1.006, DEAD, "STOPPED", "GOOD", "heard from"],
        [T0 + 1.22, DEAD, "GOOD", "STOPPED", "overdue", T0 + 1.1],
        [T0 + 1.25, DEAD, "STOPPED", "ASSUMED_BAD", "lost: probe unanswered", T0 + 1.1]]
    (path,) = analysis.summarize(raw, LAYOUT, window_packets=64)["faults"][0]["failed_paths"]
    # Nothing went onto it while the stop that stuck was in effect; it came 2.4 RTTs
    # after the lost packet's send.
    assert (path["stop_s"], path["stop_rtts"], path["data_while_stopped"]) == (0.22, 2.4, 0)
    assert (path["first_loss_s"], path["bad_s"]) == (0.1, 0.25)
    # Not cleared, the first stop is the one: the two new packets went onto it stopped.
    del conn["ev_changes"][1]
    (path,) = analysis.summarize(raw, LAYOUT, window_packets=64)["faults"][0]["failed_paths"]
    assert (path["stop_s"], path["data_while_stopped"]) == (0.005, 2)


def test_no_dip_means_zero_and_incomplete_runs_have_no_completion_time():
    raw = raw_record()
    bins = raw["traces"]["7"]["rx_bins"]["3"]
    for k in bins:
        bins[k] = int(100e6 * 0.01 / 8)
    raw["completed"] = False
    s = analysis.summarize(raw, LAYOUT, 64)
    assert s["faults"][0]["recovered_90pct_s"] == 0.0
    assert s["job_completion_s"] is None and not s["integrity_ok"]


def test_percentile_is_nearest_rank():
    xs = [float(i) for i in range(1, 101)]
    assert analysis.percentile(xs, 50) == 50.0 and analysis.percentile(xs, 99) == 99.0
    assert analysis.percentile([], 50) is None


def test_affects_names_exactly_the_paths_through_the_fault():
    def hit(kind: str, target: str) -> set[tuple[int, int, int]]:
        f = faults.affects(LAYOUT, faults.Fault(kind, target))
        evs = [make_ev(p, s, 0) for p in range(8) for s in range(4)]
        return {(a, b, ev) for a in range(8) for b in range(8) for ev in evs
                if a != b and f(a, b, ev)}

    spine = hit("switch-down", "p3s1")
    assert spine and all(ev == make_ev(3, 1, 0) for _, _, ev in spine)
    gray = hit("gray", "p5l0-p5s2")
    assert gray and all(ev == make_ev(5, 2, 0) and (a < 4 or b < 4) for a, b, ev in gray)
    port = hit("host-port-down", "h0-p2")
    assert port and all(0 in (a, b) and (ev >> 26) & 0xF == 2 for a, b, ev in port)
    assert len(hit("plane-down", "6")) == 56 * 4


def test_report_table_has_both_transports_side_by_side():
    s = analysis.summarize(raw_record(), LAYOUT, 64)
    rep = {"scenario": "t", "topology": "default", "description": "", "started": "now",
           "machine": "m", "partial": False, "transports": {"mrc": s, "roce": s}}
    head, rows = report.table_rows(rep)
    assert head == ["", "MRC", "RoCE"]
    assert ["job completion", "2.500 s", "2.500 s"] in rows
    bad = {"ok": False, "reasons": ["timers ran late"]}
    rep["transports"] = {"mrc": {**s, "fidelity": {"ok": True, "reasons": []}},
                         "roce": {**s, "fidelity": bad}}
    assert ["fidelity", "faithful", "NOT faithful"] in report.table_rows(rep)[1]
    md = report.markdown(rep)
    assert "| job completion | 2.500 s | 2.500 s |" in md and "switch-down p3s1" in md


def test_the_nics_own_drops_are_counted_over_the_run_by_reason_and_reported():
    raw = raw_record()
    # h7's NIC had dropped 2 stale-QP copies before this run (the transport before it)
    raw["nic_drops_before"] = {"0": {}, "7": {"stale_qp": 2}}
    raw["traces"]["7"]["malformed"] = {"stale_qp": 5, "bad_icrc": 1}
    raw["traces"]["0"]["malformed"] = {"not_our_usid": 3}
    s = analysis.summarize(raw, LAYOUT, 64)
    assert s["nic_drops"] == {"bad_icrc": 1, "not_our_usid": 3, "stale_qp": 3}
    clean = analysis.summarize(raw_record(), LAYOUT, 64)
    assert clean["nic_drops"] == {}
    rep = {"scenario": "t", "topology": "default", "description": "", "started": "now",
           "machine": "m", "partial": False, "transports": {"mrc": s, "roce": clean}}
    assert ["dropped at the NICs", "7", "0"] in report.table_rows(rep)[1]
    md = report.markdown(rep)
    assert "by reason: MRC: bad_icrc 1, not_our_usid 3, stale_qp 3." in md


def test_a_report_of_several_policies_has_a_column_each_and_names_them():
    s = analysis.summarize(raw_record(), LAYOUT, 64)
    rep = {"scenario": "t", "topology": "default", "description": "", "started": "now",
           "machine": "m", "partial": False,
           "transports": {"mrc-mrc": {**s, "load_balancing": "mrc"},
                          "mrc-reps": {**s, "load_balancing": "reps"}, "roce": s}}
    head, rows = report.table_rows(rep)
    assert head == ["", "MRC (mrc)", "MRC (reps)", "RoCE"]
    assert ["load balancing", "mrc", "reps", "-"] in rows
    md = report.markdown(rep)
    assert "Load balancing: MRC (mrc): `mrc`, MRC (reps): `reps`" in md
    # One run on MRC's own policy: the line says so, and the table keeps its rows.
    rep["transports"] = {"mrc": {**s, "load_balancing": "mrc"}, "roce": s}
    assert "Load balancing: MRC: `mrc`" in report.markdown(rep)
    assert not any(r[0] == "load balancing" for r in report.table_rows(rep)[1])


def test_a_slowed_runs_report_gives_full_speed_times_and_says_the_wall_time_once():
    from mrcemu.scenario.fullspeed import at_full_speed
    s = at_full_speed(analysis.summarize(raw_record(), LAYOUT, 64), 4.0)
    rep = {"scenario": "t", "topology": "default", "description": "", "started": "now",
           "machine": "m", "partial": False, "slowdown": 4.0, "wall_clock_s": 12.5,
           "transports": {"mrc": s}}
    md = report.markdown(rep)
    assert "| job completion | 0.625 s |" in md  # 2.5 s slowed
    assert "Run 4 times slower" in md and "at full speed" in md
    assert md.count("It took 12.5 s on this host's clock.") == 1
    # the recovery windows, as the analysis used them on the slowed run, at full speed
    assert f"over the {analysis.PRE_FAULT:.3g} s before the fault" in md
    assert f"{analysis.SMOOTH * analysis.BIN:.3g} s average" in md


def test_the_map_names_the_links_a_fault_broke_when_all_were_named_and_what_else():
    spine = {"p3l0-p3s1", "p3l1-p3s1"}
    m = {"samples": [[0.9, ["h0-p1l0"]], [1.0, ["h0-p1l0"]], [1.1, ["h0-p1l0"]],
                     [1.3, ["h0-p1l0", "p3l0-p3s1"]],
                     [1.4, ["h0-p1l0", "p3l0-p3s1", "p3l1-p3s1", "p5l0-p5s2"]],
                     [1.5, ["h0-p1l0"]]]}
    assert analysis.map_after(m, 1.05, 3.0, spine) == {
        "map_bad": ["p3l0-p3s1", "p3l1-p3s1"], "map_bad_after_s": 0.35, "map_missed": [],
        "map_also": ["p5l0-p5s2"]}  # h0-p1l0 was bad before the fault: not counted
    got = analysis.map_after(m, 1.05, 1.35, spine)  # healed before the second showed
    assert got["map_bad"] == ["p3l0-p3s1"] and got["map_bad_after_s"] is None
    assert got["map_missed"] == ["p3l1-p3s1"]
    assert analysis.map_after(m, 1.5, 3.0, spine)["map_bad"] == []
    # A link another fault of the run broke is that fault's, not a false alarm.
    assert analysis.map_after(m, 1.05, 3.0, spine, {"p5l0-p5s2"})["map_also"] == []
    assert analysis.map_after(None, 1.0, 2.0, spine) == {}


def test_the_links_a_fault_acts_on_by_name():
    layout = Layout(load("default"))
    f = faults.Fault
    assert faults.links_of(layout, f("switch-down", "p3s1")) == {"p3l0-p3s1", "p3l1-p3s1"}
    assert faults.links_of(layout, f("gray", "p5l0-p5s2")) == {"p5l0-p5s2"}
    assert faults.links_of(layout, f("gray", "p5l0-p5s2", one_way=True)) == {"p5l0-p5s2"}
    assert faults.links_of(layout, f("host-port-down", "h0-p2")) == {"h0-p2l0"}
    assert len(faults.links_of(layout, f("plane-down", "1"))) == 16


def test_a_slowed_run_judges_recovery_over_proportionally_longer_windows():
    from mrcemu.scenario.analysis import BIN, PRE_FAULT, recovery
    t = [round(i * BIN, 3) for i in range(60)]  # 3 s
    # 50 Mb/s, then 100 for the PRE_FAULT before the fault at 1.0 s, nothing for 0.1 s,
    # then 100 again.
    g = [50.0 if x < 1.0 - PRE_FAULT - 1e-9 else 100.0 if x < 1.0 or x >= 1.1 else 0.0
         for x in t]
    series = {"bin_s": BIN, "t": t, "total_mbps": g}
    assert recovery(series, 1.0, 3.0) == (100.0, 0.2)  # 2 bins averaged: 1.15-1.2 s
    level, rec = recovery(series, 1.0, 3.0, slowdown=2.0)
    assert level == 75.0  # the mean over twice PRE_FAULT: half of it at 50 Mb/s
    assert rec is not None and rec > 0.2  # 4 bins averaged: low for longer


def test_the_goodput_dip_is_the_lowest_whole_bin_after_the_faults_own():
    # 10 ms series: 100 Mb/s, the fault at 1.02 s, its 100 ms bin (1.0-1.1) at 20, the
    # next at 70, then 100 again; the series ends at 1.6 s.
    t = [round(i * 0.01, 2) for i in range(160)]
    g = [20.0 if 1.0 <= x < 1.1 else 70.0 if 1.1 <= x < 1.2 else 100.0 for x in t]
    series = {"bin_s": 0.01, "t": t, "total_mbps": g}
    level, ratio = analysis.goodput_dip(series, 1.02, 1.6, 0.1, 0.3)
    assert level == 100.0 and ratio == 0.7  # the fault's own bin (20) is left out
    # Only bins ending by `until` count; none after the fault's: no figure.
    assert analysis.goodput_dip(series, 1.02, 1.15, 0.1, 0.3) == (None, None)
    assert analysis.goodput_dip(series, 0.0, 1.6, 0.1, 0.3) == (None, None)  # no level


def test_per_flow_goodput_counts_each_directions_busy_time_once():
    flows = [  # a stream h0->h1: overlapping writes; an incast's barrier-separated ones
        {"src": 0, "dst": 1, "size": 1_000_000, "posted_at": 10.0, "done_at": 11.0, "ok": True},
        {"src": 0, "dst": 1, "size": 1_000_000, "posted_at": 10.5, "done_at": 12.0, "ok": True},
        {"src": 2, "dst": 1, "size": 500_000, "posted_at": 10.0, "done_at": 10.5, "ok": True},
        {"src": 2, "dst": 1, "size": 500_000, "posted_at": 20.0, "done_at": 20.5, "ok": False},
        {"src": 3, "dst": 1, "size": 9, "posted_at": 10.0, "done_at": None},
    ]
    got = analysis.per_flow(flows)
    assert got["h0-h1"] == {"messages": 2, "bytes": 2_000_000, "active_s": 2.0,
                            "goodput_mbps": 8.0}
    # Only the intact message is goodput; the time is both messages' (it was spent).
    assert got["h2-h1"]["bytes"] == 500_000 and got["h2-h1"]["active_s"] == 1.0
    assert got["h3-h1"] == {"messages": 1, "bytes": 0, "active_s": 0.0, "goodput_mbps": None}


def test_flow_paths_bins_each_restricted_flows_packets_by_path_and_skips_wide_ones():
    raw = raw_record()
    fp = analysis.flow_paths(raw)
    assert fp["bin_s"] == analysis.BIN
    per = fp["flows"]["h0-h7"]
    assert sorted(per) == ["p0s0", "p3s1"]
    assert sum(per["p3s1"]) == 4 and sum(per["p0s0"]) == 2
    # each packet in the bin that holds its send time (within a bin: float rounding)
    starts = [i * analysis.BIN for i, n in enumerate(per["p3s1"]) for _ in range(n)]
    assert all(abs(a - b) <= analysis.BIN + 1e-9 for a, b in zip(starts, (0.5, 1.1, 1.2, 1.3),
                                                           strict=True))
    # A flow sprayed over more paths than FLOW_PATHS_MAX is left out.
    conn = raw["traces"]["0"]["conns"][0]
    evs = [make_ev(p, s, 0) for p in range(3) for s in range(3)]
    conn["tx"] = {"t": [T0 + 0.1] * len(evs), "ev": evs, "rtx": [0] * len(evs), "overflow": 0}
    assert analysis.flow_paths(raw)["flows"] == {}


def test_transport_time_sums_each_phase_and_leaves_out_the_gaps_between():
    it = {"flows": [
        {"phase": 0, "posted_at": 10.0, "done_at": 10.4},
        {"phase": 0, "posted_at": 10.1, "done_at": 10.5},
        {"phase": 1, "posted_at": 11.0, "done_at": 11.2},  # 0.5 s of polling before it
    ]}
    assert analysis.transport_time(it) == pytest.approx(0.5 + 0.2)


def test_a_faults_cost_is_the_goodput_short_of_the_level_in_round_trips():
    # 100 Mb/s, then 50 for two 50 ms bins from the fault at 1.0 s: 5 Mb short, which
    # at 100 Mb/s is 50 ms, five 10 ms round trips. Back at the level, the sum stops.
    ts = [round(i * 0.05, 6) for i in range(60)]
    g = {"bin_s": 0.05, "t": ts,
         "total_mbps": [50.0 if 1.0 <= t < 1.1 else 100.0 for t in ts]}
    assert analysis.fault_cost_rtts(g, 1.0, 3.0, 100.0, 0.01) == pytest.approx(5.0)
    # A fault in the middle of a bin: the bin counts from the fault on.
    assert analysis.fault_cost_rtts(g, 1.025, 3.0, 100.0, 0.01) == pytest.approx(3.75)
    # The dip begins a few round trips after the fault (the transport waits for its lost
    # packets first): the bins before it count too.
    late = dict(g, total_mbps=[50.0 if 1.05 <= t < 1.15 else 100.0 for t in ts])
    assert analysis.fault_cost_rtts(late, 1.0, 3.0, 100.0, 0.01) == pytest.approx(5.0)
    # Noise a little under the level costs what it is short, only until the horizon
    # (10 round trips) has passed with no dip.
    flat = dict(g, total_mbps=[0.97 * 100.0] * 60)
    assert analysis.fault_cost_rtts(flat, 1.0, 3.0, 100.0, 0.01) == pytest.approx(0.3)
    assert analysis.fault_cost_rtts(g, 1.0, 3.0, None, 0.01) is None


def test_clustermapper_has_nothing_to_name_for_a_fault_that_breaks_no_link():
    # A path's loss (path-loss) breaks no link: no link named, and no crash.
    m = {"samples": [[0.5, []], [1.5, ["p0l0-p0s0"]]]}
    got = analysis.map_after(m, 1.0, 2.0, set())
    assert got["map_bad"] == [] and got["map_bad_after_s"] is None
    assert got["map_also"] == ["p0l0-p0s0"]


def test_a_figure_that_cannot_be_computed_is_null_with_a_reason_not_a_lost_report(
        monkeypatch):
    # As a path's loss once crashed Clustermapper's figure: the figures before it stay,
    # the rest are missing with the reason, and report.md still renders.
    def broken(*_a, **_k):
        raise ValueError("max() arg is an empty sequence")

    monkeypatch.setattr(analysis, "map_after", broken)
    s = analysis.summarize(raw_record(), LAYOUT, window_packets=64)
    (f,) = s["faults"]
    assert f["not_computed"] == "ValueError: max() arg is an empty sequence"
    assert f["at_s"] == 1.0 and f["cost_rtts"] is not None and "map_bad" not in f
    md = report.markdown({"scenario": "x", "topology": "default", "started": "now",
                          "machine": "m", "transports": {"mrc": s}})
    assert "some figures were not computed (ValueError: max() arg" in md


def test_a_report_says_how_auto_picked_its_slowdown_and_which_to_try_if_unfaithful():
    from mrcemu import slowdown as auto
    s = analysis.summarize(raw_record(), LAYOUT, 64)
    cal = auto.Calibration(240.0, 9800, 2.9, 0.4, 2, 8.0, "default:x", "m", "2026-11-29T10:00")
    pick = auto.pick(cal, 37718.0, 2)
    rep = {"scenario": "t", "topology": "default", "description": "", "started": "now",
           "machine": "m", "partial": False, "slowdown": pick.slowdown,
           "slowdown_pick": pick.to_json(), "transports": {"mrc": s},
           "fidelity": {"ok": True, "reasons": []}}
    md = report.markdown(rep)
    assert f"The slowdown: --slowdown auto picked {pick.slowdown:g}: " in md
    assert "240 us of CPU" in md and "Next:" not in md
    rep["fidelity"] = {"ok": False, "reasons": ["mrc: timers ran late"]}
    md = report.markdown(rep)
    assert f"Next: `--slowdown {auto.next_slowdown(pick.slowdown):g}`" in md
    # a slowdown given as a number is not described as picked
    rep["slowdown_pick"] = {"how": "given", "slowdown": pick.slowdown}
    assert "The slowdown:" not in report.markdown(rep)


BW_OUTPUT = """
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      200              2.50               2.00                 0.000032
"""
LAT_OUTPUT = (
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
    "    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]\n"
    " 2       100          30.00          90.00        40.00              42.00"
    "          3.00            80.00                  90.00\n")


def exec_record(client_exit: int = 0) -> dict:
    raw = raw_record()
    progs = [{"host": "h7", "command": "ib_write_lat", "exit": 0, "ended_by": None,
              "started_at": T0, "ended_at": T0 + 2.0, "output": LAT_OUTPUT,
              "output_cut": False},
             {"host": "h0", "command": "ib_write_bw h7", "exit": client_exit,
              "ended_by": None, "started_at": T0 + 0.5, "ended_at": T0 + 2.5,
              "output": BW_OUTPUT if client_exit == 0 else "Couldn't connect\n",
              "output_cut": False}]
    raw["iterations"] = [{"index": 0, "flows": [], "programs": progs,
                          "complete": client_exit == 0}]
    if client_exit:
        raw["completed"], raw["failed"] = False, True
        raw["failed_flows"] = ["h0: ib_write_bw h7 (exit 1)"]
    else:
        raw["iterations"][0].update(start=T0, end=T0 + 2.5)
    return raw


def test_an_exec_runs_summary_holds_each_programs_run_output_and_own_figures():
    from mrcemu.scenario.fullspeed import at_full_speed

    s = analysis.summarize(exec_record(), LAYOUT, 64)
    # the job is the programs' span; the data's check is theirs, not a hash of mrcemu's
    assert s["completed"] and s["job_completion_s"] == 2.5 and s["integrity_ok"] is None
    lat, bw = s["programs"]
    assert (bw["host"], bw["exit"], bw["started_at_s"], bw["ran_s"]) == ("h0", 0, 0.5, 2.0)
    # MiB/s as perftest prints them, in Mb/s: 2 MiB/s average
    assert bw["perftest"]["average_mbps"] == round(2 * (1 << 20) * 8 / 1e6, 3)
    assert lat["perftest"]["typical_one_way_s"] == 40e-6
    # the fabric's figures from the NICs' records, as for any workload: the failover
    assert s["faults"][0]["retire_after_loss_rtts_max"] == 3.0
    # at full speed (4 times slower): times shrink, rates grow, perftest's as well
    f = at_full_speed(s, 4.0)
    assert f["programs"][1]["ran_s"] == 0.5
    assert f["programs"][1]["perftest"]["average_mbps"] == round(
        bw["perftest"]["average_mbps"] * 4, 6)
    assert f["programs"][0]["perftest"]["typical_one_way_s"] == 10e-6
    rep = {"scenario": "t", "topology": "default", "description": "", "started": "now",
           "machine": "m", "partial": False, "slowdown": 4.0, "transports": {"mrc": f}}
    md = report.markdown(rep)
    assert "## MRC: `h0$ ib_write_bw h7`" in md and "exit 0" in md
    assert "its one-way latency: 10.00 us typical" in md
    assert BW_OUTPUT.strip() in md  # what it printed, as it printed it
    assert "the programs' own check" in md


def test_a_failed_programs_run_names_it_and_has_no_job_time():
    s = analysis.summarize(exec_record(client_exit=1), LAYOUT, 64)
    assert not s["completed"] and s["job_completion_s"] is None and s["failed"]
    assert s["programs"][1]["perftest"] is None
    rep = {"scenario": "t", "topology": "default", "description": "", "started": "now",
           "machine": "m", "partial": False, "transports": {"mrc": s}}
    assert ["outcome", "FAILED: h0: ib_write_bw h7 (exit 1)"] in report.table_rows(rep)[1]
    assert "Couldn't connect" in report.markdown(rep)


def test_a_steps_time_is_its_last_writes_end_against_its_busiest_host_at_line_rate():
    from mrcemu.scenario.analysis import steps
    from mrcemu.topology import load

    topo = load("default")  # 8 ports of 20 Mb/s: 20 MB/s a host
    mb = 2_000_000  # 0.1 s of a host's line rate

    def flow(s, d, ph, t0, t1, size=mb):
        return {"src": s, "dst": d, "size": size, "phase": ph, "posted_at": t0, "done_at": t1}

    raw = {"iterations": [{"index": 0, "flows": [
        flow(0, 4, 0, 1.0, 1.1), flow(1, 5, 0, 1.0, 1.4),  # step 0: the slow flow's end
        # step 1: h1's write split over two QPs, one flow; h6 receives two writes
        flow(1, 6, 1, 1.4, 1.6, mb // 2), flow(1, 6, 1, 1.4, 1.6, mb // 2),
        flow(2, 6, 1, 1.4, 1.6),
        flow(3, 7, 2, 1.6, None)]}]}  # step 2 never ended: not a step
    got = steps(raw, topo)
    assert got["count"] == 2
    s0, s1 = got["each"]
    assert (s0["step"], s0["time_s"], s0["ideal_s"]) == (0, 0.4, 0.1)
    assert s0["efficiency"] == 0.25 and s0["flow_share"] == [1.0, 0.25]
    assert (s1["time_s"], s1["ideal_s"], s1["efficiency"]) == (0.2, 0.2, 1.0)
    assert s1["flow_share"] == [0.5, 0.5]  # two flows, not three: QPs of a pair are one
    assert got["efficiency_min"] == 0.25 and got["efficiency_mean"] == 0.625
    assert steps({"iterations": [{"index": 0, "flows": []}]}, topo) is None
