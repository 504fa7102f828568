"""The NIC's compiled ports (datapath.Ports, ports.c) on a real veth pair in a namespace
of its own, through AF_PACKET as the daemon uses them: frames go and come whole and in
order, a read stops at its limit, an empty port returns nothing, and a port that is down
loses its queue (counted) without raising."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest
from pyroute2 import netns as pn

from mrcemu import datapath
from tests.integration.conftest import wait_for

NS, IFA, IFB = "mrct-portio", "mrctp0", "mrctp1"
MAC_A, MAC_B = "02:00:bb:00:00:01", "02:00:bb:00:00:02"
ETH_P_IPV6 = 0x86DD
ETH_TYPE = b"\x86\xdd"
ETH_A = bytes.fromhex(MAC_B.replace(":", "")) + bytes.fromhex(MAC_A.replace(":", "")) + ETH_TYPE


def sh(cmd: str) -> None:
    subprocess.run(cmd, shell=True, check=True, capture_output=True)


def frame(i: int, size: int = 1000) -> bytes:
    eth = bytes.fromhex(MAC_B.replace(":", "")) + bytes.fromhex(MAC_A.replace(":", ""))
    body = bytes([0x60]) + i.to_bytes(4, "big") + bytes((i * 7 + k) & 0xFF for k in range(size))
    return eth + ETH_TYPE + body


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    subprocess.run(f"ip netns del {NS}", shell=True, capture_output=True)
    # IPv6 off: the kernel's own MLD and neighbour discovery would arrive on the sockets.
    sh(f"ip netns add {NS} && ip netns exec {NS} sysctl -qw "
       "net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 && "
       f"ip -n {NS} link add {IFA} address {MAC_A} type veth peer name {IFB} address {MAC_B} "
       f"&& ip -n {NS} link set {IFA} up && ip -n {NS} link set {IFB} up")
    socks: list[socket.socket] = []
    try:
        pn.pushns(f"/run/netns/{NS}")
        try:
            for name in (IFA, IFB):
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
                s.bind((name, ETH_P_IPV6))
                s.setblocking(False)
                socks.append(s)
        finally:
            pn.popns()
        yield socks[0], socks[1]
    finally:
        for s in socks:
            s.close()
        subprocess.run(f"ip netns del {NS}", shell=True, capture_output=True)


def ports(s: socket.socket, eth: bytes = ETH_A, slots: int = 16) -> datapath.Ports:
    """One port in plane 0 on socket `s`, fast enough never to hold a frame back."""
    return datapath.Ports([(s.fileno(), 0, eth, bytes(16), 1e12)], 0.0, 64, 2048, slots,
                          1e9)


def read_all(p: datapath.Ports, want: int, burst: int = 64) -> list[bytes]:
    got: list[bytes] = []

    def more() -> bool:
        got.extend(p.receive(0, burst, 0.0)[3])
        return len(got) >= want

    wait_for(more)
    return got


def test_a_burst_arrives_whole_and_in_order(pair):
    a, b = pair
    pa, pb = ports(a), ports(b)
    frames = [frame(i, 200 + 37 * i) for i in range(10)]
    assert all(pa.queue(0, f[14:]) for f in frames)  # the port writes the Ethernet header
    assert pa.drain(1.0) == 10 and not pa.queued
    assert read_all(pb, 10) == frames
    assert pb.receive(0, 64, 0.0) == (0, 0, [], [])  # and nothing more
    c = pa.counters()
    assert c["ports"][0]["tx_frames"] == 10
    assert c["ports"][0]["tx_bytes"] == sum(map(len, frames))


def test_a_read_stops_at_its_limit(pair):
    a, b = pair
    pa, pb = ports(a), ports(b)
    frames = [frame(i) for i in range(10)]
    for f in frames:
        pa.queue(0, f[14:])
    assert pa.drain(1.0) == 10
    wait_for(lambda: False, limit=0.2)  # let the veth deliver them all
    sizes = []
    got: list[bytes] = []
    while (r := pb.receive(0, 4, 0.0))[0]:
        sizes.append(r[0])
        got += r[3]
    assert sizes == [4, 4, 2]
    assert got == frames


def test_a_port_that_is_down_loses_its_queue_and_counts_it(pair):
    a, b = pair
    pa = ports(a)
    sh(f"ip -n {NS} link set {IFA} down")
    for i in range(3):
        pa.queue(0, frame(i)[14:])
    pa.drain(1.0)  # ENETDOWN: the port is down, its frames are gone, the NIC goes on
    c = pa.counters()["ports"][0]
    assert (c["send_errors"], c["tx_frames"], pa.queued) == (1, 0, 0)
    sh(f"ip -n {NS} link set {IFA} up")
    pb = ports(b)
    got: list[bytes] = []

    def delivered() -> bool:  # up again (once the veth has carrier): the port sends
        pa.queue(0, frame(9)[14:])
        pa.drain(2.0)
        got.extend(pb.receive(0, 64, 0.0)[3])
        return bool(got)

    wait_for(delivered, limit=5)
    assert got and set(got) == {frame(9)}


def test_bad_arguments_are_refused(pair):
    a, _ = pair
    pa = ports(a)
    with pytest.raises(ValueError):
        pa.receive(0, 0, 0.0)
    with pytest.raises(KeyError):
        pa.receive(1, 4, 0.0)  # no port in plane 1
    with pytest.raises(TypeError):
        pa.queue(0, None)
    with pytest.raises(ValueError):
        datapath.Ports([(a.fileno(), 0, b"short", bytes(16), 1e9)], 0.0, 64, 2048, 2, 1e9)
