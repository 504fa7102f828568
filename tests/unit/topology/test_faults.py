"""The fault model: one list of kinds, one parameter check for files and live faults."""

from __future__ import annotations

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.topology import Layout, load
from mrcemu.topology.faults import KINDS, Fault, FaultParamError, check, targets

SMALL = Layout(load("small"))


@pytest.mark.parametrize("fault, field", [
    (Fault("degrade", "p0l0-p0s0", 0), "value"),
    (Fault("degrade", "p0l0-p0s0", None), "value"),
    (Fault("degrade", "p0l0-p0s0", 101), "value"),
    (Fault("loss", "p0l0-p0s0", -1), "value"),
    (Fault("loss", "p0l0-p0s0", None), "value"),
    (Fault("flap", "p0l0-p0s0", period=None, duty=0.5), "period"),
    (Fault("flap", "p0l0-p0s0", period=0.01, duty=0.5), "period"),
    (Fault("flap", "p0l0-p0s0", period=0.5, duty=1.0), "duty"),
])
def test_out_of_range_parameters_are_refused_naming_the_field(fault, field):
    with pytest.raises(FaultParamError) as e:
        check(fault)
    assert e.value.field == field and f"--{field}" in str(e.value)


@pytest.mark.parametrize("fault", [
    Fault("degrade", "p0l0-p0s0", 100), Fault("degrade", "p0l0-p0s0", 0.5),
    Fault("loss", "p0l0-p0s0", 0), Fault("loss", "all-spines", 100),
    Fault("flap", "p0l0-p0s0", period=0.05, duty=0.5), Fault("gray", "p0s1"),
    Fault("plane-down", "1"),
])
def test_sound_parameters_pass(fault):
    check(fault)
    assert targets(SMALL, fault)


def test_unknown_kind_lists_the_kinds():
    with pytest.raises(MrcemuError, match="link-down"):
        check(Fault("melt", "p0s0"))


def test_one_list_of_kinds_serves_the_cli_and_scenario_files():
    from mrcemu.cli import fail
    from mrcemu.scenario.model import FAULT_KINDS

    kind_param = next(p for p in fail.params if p.name == "kind")
    assert tuple(kind_param.type.choices) == KINDS and FAULT_KINDS is KINDS


def test_a_path_loss_names_one_pair_and_spine_and_acts_where_it_enters_the_core():
    from mrcemu.topology.faults import affects, links_of, path_target
    from mrcemu.topology.paths import make_ev

    f = Fault("path-loss", "h0-h3/p1s0", 20)
    check(f)
    pt = path_target(SMALL, f.target)
    assert (pt.src, pt.dst, pt.plane, pt.spine) == (0, 3, 1, 0)
    # h0 is on leaf 0: its plane-1 leaf's port towards spine p1s0.
    (port,) = targets(SMALL, f)
    assert (port.node, port.peer_node) == ("p1l0", "p1s0")
    hit = affects(SMALL, f)
    ev = make_ev(1, 0, 5)
    assert hit(0, 3, ev)
    assert not hit(3, 0, ev)  # one direction: the reverse path is another's
    assert not hit(0, 3, make_ev(1, 1, 5)) and not hit(0, 3, make_ev(0, 0, 5))
    assert not hit(1, 3, ev)
    assert links_of(SMALL, f) == set()  # no link is broken: a link map has nothing to find


@pytest.mark.parametrize("target, says", [
    ("h0-h3", "no spine"), ("h0-h9/p1s0", "no host 'h9'"), ("h0-h3/p1l0", "no spine"),
    ("p0l0-h3/p1s0", "no host"), ("h0-h1/p1s0", "share a leaf"), ("h2-h2/p0s1", "share"),
])
def test_a_path_loss_target_that_is_no_path_says_why(target, says):
    with pytest.raises(MrcemuError, match=says):
        targets(SMALL, Fault("path-loss", target, 20))


def test_a_path_loss_needs_a_percentage():
    with pytest.raises(FaultParamError, match="value"):
        check(Fault("path-loss", "h0-h3/p1s0", None))


def test_a_host_loss_acts_on_every_leaf_port_to_the_host():
    from mrcemu.topology.faults import affects
    from mrcemu.topology.paths import make_ev

    f = Fault("host-loss", "h2", 0.1)
    check(f)  # a tenth of a percent is a loss rate too
    ports = targets(SMALL, f)
    assert sorted((i.node, i.peer_node) for i in ports) == [("p0l1", "h2"), ("p1l1", "h2")]
    hit = affects(SMALL, f)
    assert hit(0, 2, make_ev(0, 1, 0)) and hit(2, 0, make_ev(1, 0, 0))
    assert not hit(0, 3, make_ev(0, 1, 0))
    with pytest.raises(MrcemuError, match="no host"):
        targets(SMALL, Fault("host-loss", "p0l1", 1))
