"""The failure study's plan and its reading of a report (pure: no fabric)."""

from __future__ import annotations

import pytest

from mrcemu.scenario.model import default_step_size, from_mapping
from mrcemu.study import failures
from mrcemu.topology import load


def test_trials_draw_a_leaf_spine_link_and_a_moment_from_the_seed_kinds_in_turn():
    got = failures.trials("default", 6, seed=3)
    assert got == failures.trials("default", 6, seed=3)
    assert got != failures.trials("default", 6, seed=4)
    assert [t.kind for t in got] == ["link-down", "gray"] * 3
    assert [t.step for t in got] == [1, 4, 7, 10, 13, 16]
    links = set(failures.fabric_links("default"))
    assert len(links) == 8 * 2 * 4  # planes x leaves x spines
    assert all(t.target in links and 0 <= t.at_share < 1 for t in got)
    assert all("h" not in t.target for t in got)


@pytest.mark.parametrize("transport", failures.TRANSPORTS)
def test_the_plan_is_a_scenario_of_steps_in_threes_a_fault_inside_each_second(transport):
    sc = from_mapping(failures.mapping(16, transport, 4, seed=1), "<t>", "t")
    assert sc.topology.name == failures.topology_of(16, transport)
    steps = sc.workload.phases(16)
    assert len(steps) == 12
    assert all(steps[i] == steps[i + 1] == steps[i + 2] for i in range(0, 12, 3))
    assert steps[0] != steps[3]
    ideal = failures.ideal_step_s(sc.topology.name)
    assert [f.step for f in sc.faults] == [1, 4, 7, 10]
    assert all(0 <= f.at < ideal and f.duration is None for f in sc.faults)
    assert sc.map_interval_ms == 0


def _summary(hosts: int, twin: list[float], hit: list[float], crossed: int,
             after: list[float] | None = None) -> dict:
    """A report's transport part: one trial, each flow's time in its twin, with the
    fault and after it (seconds), a step's time their longest."""
    topo = load(failures.topology_of(hosts, "mrc"))
    port = topo.planes * topo.host_link_mbps * 1e6 / 8
    size = default_step_size(topo)

    def step(k: int, times: list[float]) -> dict:
        return {"iteration": 0, "step": k, "time_s": max(times),
                "flow_share": [size / t / port for t in times]}

    return {"steps": {"each": [step(0, twin), step(1, hit), step(2, after or twin)]},
            "step_faults": [{"step": 1, "kind": "gray", "target": "p0l0-p0s0",
                             "at_s": 0.1, "error": None, "link_packets": 5,
                             "link_packets_step_before": crossed}]}


def test_a_trial_reads_the_extra_time_in_round_trips_and_whom_it_idled():
    rtt = failures.base_rtt_s("default")
    one_late = [0.6] * 7 + [0.6 + 2 * rtt]
    (row,) = failures.trial_rows(_summary(8, [0.6] * 8, one_late, crossed=12), 8, "mrc")
    assert row["crossed"] and row["extra_rtts"] == pytest.approx(2, abs=0.01)
    assert row["after_rtts"] == 0  # healed, the step after is its twin's again
    # one flow late, every host waits for it: eight hosts idled for one flow's delay
    assert row["amplification"] == pytest.approx(8, abs=0.01)
    (row,) = failures.trial_rows(_summary(8, [0.6] * 8, [0.6 + rtt] * 8, crossed=12), 8, "mrc")
    assert row["amplification"] == pytest.approx(1, abs=0.01)  # every flow as late
    (row,) = failures.trial_rows(_summary(8, [0.6] * 8, [0.6] * 8, crossed=0), 8, "mrc")
    assert row["crossed"] is False and row["amplification"] is None and row["extra_rtts"] == 0
    slow_after = [0.6] * 7 + [0.6 + 3 * rtt]
    (row,) = failures.trial_rows(_summary(8, [0.6] * 8, one_late, 12, slow_after), 8, "mrc")
    assert row["after_rtts"] == pytest.approx(3, abs=0.01)  # what it cost once healed


def test_a_summary_splits_the_trials_the_link_carried_from_the_others():
    rows = [{"kind": "gray", "crossed": True, "extra_s": 0.2, "extra_rtts": 3.0,
             "amplification": 8.0, "after_rtts": 5.0},
            {"kind": "gray", "crossed": True, "extra_s": 0.1, "extra_rtts": 1.0,
             "amplification": 4.0, "after_rtts": 0.0},
            {"kind": "gray", "crossed": False, "extra_s": 0.0, "extra_rtts": 0.1,
             "amplification": None},
            {"kind": "gray", "error": "not injected"},
            {"kind": "link-down", "crossed": True, "extra_s": 0.5, "extra_rtts": 7.0,
             "amplification": 2.0}]
    s = failures.summarize(rows, 8, "mrc")
    g = s["gray"]
    assert (g["trials"], g["acted"], g["p_hit"]) == (4, 3, 0.667)
    assert (g["extra_rtts_median"], g["extra_rtts_max"]) == (2.0, 3.0)
    assert g["amplification_median"] == 6.0 and g["missed_extra_rtts_median"] == 0.1
    assert (g["after_rtts_median"], g["after_rtts_max"]) == (2.5, 5.0)
    assert s["link-down"]["p_hit"] == 1.0 and s["link-down"]["missed_extra_rtts_median"] is None


def test_growth_means_every_larger_size_worse():
    assert failures.grows([1.0, 2.0, 3.0])
    assert not failures.grows([1.0, 2.0, 1.5]) and not failures.grows([2.0])
