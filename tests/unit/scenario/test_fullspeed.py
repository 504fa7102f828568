"""A slowed run's summary in full-speed seconds and Mb/s (mrcemu/scenario/fullspeed.py)."""

from __future__ import annotations

import pytest

from mrcemu.scenario.fullspeed import at_full_speed, is_rate, is_time

SUMMARY = {
    "job_completion_s": 40.0, "iteration_s": [20.0, 20.0], "iteration_s_p50": 20.0,
    "goodput_mbps": 70.0, "bytes_delivered": 1000, "retransmits": 7, "cost_rtts": 0.5,
    "per_flow": {"h0-h7": {"messages": 3, "active_s": 40.0, "goodput_mbps": 35.0}},
    "per_size": {"262144": {"iterations": 2, "transport_s_p50": 8.0, "busbw_mbps": None}},
    "goodput_series": {"bin_s": 0.05, "t": [0.0, 0.05], "total_mbps": [0.0, 80.0],
                       "per_plane_mbps": [[0.0, 10.0], [0.0, 10.0]]},
    "flow_paths": {"bin_s": 0.05, "flows": {"h0-h4": {"p2s0": [3, 4]}}},
    "ev_states": {"changes": [[4.0, "h0", "h7", "0xc0000000", "GOOD", "STOPPED", "overdue"]],
                  "evs_total": 80},
    "faults": [{"kind": "switch-down", "at_s": 1.6, "rto_s_max": 0.8, "window_packets": 64,
                "goodput_before_mbps": 75.0, "stop_rtts": 1.5, "integrity": True,
                "failed_paths": [{"ev": "0x1", "sends_after_fault_s": [1.6, 2.0],
                                  "first_loss_s": None, "data_after_retire": 0}]}],
    "counters": {"rtos": 0, "sacks_rx": 4},
    "fidelity": {"ok": True, "timer_late_p99_s": 0.002, "hosts": {"h0": {"wall_s": 41.0}}},
}


def test_times_are_divided_and_rates_multiplied_by_the_slowdown():
    s = at_full_speed(SUMMARY, 4)
    assert s["job_completion_s"] == 10.0 and s["iteration_s"] == [5.0, 5.0]
    assert s["iteration_s_p50"] == 5.0 and s["goodput_mbps"] == 280.0
    assert s["per_flow"]["h0-h7"] == {"messages": 3, "active_s": 10.0, "goodput_mbps": 140.0}
    assert s["per_size"]["262144"] == {"iterations": 2, "transport_s_p50": 2.0,
                                       "busbw_mbps": None}
    g = s["goodput_series"]
    assert g["bin_s"] == 0.0125 and g["t"] == [0.0, 0.0125] and g["total_mbps"] == [0.0, 320.0]
    assert g["per_plane_mbps"] == [[0.0, 40.0], [0.0, 40.0]]
    assert s["flow_paths"] == {"bin_s": 0.0125, "flows": {"h0-h4": {"p2s0": [3, 4]}}}
    assert s["ev_states"]["changes"] == [[1.0, "h0", "h7", "0xc0000000", "GOOD", "STOPPED",
                                          "overdue"]]
    (f,) = s["faults"]
    assert f["at_s"] == 0.4 and f["rto_s_max"] == 0.2 and f["goodput_before_mbps"] == 300.0
    assert f["failed_paths"][0]["sends_after_fault_s"] == [0.4, 0.5]


def test_counts_ratios_and_the_hosts_own_measures_are_left_as_they_are():
    s = at_full_speed(SUMMARY, 4)
    for key in ("bytes_delivered", "retransmits", "cost_rtts", "counters", "fidelity"):
        assert s[key] == SUMMARY[key], key
    (f,) = s["faults"]
    assert (f["window_packets"], f["stop_rtts"], f["integrity"]) == (64, 1.5, True)
    assert f["failed_paths"][0]["first_loss_s"] is None
    assert f["failed_paths"][0]["data_after_retire"] == 0
    assert s["ev_states"]["evs_total"] == 80
    assert SUMMARY["job_completion_s"] == 40.0  # the input is not changed


def test_a_run_at_full_speed_is_as_measured():
    assert at_full_speed(SUMMARY, 1) is SUMMARY


@pytest.mark.parametrize("key,time,rate", [
    ("at_s", True, False), ("iteration_s_p50", True, False), ("rto_s_max", True, False),
    ("t", True, False), ("goodput_mbps", False, True), ("per_plane_mbps", False, True),
    ("cost_rtts", False, False), ("evs_total", False, False),
    ("paths_detected_within_2_rto_of_first_use", False, False), ("window_packets", False,
                                                                 False)])
def test_what_a_key_holds_is_read_from_its_words(key, time, rate):
    assert (is_time(key), is_rate(key)) == (time, rate)
