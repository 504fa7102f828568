"""A split fabric's links, planned as Mininet's cluster classes add them and made a
server at a time (mrcemu/fabric/remote.py, the agent's `make_links`)."""

from __future__ import annotations

import os
import pty
import shlex
import subprocess
import termios
from types import SimpleNamespace

from mrcemu.fabric import agent
from mrcemu.fabric.remote import LINK_MTU, VXLAN_PORT, LinkPlan, PlannedLink, raw_if_tty
from mrcemu.topology.cluster import LOCAL, Server

HERE = Server("local", LOCAL, underlay="mrcemu-ul")
SRV1 = Server("srv1", "fd00::2", underlay="u0")


def planned(plan: LinkPlan, a, b, vni: int = 7) -> PlannedLink:
    # the Link without Mininet's constructor, which would make its Intf objects
    link = object.__new__(PlannedLink)
    link.plan, link.vni, link.node1, link.node2 = plan, vni, a, b
    return link


def plan_with_underlay() -> LinkPlan:
    plan = LinkPlan()
    plan._underlay = {("local", "srv1"): "fd00::1", ("srv1", "local"): "fd00::2"}
    return plan


def test_a_link_on_one_server_is_one_veth_line_made_in_both_nodes():
    plan = plan_with_underlay()
    a, b = SimpleNamespace(on=SRV1, pid=101), SimpleNamespace(on=SRV1, pid=202)
    assert planned(plan, a, b).makeIntfPair("p0l0-s0", "p0s0-l0", "02:00:00:00:00:01",
                                            "02:00:00:00:00:02")
    assert list(plan.lines) == [SRV1]
    (line,) = plan.lines[SRV1]
    assert shlex.split(line) == ["link", "add", "name", "p0l0-s0", "address",
                                 "02:00:00:00:00:01", "netns", "101", "type", "veth", "peer",
                                 "name", "p0s0-l0", "address", "02:00:00:00:00:02",
                                 "netns", "202"]


def test_a_link_between_servers_is_a_vxlan_port_on_each_made_in_its_node():
    plan = plan_with_underlay()
    h, leaf = SimpleNamespace(on=HERE, pid=11), SimpleNamespace(on=SRV1, pid=22)
    planned(plan, h, leaf, vni=9).makeIntfPair("h0-p0", "p0l0-h0", "02:aa", "02:bb")
    (here,), (there,) = plan.lines[HERE], plan.lines[SRV1]
    for line, name, mac, pid, remote, local, dev in (
            (here, "h0-p0", "02:aa", "11", "fd00::2", "fd00::1", "mrcemu-ul"),
            (there, "p0l0-h0", "02:bb", "22", "fd00::1", "fd00::2", "u0")):
        w = shlex.split(line)
        assert w[:3] == ["link", "add", name] and w[w.index("address") + 1] == mac
        assert w[w.index("netns") + 1] == pid and w[w.index("mtu") + 1] == str(LINK_MTU)
        assert w[w.index("type") + 1:w.index("type") + 4] == ["vxlan", "id", "9"]
        assert w[w.index("remote") + 1] == remote and w[w.index("local") + 1] == local
        assert w[w.index("dstport") + 1] == str(VXLAN_PORT) and "nolearning" in w
        assert w[-2:] == ["dev", dev]


def test_each_servers_lines_go_to_its_agent_in_one_request():
    plan = plan_with_underlay()
    plan.add(HERE, "a", "b")
    plan.add(SRV1, "c")
    plan.add(HERE, "d")
    calls, seen = [], []

    class Recorder:
        def call(self, server, op, **args):
            calls.append((server.name, op, args["lines"]))

    plan.make(Recorder(), lambda done, total: seen.append((done, total)))
    assert calls == [("local", "make_links", ["a", "b", "d"]), ("srv1", "make_links", ["c"])]
    assert seen == [(3, 4), (4, 4)]


def test_a_line_ip_refuses_stops_the_batch_and_is_the_agents_error():
    answer = agent.handle({"op": "make_links", "args": {"lines": ["link frobnicate x"]}})
    assert not answer["ok"] and "frobnicate" in answer["error"], answer


def test_a_node_shells_local_terminal_is_raw_before_ssh_starts():
    """What Mininet types into a remote node's shell is not echoed back by the local pty
    and its output's newlines are left alone (a cooked pty once turned `echo $$`'s
    answer into 'echo $$\\r\\n19402\\r\\r\\n')."""
    master, slave = pty.openpty()
    try:
        assert termios.tcgetattr(slave)[3] & termios.ECHO  # a new pty is cooked
        raw_if_tty(slave)
        _iflag, oflag, _cflag, lflag = termios.tcgetattr(slave)[:4]
        assert not lflag & (termios.ECHO | termios.ICANON) and not oflag & termios.OPOST
        os.write(master, b"echo $$\n")
        assert os.read(slave, 64) == b"echo $$\n"  # to the shell, as typed
        os.set_blocking(master, False)
        try:
            echoed = os.read(master, 64)
        except BlockingIOError:
            echoed = b""
        assert echoed == b""
        os.write(slave, b"19402\n")
        assert os.read(master, 64) == b"19402\n"  # no \r added on the way out
    finally:
        os.close(master)
        os.close(slave)
    raw_if_tty(subprocess.PIPE)  # not a terminal (a pipe's marker): left alone
    raw_if_tty(None)
