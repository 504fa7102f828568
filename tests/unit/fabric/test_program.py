"""Programming a fabric's nodes (mrcemu/fabric/program.py): no root, no fabric. Whether
the kernels end up right is the integration tests' (`mrcemu check` on each fabric)."""

from __future__ import annotations

import pytest

from mrcemu.fabric import program
from mrcemu.topology import Layout, load
from mrcemu.topology.routes import tables

GONE = 2**22 + 1  # above the kernel's largest PID: no such namespace


def test_a_node_that_cannot_be_entered_stops_the_programming_named(monkeypatch):
    entered: list[int] = []
    real = program.iproute
    monkeypatch.setattr(program, "iproute", lambda pid: entered.append(pid) or real(pid))
    layout = Layout(load("small"))
    with pytest.raises(RuntimeError, match=rf"programming h0 \(PID {GONE}\): "
                                           "FileNotFoundError"):
        program.program_nodes(layout, tables(layout), {"h0": GONE, "h1": GONE + 1})
    assert entered == [GONE]  # it stopped at the first
