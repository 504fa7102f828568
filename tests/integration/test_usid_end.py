"""The BPF engine's End with next-csid (mrcemu/bpf/usid_end.c) held to the model
(topology/addressing.end_next_csid), frame by frame, in the kernel's own test runs
(BPF_PROG_TEST_RUN): the node's own uSID, another's, the last uSID, an empty next slot,
hop limits 1 and 0, frames that are not IPv6, truncated frames, frames for another MAC."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from ipaddress import IPv6Address
from pathlib import Path

import pytest

from mrcemu.fabric import bpf, bpfsys
from mrcemu.topology.addressing import BLOCK, Kind, container, end_next_csid, usid

TC_ACT_OK, TC_ACT_SHOT = 0, 2
OWN = usid(3, Kind.SPINE, 5)
PORT_MAC = "02:00:" + f"{OWN:04x}"[:2] + ":" + f"{OWN:04x}"[2:] + ":0c:07"
DST_AT = 14 + 24


@pytest.fixture(scope="module")
def end_prog() -> Iterator[int]:
    if not bpf.USID_END_OBJ.exists():
        pytest.skip("mrcemu/bpf/usid_end.o is not built (make install builds it)")
    pins = Path(tempfile.mkdtemp(prefix="mrcemu-test-end-", dir="/tmp"))
    subprocess.run(["mount", "-t", "bpf", "bpf", str(pins)], check=True)
    try:
        bpf.load_usid_end(pins, pins / "usid_end")
        bpf.configure_usid({PORT_MAC: OWN}, pins)
        fd = bpfsys.open_pinned(str(pins / "usid_end"))
        try:
            yield fd
        finally:
            os.close(fd)
    finally:
        subprocess.run(["umount", str(pins)], check=False)
        pins.rmdir()


def frame(dst: bytes, hop_limit: int = 64, mac: str = PORT_MAC, ethertype: int = 0x86DD,
          payload: int = 40) -> bytes:
    eth = bytes.fromhex(mac.replace(":", "")) + bytes.fromhex("020000000c00") \
        + ethertype.to_bytes(2, "big")
    ip6 = bytes([0x60, 0x0A, 0xBC, 0xDE]) + payload.to_bytes(2, "big") + bytes([41, hop_limit])
    src = IPv6Address("fcbb:bb00:c00::").packed
    return eth + ip6 + src + dst + bytes(k % 256 for k in range(payload))


def expected(f: bytes) -> tuple[int, bytes]:
    """The model's verdict and frame: what the kernel's seg6local End would leave."""
    if len(f) < DST_AT + 16 or f[12:14] != b"\x86\xdd" or f[:6] != bytes.fromhex(
            PORT_MAC.replace(":", "")):
        return TC_ACT_OK, f
    out = end_next_csid(IPv6Address(f[DST_AT:DST_AT + 16]), OWN)
    if out is None:
        return TC_ACT_SHOT, f
    return TC_ACT_OK, f[:DST_AT] + out.packed + f[DST_AT + 16:]


def destinations(rng: random.Random, n: int) -> Iterator[bytes]:
    """n destinations, in shapes that matter to an End, and some wholly random."""
    others = [usid(p, k, i) for p in (0, 3, 15) for k in Kind for i in (0, 5, 1023)]
    for k in range(n):
        shape = k % 8
        slots = [rng.choice(others) for _ in range(rng.randint(0, 5))]
        if shape == 0:  # wholly random 128 bits
            yield rng.getrandbits(128).to_bytes(16, "big")
        elif shape == 1:  # the block, random after it
            yield ((BLOCK << 96) | rng.getrandbits(96)).to_bytes(16, "big")
        elif shape == 2:  # own uSID, then a path
            yield container(OWN, *slots).packed if slots else container(OWN).packed
        elif shape == 3:  # another node's uSID first, own later
            yield container(rng.choice(others), OWN, *slots[:4]).packed
        elif shape == 4:  # own, an empty slot, then random bits
            yield (int(container(OWN)) | rng.getrandbits(64)).to_bytes(16, "big")
        elif shape == 5:  # own repeated
            yield container(*([OWN] * rng.randint(1, 6))).packed
        elif shape == 6:  # own uSID, other block
            yield ((rng.getrandbits(32) << 96) | (OWN << 80) | rng.getrandbits(80)
                   ).to_bytes(16, "big")
        else:  # own uSID at its last slot
            yield container(*(slots + [OWN])[-6:]).packed


def check(fd: int, f: bytes) -> None:
    got = bpfsys.test_run(fd, f)
    want = expected(f)
    assert (got.retval, got.frame if got.retval == TC_ACT_OK else f) == want, (
        f"frame {f.hex()}: BPF {got.retval} {got.frame.hex()}, model {want[0]} {want[1].hex()}")


def test_the_bpf_end_equals_the_model_over_twelve_thousand_destinations(end_prog):
    rng = random.Random(86)
    n = 0
    for k, dst in enumerate(destinations(rng, 12_000)):
        hop = (64, 1, 0, 255)[k % 4]
        check(end_prog, frame(dst, hop_limit=hop))
        n += 1
    assert n == 12_000


def test_frames_the_end_is_not_for_pass_untouched(end_prog):
    own = container(OWN, usid(3, Kind.LEAF, 1)).packed
    cases = [
        frame(own, ethertype=0x0800),  # IPv4's ethertype
        frame(own, mac="02:00:aa:bb:cc:dd"),  # for another port
        frame(own, payload=0),  # an IPv6 header and nothing after it: still shifted
        frame(own, payload=900)[:DST_AT + 16 + 8],  # the payload cut short: likewise
    ]
    for f in cases:
        got = bpfsys.test_run(end_prog, f)
        assert (got.retval, got.frame) == expected(f), f.hex()
    assert bpfsys.test_run(end_prog, cases[2]).frame != cases[2]


def test_frames_cut_inside_the_ipv6_header_pass_a_real_port(end_prog, tmp_path):
    """The kernel's test runs refuse a frame shorter than its IPv6 header, so these go
    through a real veth: the program passes them (the kernel then drops them), counts
    nothing, and still shifts the whole frame sent after them."""
    pins = end_pins()
    a, b = "mrct-ea", "mrct-eb"
    sh = lambda cmd: subprocess.run(cmd, shell=True, capture_output=True, text=True)  # noqa: E731
    sh(f"ip netns del {a}; ip netns del {b}")
    try:
        r = sh(f"ip netns add {a} && ip netns add {b} && ip link add e0 netns {a} type veth "
               f"peer name e1 netns {b} address {PORT_MAC} && ip -n {a} link set e0 up && "
               f"ip -n {b} link set e1 up && ip netns exec {b} tc qdisc add dev e1 clsact && "
               f"ip netns exec {b} tc filter add dev e1 ingress bpf da object-pinned "
               f"{pins / 'usid_end'}")
        assert r.returncode == 0, r.stderr
        before = bpf.read_usid(pins)[PORT_MAC]
        own = container(OWN, usid(3, Kind.LEAF, 1)).packed
        full = frame(own)
        cut = [full[:DST_AT + 8], full[:20], full[:14]]
        send = Path(tmp_path, "send.py")
        send.write_text("import socket, sys\n"
                        "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
                        "s.bind(('e0', 0))\n"
                        "for h in sys.argv[1:]:\n    s.send(bytes.fromhex(h))\n")
        r = sh(f"ip netns exec {a} {sys.executable} {send} "
               + " ".join(f.hex() for f in [*cut, full]))
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 5
        while bpf.read_usid(pins)[PORT_MAC]["shifted"] == before["shifted"] \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        after = bpf.read_usid(pins)[PORT_MAC]
        assert (after["shifted"] - before["shifted"], after["dropped"] - before["dropped"]) \
            == (1, 0)
    finally:
        sh(f"ip netns del {a}; ip netns del {b}")


def test_the_end_counts_what_it_shifted_and_dropped(end_prog):
    pins = end_pins()
    before = bpf.read_usid(pins)[PORT_MAC]
    check(end_prog, frame(container(OWN, 0x2002).packed))
    check(end_prog, frame(container(OWN).packed))
    after = bpf.read_usid(pins)[PORT_MAC]
    assert after["usid"] == OWN
    assert (after["shifted"] - before["shifted"], after["dropped"] - before["dropped"]) == (1, 1)


def end_pins() -> Path:
    """The bpffs this module's program is pinned in."""
    found = [d for d in Path("/tmp").glob("mrcemu-test-end-*") if (d / "usid_end").exists()]
    assert len(found) == 1, found
    return found[0]
