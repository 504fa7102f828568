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


def test_nodes_are_dealt_one_share_a_spare_core_when_each_share_is_worth_a_worker():
    names = [f"n{k}" for k in range(56)]
    assert program.shares(names, 1) == [names]
    assert program.shares(names[:program.MIN_SHARE * 2 - 1], 2) == [
        names[:program.MIN_SHARE * 2 - 1]]  # too few for a second share
    two = program.shares(names, 2)
    assert two == [names[0::2], names[1::2]]
    many = program.shares(names, 64)
    assert len(many) == min(program.MAX_WORKERS + 1, 56 // program.MIN_SHARE)
    assert sorted(n for s in many for n in s) == sorted(names)


def test_a_workers_failure_is_raised_named_and_the_worker_is_gone(monkeypatch):
    """The second share goes to a worker process (a fresh interpreter, fed on stdin):
    its first node that cannot be entered comes back as the error, named."""
    layout = Layout(load("default"))
    names = sorted(layout.nodes)[:program.MIN_SHARE * 2]
    nodes = {n: GONE + k for k, n in enumerate(names)}
    own: list[dict] = []
    monkeypatch.setattr(program.os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(program, "_program_each", lambda _l, _t, share: own.append(share))
    started: list = []
    real_start = program._start_worker
    monkeypatch.setattr(program, "_start_worker",
                        lambda topo, share: started.append(real_start(topo, share))
                        or started[-1])
    first = names[1]
    with pytest.raises(RuntimeError, match=rf"programming {first} \(PID {nodes[first]}\): "
                                           "FileNotFoundError"):
        program.program_nodes(layout, tables(layout), nodes)
    assert own == [{n: nodes[n] for n in names[0::2]}]  # the caller's own share
    (worker,) = started
    assert worker.returncode == 1
