"""Mininet's cluster edition as mrcemu extends it (fabric/remote.py), for real: a node on
a local server, a VXLAN link to it, and a jumbo frame across."""

from __future__ import annotations

import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrcemu.fabric import cluster_local as local
from mrcemu.fabric.build import BareIntf
from mrcemu.fabric.remote import LINK_MTU, LinkPlan, PlannedLink, RemoteNode
from mrcemu.topology.cluster import Cluster
from tests.integration.conftest import alive, wait_for

pytestmark = pytest.mark.skipif(not Path(local.SSHD).exists(),
                                reason="needs Debian's openssh-server ('make install')")

# Receive one UDP datagram on the link's IPv6 link-local address and print its length
# and a checksum of its bytes; the sender sends 8,900 bytes (a 9000-MTU frame, unsplit).
RECV = ("import socket,sys,zlib;s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM);"
        "s.bind(('::',5555));s.settimeout(10);d=s.recv(65535);print(len(d),zlib.crc32(d))")
SEND = ("import socket,sys,zlib;s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM);"
        "s.setsockopt(socket.IPPROTO_IPV6,23,2);"  # IPV6_MTU_DISCOVER = DO: never fragment
        "d=bytes(i%251 for i in range(8900));s.sendto(d,(sys.argv[1],5555,0,"
        "socket.if_nametoindex('a-0')));print(zlib.crc32(d))")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    local.down()
    _, c = local.up(2)
    yield c
    local.down()
    assert local.leftovers() == {"namespaces": [], "devices": [], "sshd": []}


def test_a_vxlan_link_to_a_node_on_another_server_carries_a_jumbo_frame(cluster):
    here, there = cluster.servers
    # As under nohup (CI may run so): the ssh behind a remote node then ignores SIGHUP,
    # which is how Mininet ends a node's shell; terminate() must end it all the same.
    hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        a = RemoteNode("a", cluster, here)
        b = RemoteNode("b", cluster, there)
    finally:
        signal.signal(signal.SIGHUP, hup)
    try:
        assert not a.isRemote and b.isRemote
        plan = LinkPlan()
        PlannedLink(a, b, vni=4242, plan=plan, intf=BareIntf, intfName1="a-0",
                    intfName2="b-0", addr1="02:00:00:00:00:0a", addr2="02:00:00:00:00:0b")
        for n in (a, b):  # each server's share of the plan, as its agent runs it
            batch = "\n".join(plan.lines[n.on])
            n.root("sh", "-c", f"printf '%s\\n' {shlex.quote(batch)} | ip -batch -")
        for n, intf in ((a, "a-0"), (b, "b-0")):  # as the agent's programming does
            n.cmd(f"ip link set dev {intf} up")
        # b's end is a VXLAN device in b's namespace, bound to the server's underlay
        detail = b.cmd("ip -d link show b-0")
        here_ip = local.address(0)
        assert "vxlan id 4242" in detail and f"mtu {LINK_MTU}" in detail, detail
        assert "02:00:00:00:00:0b" in detail and f"remote {here_ip}" in detail, detail
        # The link-local addresses are usable once duplicate detection is through.
        wait_for(lambda: all("tentative" not in n.cmd(f"ip -6 addr show dev {i}") and "fe80"
                             in n.cmd(f"ip -6 addr show dev {i}")
                             for n, i in ((a, "a-0"), (b, "b-0"))))
        ll = b.cmd("ip -6 -o addr show dev b-0 scope link").split()[3].split("/")[0]
        rx = b.popen(["python3", "-c", RECV], stdout=subprocess.PIPE, text=True)
        wait_for(lambda: ":5555 " in b.cmd("ss -Huln"))
        sent = a.cmd(f"python3 -c \"{SEND}\" {ll}").strip().splitlines()[-1]
        out, _ = rx.communicate(timeout=20)
        assert out.split() == ["8900", sent]
    finally:
        for n in (a, b):
            n.terminate()
    # both shells ended, the remote one with its ssh session
    assert a.shell is None and b.shell is None
    wait_for(lambda: not alive(a.pid) and not alive(b.pid))
    assert not alive(a.pid) and not alive(b.pid)
