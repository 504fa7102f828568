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


def verdict(timer: float, release: float = 0.0, send: float = 0.0, ok: bool = True,
            reasons: tuple[str, ...] = ()) -> dict:
    from mrcemu import fidelity

    th = fidelity.THRESHOLDS
    return {"ok": ok, "reasons": list(reasons), "timer_late_p99_s": timer * th.timer_p99_s,
            "release_late_p99_s": release * th.timer_p99_s,
            "send_late_p99_s": send * th.send_p99_s,
            "thresholds": {"timer_p99_s": th.timer_p99_s, "send_p99_s": th.send_p99_s}}


def test_a_probe_names_its_worst_lateness_as_a_share_of_its_limit():
    assert auto.lateness_share(verdict(0.2, 0.5, 0.3)) == (0.5, "delay-line releases, p99")
    assert auto.lateness_share(verdict(0.9, 0.5, 1.2, ok=False)) == (1.2, "paced sends, p99")
    # not faithful for another reason (frames dropped): counted as at the limit
    share, why = auto.lateness_share(verdict(0.1, ok=False, reasons=("the kernel dropped 3",)))
    assert share == 1.0 and "dropped" in why


def test_programs_that_keep_the_nics_on_time_keep_the_packets_pick():
    assert auto.settle(1.0, 0.2) == 1.0
    assert auto.settle(3.0, auto.PROBE_MARGIN) == 3.0


@given(st.sampled_from(auto.LADDER[:-4]), st.floats(0.0, 8.0))
def test_late_programs_slow_the_run_just_enough_for_the_margin(k0, share):
    k = auto.settle(k0, share)
    assert k in auto.LADDER and k >= k0
    if share * k0 / auto.LADDER[-1] > auto.PROBE_MARGIN:  # beyond the ladder: its last
        assert k == auto.LADDER[-1]
        return
    # the lateness, as long on the machine's clock, under the margin of the longer limit
    assert share * k0 / k <= auto.PROBE_MARGIN
    i = auto.LADDER.index(k)
    assert k == k0 or share * k0 / auto.LADDER[i - 1] > auto.PROBE_MARGIN


def test_a_probed_pick_says_what_the_programs_cost():
    probe = auto.Probe(slowdown=1.0, seconds=2.7, share=0.9, worst="timers, p99",
                       machine="test", measured="2026-12-07T16:00:00")
    p = auto.pick(cal(100), demand(ONE_PAIR), 2)
    assert p.slowdown == 1.0
    from dataclasses import replace

    q = replace(p, slowdown=auto.settle(1.0, probe.share), probe=probe)
    assert q.slowdown == 2.0
    assert "its programs, run 2.7 s at 1, kept the NICs late by at most 0.90" in q.describe()
    assert q.to_json()["probe"]["share"] == 0.9 and q.to_json()["slowdown"] == 2.0
    assert "probe" not in p.to_json()
