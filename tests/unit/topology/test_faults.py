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
