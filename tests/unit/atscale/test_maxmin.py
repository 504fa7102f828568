"""Max-min fair rates on cases whose answer is known by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu.atscale.maxmin import rates


def test_flows_sharing_one_link_split_it_equally():
    assert rates([{"a": 1.0}] * 4, {"a": 1.0}) == pytest.approx([0.25] * 4)


def test_a_flow_held_back_elsewhere_leaves_its_share_to_the_others():
    # f0 crosses a and a slow link b; f1 and f2 only a: f0 gets b's 0.1, the rest 0.45
    got = rates([{"a": 1.0, "b": 1.0}, {"a": 1.0}, {"a": 1.0}], {"a": 1.0, "b": 0.1})
    assert got == pytest.approx([0.1, 0.45, 0.45])


def test_the_parking_lot():
    # the long flow crosses both links, each short flow one: each link has two flows,
    # so every flow gets a half
    got = rates([{"a": 1.0, "b": 1.0}, {"a": 1.0}, {"b": 1.0}], {"a": 1.0, "b": 1.0})
    assert got == pytest.approx([0.5, 0.5, 0.5])


def test_a_sprayed_flow_loads_each_path_by_its_share():
    # sprayed over a and b, half on each, beside a flow on a alone: a's two flows rise
    # together until a fills at 1.0 = r/2 + r, so r = 2/3 each
    got = rates([{"a": 0.5, "b": 0.5}, {"a": 1.0}], {"a": 1.0, "b": 1.0})
    assert got == pytest.approx([2 / 3, 2 / 3])


def test_a_flow_on_no_link_is_unbounded_and_no_rate_exceeds_a_capacity():
    got = rates([{}, {"a": 1.0}], {"a": 3.0})
    assert got[0] == float("inf") and got[1] == pytest.approx(3.0)


_flows = st.lists(st.dictionaries(st.sampled_from("abcdef"), st.sampled_from([0.25, 0.5, 1.0]),
                                  min_size=1, max_size=3), min_size=1, max_size=12)
_caps = st.fixed_dictionaries({k: st.sampled_from([0.5, 1.0, 2.0, 3.0]) for k in "abcdef"})


@settings(max_examples=200, deadline=None)
@given(_flows, _caps)
def test_every_flow_has_a_full_bottleneck_where_no_flow_gets_more(flows, caps):
    # the definition of max-min fairness: no link over its capacity, and each flow
    # crosses a full link on which its rate is the largest
    got = rates(flows, caps)
    load = {k: sum(r * f.get(k, 0.0) for r, f in zip(got, flows, strict=True)) for k in caps}
    assert all(load[k] <= caps[k] * (1 + 1e-6) for k in caps)
    for r, f in zip(got, flows, strict=True):
        assert any(load[k] >= caps[k] * (1 - 1e-6)
                   and all(r >= r2 - 1e-9 for r2, f2 in zip(got, flows, strict=True)
                           if k in f2)
                   for k in f)
