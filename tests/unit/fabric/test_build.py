"""A local fabric's links planned, not made one by one (`build.PlannedVeth`)."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

from mrcemu.fabric.build import PlannedVeth
from mrcemu.fabric.remote import LinkPlan
from mrcemu.topology.cluster import LOCAL, Server

HERE = Server("local", LOCAL)


def test_a_local_link_is_one_veth_line_for_the_batch_and_runs_nothing():
    plan = LinkPlan()
    link = object.__new__(PlannedVeth)  # without Mininet's constructor (its Intf objects)
    link.plan, link.server = plan, HERE
    ran: list[str] = []
    a = SimpleNamespace(pid=101, cmd=ran.append)
    b = SimpleNamespace(pid=202, cmd=ran.append)
    assert link.makeIntfPair("h0-p0", "p0l0-h0", "02:00:00:00:00:01", "02:00:00:00:00:02",
                             a, b, deleteIntfs=False)
    assert ran == []  # nothing in the nodes' shells: the batch makes it
    (line,) = plan.lines[HERE]
    assert shlex.split(line) == ["link", "add", "name", "h0-p0", "address",
                                 "02:00:00:00:00:01", "netns", "101", "type", "veth", "peer",
                                 "name", "p0l0-h0", "address", "02:00:00:00:00:02",
                                 "netns", "202"]
