"""The SRv6 uSID addressing plan (docs/topologies.md, addressing).

Block fcbb:bb00::/32 in F3216 format: a 32-bit block, then 16-bit uSIDs.
A uSID is plane(4) | kind(2) | index(10), kinds leaf=1, spine=2, host port=3.
Every address in the emulator comes from the functions here.
"""

from __future__ import annotations

import enum
from ipaddress import IPv6Address, IPv6Network

BLOCK = 0xFCBB_BB00
BLOCK_BITS = 32
USID_BITS = 16
USIDS_PER_ADDRESS = (128 - BLOCK_BITS) // USID_BITS  # 6
# A uSID's fields, high to low: plane, kind, index (the C side's from mrc_shared.h).
PLANE_BITS, KIND_BITS, INDEX_BITS = 4, 2, 10
KIND_SHIFT = INDEX_BITS
PLANE_SHIFT = KIND_BITS + INDEX_BITS


class Kind(enum.IntEnum):
    # The reference plan numbers these 0, 1, 2. We start at 1 so that no uSID is 0x0000,
    # which RFC 9800 reserves as End-of-Carrier (plane 0 leaf 0 would be 0x0000).
    LEAF = 1
    SPINE = 2
    HOST = 3


def usid(plane: int, kind: Kind, index: int) -> int:
    if not 0 <= plane < 1 << PLANE_BITS:
        raise ValueError(f"plane {plane} does not fit the {PLANE_BITS}-bit uSID field")
    if not 0 <= index < 1 << INDEX_BITS:
        raise ValueError(f"index {index} does not fit the {INDEX_BITS}-bit uSID field")
    return (plane << PLANE_SHIFT) | (int(kind) << KIND_SHIFT) | index


def split_usid(value: int) -> tuple[int, Kind, int]:
    return (value >> PLANE_SHIFT, Kind((value >> KIND_SHIFT) & ((1 << KIND_BITS) - 1)),
            value & ((1 << INDEX_BITS) - 1))


def container(*usids: int) -> IPv6Address:
    """The address fcbb:bb00:<u1>:<u2>:...:: carrying these uSIDs in order."""
    if not 1 <= len(usids) <= USIDS_PER_ADDRESS:
        raise ValueError(f"a container holds 1..{USIDS_PER_ADDRESS} uSIDs, not {len(usids)}")
    value = BLOCK << (128 - BLOCK_BITS)
    for i, u in enumerate(usids):
        value |= u << (128 - BLOCK_BITS - USID_BITS * (i + 1))
    return IPv6Address(value)


def container_usids(addr: IPv6Address) -> list[int]:
    """The uSIDs in a container, stopping at the first empty (end-of-carrier) slot."""
    value = int(addr)
    out = []
    for i in range(USIDS_PER_ADDRESS):
        u = (value >> (128 - BLOCK_BITS - USID_BITS * (i + 1))) & 0xFFFF
        if u == 0:
            break
        out.append(u)
    return out


def shift(addr: IPv6Address) -> IPv6Address:
    """What `End` with next-csid (lblen 32, nflen 16) does to the destination:
    drop the first uSID after the block and shift the rest left."""
    value = int(addr)
    block = value >> (128 - BLOCK_BITS) << (128 - BLOCK_BITS)
    rest = value & ((1 << (128 - BLOCK_BITS)) - 1)
    rest = (rest << USID_BITS) & ((1 << (128 - BLOCK_BITS)) - 1)
    return IPv6Address(block | rest)


def end_next_csid(addr: IPv6Address, own: int) -> IPv6Address | None:
    """What a node whose uSID is `own` does to a packet for `addr` with `End` next-csid
    (lblen 32, nflen 16), as Linux's seg6local does it: an address outside the node's
    /48 is not its End's (returned unchanged). Inside it, an argument of all zeros (no
    uSID after the node's own) is dropped (None): with no segment routing header there
    is nothing left to do. Otherwise the address is shifted; a shifted address whose
    active uSID is again `own` matches the same End route and is processed again.

    The kernel engine and the BPF engine (`mrcemu/bpf/usid_end.c`) both do this."""
    prefix = usid_prefix(own)
    while addr in prefix:
        if int(addr) & ((1 << (128 - BLOCK_BITS - USID_BITS)) - 1) == 0:
            return None
        addr = shift(addr)
    return addr


def usid_prefix(u: int) -> IPv6Network:
    """The /48 owned by a uSID: one End route or one static route."""
    return IPv6Network((container(u), BLOCK_BITS + USID_BITS))


def plane_prefix(plane: int) -> IPv6Network:
    """The /36 of every uSID in a plane: a host's route out of its plane-p port."""
    return IPv6Network((IPv6Address((BLOCK << 96) | (plane << 92)), BLOCK_BITS + 4))


def host_address(plane: int, host: int) -> IPv6Address:
    return container(usid(plane, Kind.HOST, host))


def mac_address(own: int, peer: int) -> str:
    """Locally administered MAC for the interface of uSID `own` facing uSID `peer`."""
    b = bytes([0x02, 0x00]) + own.to_bytes(2, "big") + peer.to_bytes(2, "big")
    return ":".join(f"{x:02x}" for x in b)


def link_local(own: int, peer: int) -> IPv6Address:
    """Link-local next-hop address of that interface; static neighbours point at it."""
    return IPv6Address(f"fe80::{own:x}:{peer:x}")
