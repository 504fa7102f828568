"""`--slowdown auto`'s model: a costlier machine or a busier workload gets a larger
slowdown, a cheaper one a smaller; the pick is the smallest on the ladder that fits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrcemu import slowdown as auto
from mrcemu.scenario.model import load

ALL_TO_ALL = [[(a, b, 1) for a in range(8) for b in range(8) if a != b]]
ONE_PAIR = [[(0, 7, 1)]]


def cal(us: float, cpus: int = 2) -> auto.Calibration:
    return auto.Calibration(cpu_us_per_packet=us, packets=1000, seconds=1.0, busy_share=0.3,
                            cpus=cpus, slowdown=auto.CAL_SLOWDOWN, topology="default:x",
                            machine="test", measured="2026-11-29T10:00:00")


def demand(phases: list) -> float:
    return auto.demand_pps(20.0, 9000, 8, phases)


def test_a_costlier_machine_gets_a_larger_slowdown():
    d = demand(ALL_TO_ALL)
    cheap, dear = auto.pick(cal(20), d, 2), auto.pick(cal(200), d, 2)
    assert dear.slowdown > cheap.slowdown
    # and each is the smallest on the ladder that keeps the expected load in bounds
    for p in (cheap, dear):
        assert p.expected_load <= auto.LOAD_LIMIT
        i = auto.LADDER.index(p.slowdown)
        assert i == 0 or auto.load_at(p.calibration, d, auto.LADDER[i - 1], 2) > auto.LOAD_LIMIT


def test_more_cpus_or_a_lighter_workload_need_less():
    d = demand(ALL_TO_ALL)
    assert auto.pick(cal(100, 8), d, 8).slowdown < auto.pick(cal(100, 2), d, 2).slowdown
    assert auto.pick(cal(100), demand(ONE_PAIR), 2).slowdown < auto.pick(cal(100), d, 2).slowdown


def test_a_cheap_enough_machine_runs_at_full_speed():
    assert auto.pick(cal(1), demand(ONE_PAIR), 2).slowdown == 1.0


def test_a_machine_too_slow_for_the_ladder_gets_its_last_step_and_says_the_load():
    p = auto.pick(cal(1e6), demand(ALL_TO_ALL), 2)
    assert p.slowdown == auto.LADDER[-1] and p.expected_load > auto.LOAD_LIMIT


@given(st.floats(1, 5000), st.floats(1, 5000))
def test_the_pick_never_falls_as_the_cost_rises(a, b):
    d = demand(ALL_TO_ALL)
    lo, hi = sorted((a, b))
    assert auto.pick(cal(lo), d, 2).slowdown <= auto.pick(cal(hi), d, 2).slowdown


def test_demand_counts_the_ports_that_can_be_busy_at_once():
    one = auto.port_pps(20.0, 9000)
    assert demand(ONE_PAIR) == pytest.approx(8 * one)
    assert demand(ALL_TO_ALL) == pytest.approx(8 * 8 * one)
    # an incast: seven senders, one receiver: the receiver's ports bound it
    assert demand([[(s, 7, 1) for s in range(7)]]) == pytest.approx(8 * one)
    # the busiest phase counts
    assert demand([[(0, 1, 1)], [(0, 1, 1), (2, 3, 1)]]) == pytest.approx(16 * one)
    sc = load("failover")
    assert auto.demand_pps(sc.topology.host_link_mbps, sc.topology.mtu, sc.topology.planes,
                           sc.workload.phases(sc.topology.hosts)) == pytest.approx(
        demand(ALL_TO_ALL))


def test_a_run_not_faithful_is_told_the_next_step():
    assert auto.next_slowdown(1.0) == 1.5
    assert auto.next_slowdown(4.0) == 5.0
    assert auto.next_slowdown(7.0) == 8.0
    assert auto.next_slowdown(auto.LADDER[-1]) == 2 * auto.LADDER[-1]


def test_the_pick_says_how_it_was_made():
    p = auto.pick(cal(100), demand(ALL_TO_ALL), 2)
    j = p.to_json()
    assert j["how"] == "auto" and j["slowdown"] == p.slowdown
    assert j["calibration"]["cpu_us_per_packet"] == 100
    assert f"picked {p.slowdown:g}" in j["why"] and "100 us" in j["why"]
    assert auto.Calibration.from_json(j["calibration"]) == p.calibration


def test_the_calibration_message_fills_its_time_at_line_rate():
    size = auto.cal_message_bytes(20.0, 8, 8)
    per_host = 7 * size
    line = 8 * 20e6 / 8 / auto.CAL_SLOWDOWN
    assert auto.CAL_SECONDS <= per_host / line < auto.CAL_SECONDS * 1.01
    with pytest.raises(ValueError):
        auto.cost_us(1.0, 0)
