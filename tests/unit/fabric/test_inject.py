"""Fault injection's drop rules: only the switches a fault touches are rewritten, each
from every fault active on it (no root: the agent's calls are recorded)."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from mrcemu.fabric import inject
from mrcemu.topology import Layout, load
from mrcemu.topology.faults import Fault, targets

LAYOUT = Layout(load("small"))  # h0, h1 on one leaf of each plane; h2, h3 on the other
PIDS = {name: 1000 + n for n, name in enumerate(LAYOUT.nodes)}


class Agent:
    """Stands in for the servers: the nft rules each call would write."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, list]] = []

    def of(self, node: str) -> str:
        return "here"

    def call(self, server: str, op: str, pid: int, rules: list) -> None:
        assert op == "nft"
        self.calls.append((pid, rules))


@pytest.fixture
def agent(monkeypatch) -> Agent:
    a = Agent()
    monkeypatch.setattr(inject, "_servers", lambda: a)
    return a


def node_of(pid: int) -> str:
    return next(n for n, p in PIDS.items() if p == pid)


def test_a_fault_rewrites_its_own_switches_only_each_with_every_fault_on_it(agent):
    h0, h1, h2 = (Fault("host-loss", h, 1.0) for h in ("h0", "h1", "h2"))
    active = {f.key: asdict(f) for f in (h0, h1, h2)}
    inject._sync_nft(LAYOUT, PIDS, active, inject._switches(LAYOUT, h1))
    mine = inject._switches(LAYOUT, h1)
    assert mine and mine.isdisjoint(inject._switches(LAYOUT, h2))
    assert {node_of(pid) for pid, _ in agent.calls} == mine  # not h2's leaves
    for pid, rules in agent.calls:
        # h0's port on this leaf as well as h1's: the rules are the switch's whole set
        want = {i.name for f in (h0, h1) for i in targets(LAYOUT, f) if i.node == node_of(pid)}
        assert len(want) == 2 and {port for port, _ in rules} == want
        assert all("numgen random mod 1000000 < 10000" in m for _, m in rules)


def test_a_healed_faults_switches_are_left_with_the_others_rules_or_none(agent):
    h0, h1 = Fault("host-loss", "h0", 1.0), Fault("host-loss", "h1", 1.0)
    active = {h0.key: asdict(h0)}  # h1 healed: gone from the active faults
    inject._sync_nft(LAYOUT, PIDS, active, inject._switches(LAYOUT, h1))
    assert {node_of(pid) for pid, _ in agent.calls} == inject._switches(LAYOUT, h1)
    for pid, rules in agent.calls:
        assert {port for port, _ in rules} == {
            i.name for i in targets(LAYOUT, h0) if i.node == node_of(pid)}
