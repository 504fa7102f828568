"""The collision study's plan and figures, pure: which runs measure a size, and what
their steps say together."""

from __future__ import annotations

import pytest

from mrcemu.scenario.model import from_mapping
from mrcemu.study import collisions as c


def test_a_size_runs_each_transport_alone_then_stepped_on_its_own_fabric():
    runs = c.plan(16, [1, 4])
    assert [r.label for r in runs] == ["mrc-alone", "mrc-steps", "roce-1qp-alone",
                                       "roce-1qp-steps", "roce-4qp-steps"]
    assert {r.topology for r in runs if r.transport == "mrc"} == {"rack4"}
    assert {r.topology for r in runs if r.transport == "roce"} == {"rack4-ecmp"}


@pytest.mark.parametrize("hosts", [8, 16, 32, 64])
def test_every_run_is_a_valid_scenario_whose_lone_flow_writes_the_steps_size(hosts):
    scs = {r.label: from_mapping(r.mapping(3, 7), "<test>", r.label)
           for r in c.plan(hosts, [1, 2])}
    alone, steps = scs["mrc-alone"].workload, scs["mrc-steps"].workload
    assert alone.kind == "single" and steps.kind == "permutation" and steps.steps == 3
    assert alone.size == steps.size == scs["roce-2qp-steps"].workload.size
    assert scs["roce-2qp-steps"].workload.qps == 2 and scs["roce-1qp-alone"].workload.qps == 1
    # the lone flow crosses leaves, as every permutation's flow does
    leaf = steps.leaf_of
    assert leaf[alone.src] != leaf[alone.dst]
    assert {sc.seed for sc in scs.values()} == {7}


def _steps(effs, shares):
    return {"each": [{"efficiency": e, "flow_share": s} for e, s in zip(effs, shares, strict=True)],
            "write_bdps": 8.0}


def test_a_row_is_the_steps_mean_spread_and_what_it_keeps_of_the_lone_flow():
    row = c.transport_row(_steps([0.2, 0.4, 0.3], [[0.8, 0.4], [0.4, 0.26], [0.2, None]]),
                          {"efficiency_mean": 0.8})
    assert row["steps"] == 3 and row["efficiency_mean"] == pytest.approx(0.3)
    assert row["efficiency_p10"] == pytest.approx(0.22)
    assert row["efficiency_p90"] == pytest.approx(0.38)
    assert row["of_alone"] == pytest.approx(0.375)
    # over the lone rate: 1, 1/2, 1/2, 0.325, 1/4 (the missing share left out)
    assert row["buckets"] == {"line rate": 1, "a half": 2, "a third": 1, "less": 1}


def test_a_transport_that_did_not_run_has_no_steps():
    assert c.transport_row(None, None) == {"steps": 0}


@pytest.mark.parametrize("share,name", [(0.99, "line rate"), (0.76, "line rate"),
                                        (0.5, "a half"), (0.42, "a half"),
                                        (0.34, "a third"), (0.30, "a third"),
                                        (0.25, "less"), (0.0, "less")])
def test_a_flow_goes_in_the_nearest_bucket(share, name):
    assert c.bucket(share) == name


def test_flat_and_falling():
    assert c.flat([0.82, 0.80, 0.84]) and not c.flat([0.82, 0.70])
    assert c.falls([0.4, 0.3, 0.2]) and not c.falls([0.4, 0.4]) and not c.falls([0.4])


def test_one_spine_puts_every_flow_of_a_leaf_on_one_link():
    # two leaves of four, one spine: four flows on each uplink, a quarter each
    exp = c.expected_buckets([0, 0, 0, 0, 1, 1, 1, 1], 1, 50, seed=3)
    assert exp == {"line rate": 0.0, "a half": 0.0, "a third": 0.0, "less": 1.0}


def test_many_spines_leave_almost_every_flow_alone():
    exp = c.expected_buckets([0, 0, 0, 0, 1, 1, 1, 1], 10_000, 200, seed=3)
    assert exp["line rate"] > 0.99


def test_the_four_by_four_case_gives_the_binomial_of_three_others_at_most():
    # four hosts a leaf, four spines: a flow is alone on its uplink with (3/4)^3; its
    # downlink can only add company, so line rate is rarer than that
    exp = c.expected_buckets([h // 4 for h in range(16)], 4, 400, seed=1)
    assert sum(exp.values()) == pytest.approx(1.0)
    assert exp["line rate"] < (3 / 4) ** 3
    assert exp["a half"] > exp["line rate"] > exp["less"]


def test_a_bucket_band_holds_the_expected_count():
    lo, hi = c.bucket_band(0.25, 64)
    assert lo < 16 < hi and 0 <= lo and hi <= 64
    assert c.bucket_band(0.0, 64) == (0, 0)


def test_a_row_judged_against_the_expectation_says_which_buckets_are_inside():
    row = {"buckets": {"line rate": 16, "a half": 32, "a third": 16, "less": 0}}
    got = c.bucket_expectation(row, 16, seed=1)
    assert set(got) == {"line rate", "a half", "a third", "less"}
    assert all(g["counted"] == row["buckets"][k] for k, g in got.items())
    assert got["a half"]["inside"] and got["a half"]["band"][0] < 32


def test_a_row_names_its_qps_and_the_runs_behind_it():
    assert c.row_qps("mrc") == 1 and c.row_qps("roce-16qp") == 16
    assert c.row_runs("mrc", [2, 8]) == ("mrc-alone", "mrc-steps")
    # RoCE's lone flow runs once, at the first count of QPs
    assert c.row_runs("roce-8qp", [2, 8]) == ("roce-2qp-alone", "roce-8qp-steps")
    labels = {r.label for r in c.plan(16, [2, 8])}
    assert {lab for r in ("mrc", "roce-2qp", "roce-8qp") for lab in c.row_runs(r, [2, 8])} \
        == labels
