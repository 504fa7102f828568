"""The switch BPF program on a veth pair between two namespaces: crafted packets in,
bytes out compared with the wire module's trimming, counters read back."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator

import pytest
from pyroute2 import netns as pn

from mrcemu.fabric import bpf
from mrcemu.wire import codec
from mrcemu.wire.constants import Dscp, Opcode
from mrcemu.wire.layout import bth_at

A, B, IFA, IFB = "mrct-a", "mrct-b", "mrct0", "mrct1"
MAC_A, MAC_B = "02:00:aa:00:00:01", "02:00:aa:00:00:02"
SRC = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c00::")
DELIVERED = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c07::")
CONTAINER = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:801:401:c07::")


def sh(cmd: str) -> None:
    subprocess.run(cmd, shell=True, check=False, capture_output=True)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    if not bpf.OBJ.exists():
        pytest.skip("mrcemu/bpf/switch.o is not built (make install builds it)")
    sh(f"ip netns del {A}; ip netns del {B}")
    # IPv6 off in both namespaces: otherwise the kernel sends its own MLD reports and
    # neighbour solicitations through the program when the veths come up, and the
    # packet counters count them (seen once in CI: packets == 3 for 2 sent).
    quiet = "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"
    sh(f"ip netns add {A} && ip netns add {B} && ip netns exec {A} {quiet} && "
       f"ip netns exec {B} {quiet} && ip link add {IFA} netns {A} address {MAC_A} "
       f"type veth peer name {IFB} netns {B} address {MAC_B} && ip -n {A} link set {IFA} mtu "
       f"9000 up && ip -n {B} link set {IFB} mtu 9000 up")
    socks = []
    try:
        bpf.load()
        bpf.attach(None, [IFA], netns_path=f"/run/netns/{A}")
        pn.pushns(f"/run/netns/{A}")
        try:
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86DD))
            tx.bind((IFA, 0x86DD))
        finally:
            pn.popns()
        pn.pushns(f"/run/netns/{B}")
        try:
            rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86DD))
            rx.bind((IFB, 0x86DD))
            rx.settimeout(2)
        finally:
            pn.popns()
        socks = [tx, rx]
        yield tx, rx
    finally:
        for s in socks:
            s.close()
        sh(f"ip netns del {A}; ip netns del {B}")
        bpf.unload()


def eth() -> bytes:
    return bytes.fromhex(MAC_B.replace(":", "")) + bytes.fromhex(MAC_A.replace(":", "")) + \
        b"\x86\xdd"


def data(via: bytes = DELIVERED, dscp: int = Dscp.TRIMMABLE, ecn: int = 2, psn: int = 1,
         opcode: int = Opcode.WRITE_MIDDLE, ts: int | None = None) -> bytes:
    """An IPv6-in-IPv6 MRC data packet, its outer DA `via` (the last hop's by default)."""
    return codec.encode_data(SRC, DELIVERED, via=via, sport=0xC001, flow_label=1,
                             dscp=dscp, ecn=ecn, opcode=opcode, dqpn=5, psn=psn, msn=1,
                             va=0x1000 + psn * 4096, rkey=7, dmalen=1 << 20,
                             payload=bytes([psn]) * 4096, timestamp=ts,
                             imm=9 if opcode in (Opcode.WRITE_LAST_IMM,
                                                 Opcode.WRITE_ONLY_IMM) else None)


def through(tx, rx, pkt: bytes) -> bytes | None:
    try:
        tx.send(eth() + pkt)
    except OSError:  # a drop at egress comes back to the sender as ENOBUFS
        return None
    try:
        while True:
            frame = rx.recv(65536)
            got, b = frame[14:], bth_at(pkt)  # BTH: opcode .. dqpn, and the PSN
            if got[b:b + 4] == pkt[b:b + 4] and got[b + 9:b + 12] == pkt[b + 9:b + 12]:
                return got
    except TimeoutError:
        return None


def configure(**kw) -> None:
    cfg = dict(rate_bps=1000, ecn_threshold=0, trim_threshold=0, buffer=0, lasthop=False)
    cfg.update(kw)
    bpf.configure({MAC_A: bpf.PortConfig(**cfg)})


def test_below_thresholds_packets_pass_unchanged_and_are_counted(pair):
    tx, rx = pair
    configure(rate_bps=10**9, ecn_threshold=100_000, trim_threshold=200_000)
    p = data()
    assert through(tx, rx, p) == p
    st = bpf.read_state()[MAC_A]
    assert st["packets"] == 1 and st["bytes"] == len(p) + 14
    assert st["trimmed"] == st["ecn_marked"] == st["dropped"] == 0


@pytest.mark.parametrize("opcode,ts", [(Opcode.WRITE_MIDDLE, None), (Opcode.WRITE_LAST_IMM, 77),
                                       (Opcode.WRITE_ONLY, 5)])
@pytest.mark.parametrize("lasthop", [False, True])
def test_above_trim_threshold_the_packet_is_cut_exactly_as_the_wire_module_says(pair, opcode,
                                                                                ts, lasthop):
    tx, rx = pair
    configure(trim_threshold=1000, lasthop=lasthop)
    first = data(psn=1)
    assert through(tx, rx, first) == first  # the queue was empty
    p = data(psn=2, opcode=opcode, ts=ts)
    out = through(tx, rx, p)
    assert bpf.read_state()[MAC_A]["trim_errors"] == 0, bpf.read_state()[MAC_A]
    want = codec.trim(p, Dscp.TRIMMED_LASTHOP if lasthop else Dscp.TRIMMED)
    assert out == want, bpf.read_state()[MAC_A]
    d = codec.decode(out)
    assert d.trimmed and d.payload == b"" and d.psn == 2
    st = bpf.read_state()[MAC_A]
    assert st["trimmed"] == 1 and st["packets"] == 2


def qdisc_sent(ns: str, dev: str) -> tuple[int, int]:
    """(bytes, packets) the root qdisc of `dev` sent: its byte count is what it charged."""
    out = subprocess.run(["ip", "netns", "exec", ns, "tc", "-s", "-j", "qdisc", "show", "dev",
                          dev], capture_output=True, text=True, check=True).stdout
    q = next(q for q in json.loads(out) if q["handle"] == "1:")
    return q["bytes"], q["packets"]


def test_the_qdisc_charges_a_trimmed_packet_its_trimmed_length(pair):
    """The kernel sets the length a qdisc charges before the egress hook: unless the
    trimmed packet goes through its port once more, htb spends a whole packet's time on
    every trimmed header."""
    tx, rx = pair
    sh(f"ip netns exec {A} tc qdisc add dev {IFA} root handle 1: pfifo limit 100")
    configure(trim_threshold=1000, lasthop=True)
    first, p = data(psn=1), data(psn=2)
    assert through(tx, rx, first) == first
    out = through(tx, rx, p)
    assert out == codec.trim(p, Dscp.TRIMMED_LASTHOP)
    st = bpf.read_state()[MAC_A]
    assert st["trimmed"] == 1 and st["packets"] == 2  # judged and counted once
    assert qdisc_sent(A, IFA) == (len(first) + 14 + len(out) + 14, 2)


def test_a_packet_trimmed_mid_path_is_cut_as_the_wire_module_says(pair):
    # The UDP checksum covers the inner header, which names the destination port: the
    # outer DA (a container with uSIDs still to go) changes nothing in the trim.
    tx, rx = pair
    configure(trim_threshold=1000)
    through(tx, rx, data(via=CONTAINER, psn=1))
    p = data(via=CONTAINER, psn=2)
    out = through(tx, rx, p)
    assert out == codec.trim(p, Dscp.TRIMMED)
    assert out[24:40] == CONTAINER and out[64:80] == DELIVERED
    assert out[4:6] != p[4:6] and out[44:46] != p[44:46]  # both payload lengths cut


def test_control_and_non_trimmable_traffic_is_never_trimmed_but_ect_gets_ce(pair):
    tx, rx = pair
    configure(trim_threshold=1000, ecn_threshold=500)
    through(tx, rx, data(psn=1))
    ctl = codec.encode(SRC, DELIVERED, via=DELIVERED, sport=0xC001, flow_label=1,
                       dscp=Dscp.CONTROL, ecn=0,
                       bth={"opcode": Opcode.RELIABILITY_NACK, "psn": 3, "dqpn": 5},
                       headers={"NETH": {"nack_reason": 1, "nack_psn": 3}})
    assert through(tx, rx, ctl) == ctl
    p = data(psn=4, dscp=Dscp.NO_TRIM, ecn=2)
    out = through(tx, rx, p)
    assert codec.decode(out).ecn == 3  # CE
    assert out == codec.mark_ce(p) != p  # in both headers, and nothing else changed
    st = bpf.read_state()[MAC_A]
    assert st["ecn_marked"] == 1 and st["trimmed"] == 0


def test_above_the_buffer_data_is_dropped(pair):
    tx, rx = pair
    configure(buffer=6000)
    assert through(tx, rx, data(psn=1)) is not None
    assert through(tx, rx, data(psn=2)) is None
    st = bpf.read_state()[MAC_A]
    assert st["dropped"] == 1
