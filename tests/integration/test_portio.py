"""The daemon's burst port I/O (datapath.recv_burst/send_burst, portio.c) on a veth pair in
a namespace of its own: frames go and come whole and in order, a burst stops at its
limit, an empty port returns nothing, and a port that is down raises as send() did."""

from __future__ import annotations

import errno
import socket
import subprocess
from collections import deque
from collections.abc import Iterator

import pytest
from pyroute2 import netns as pn

from mrcemu import datapath
from tests.integration.conftest import wait_for

NS, IFA, IFB = "mrct-portio", "mrctp0", "mrctp1"
MAC_A, MAC_B = "02:00:bb:00:00:01", "02:00:bb:00:00:02"
ETH_P_IPV6 = 0x86DD


def sh(cmd: str) -> None:
    subprocess.run(cmd, shell=True, check=True, capture_output=True)


def frame(i: int, size: int = 1000) -> bytes:
    eth = bytes.fromhex(MAC_B.replace(":", "")) + bytes.fromhex(MAC_A.replace(":", ""))
    body = bytes([0x60]) + i.to_bytes(4, "big") + bytes((i * 7 + k) & 0xFF for k in range(size))
    return eth + b"\x86\xdd" + body


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


def read_all(s: socket.socket, want: int, burst: int = 64) -> list[bytes]:
    got: list[bytes] = []
    wait_for(lambda: got.extend(datapath.recv_burst(s.fileno(), burst)) or len(got) >= want)
    return got


def test_a_burst_arrives_whole_and_in_order(pair):
    a, b = pair
    frames = deque(frame(i, 200 + 37 * i) for i in range(10))
    assert datapath.send_burst(a.fileno(), frames, 10) == 10
    assert read_all(b, 10) == list(frames)
    assert datapath.recv_burst(b.fileno(), 64) == []  # and nothing more


def test_only_the_first_n_frames_go(pair):
    a, b = pair
    frames = [frame(i) for i in range(6)]
    assert datapath.send_burst(a.fileno(), frames, 3) == 3
    assert read_all(b, 3) == frames[:3]
    assert datapath.send_burst(a.fileno(), frames, 0) == 0
    assert datapath.recv_burst(b.fileno(), 64) == []


def test_a_read_stops_at_its_limit(pair):
    a, b = pair
    frames = [frame(i) for i in range(10)]
    assert datapath.send_burst(a.fileno(), frames, 10) == 10
    wait_for(lambda: False, limit=0.2)  # let the veth deliver them all
    sizes = []
    got: list[bytes] = []
    while chunk := datapath.recv_burst(b.fileno(), 4):
        sizes.append(len(chunk))
        got += chunk
    assert sizes == [4, 4, 2]
    assert got == frames


def test_a_port_that_is_down_raises_like_send(pair):
    a, b = pair
    sh(f"ip -n {NS} link set {IFA} down")
    with pytest.raises(OSError) as e:
        datapath.send_burst(a.fileno(), [frame(1)], 1)
    assert e.value.errno == errno.ENETDOWN
    with pytest.raises(OSError) as e2:
        a.send(frame(1))  # what the daemon did before: the same error
    assert e2.value.errno == e.value.errno


def test_bad_arguments_are_refused(pair):
    a, _ = pair
    with pytest.raises(ValueError):
        datapath.send_burst(a.fileno(), [frame(1)], 2)
    with pytest.raises(ValueError):
        datapath.recv_burst(a.fileno(), 0)
    with pytest.raises(TypeError):
        datapath.send_burst(a.fileno(), [None], 1)
    with pytest.raises(OSError):
        datapath.recv_burst(-1, 4)
