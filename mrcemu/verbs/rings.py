"""The daemon's side of a program's rings (layout: mrcemu/verbs/layout.py), over any
writable buffer: what a program posted, checked before anything is read through it, and
completions written back. Pure: the buffers may be shared memory, the tests' bytearrays.

Everything in a ring is the program's to forge. The daemon keeps its own indices and
reads the program's only to learn how far it wrote; a count past the ring's size is
malformed, and each entry is copied out before it is checked, so the program cannot
change it between the check and the use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mrcemu.verbs import layout as vl


class Words:
    """A ring's index words (producer, consumer, armed), each read and stored whole: the
    program reads them while the daemon writes. `struct.pack_into` zero-fills its bytes
    before it packs, and a program's poll between the two saw a producer index of 0 and
    read a ring's worth of stale completions."""

    def __init__(self, buf: memoryview) -> None:
        self._w = buf[:vl.RING_HEAD].cast("I")  # native, as the shim's atomics are

    def __getitem__(self, at: int) -> int:
        return self._w[at // 4]

    def __setitem__(self, at: int, value: int) -> None:
        self._w[at // 4] = value  # one aligned 4-byte store
WC = vl.VERBS


class Malformed(Exception):
    """The program wrote what no shim writes (a ring index past the ring's size)."""


def ring_bytes(entries: int, entry: int) -> int:
    return vl.RING_HEAD + entries * entry


def valid_entries(entries: int, most: int) -> bool:
    return 1 <= entries <= most and entries & (entries - 1) == 0


@dataclass(frozen=True)
class Wqe:
    """A send work request as posted, copied out of the ring."""

    wr_id: int
    addr: int
    remote_addr: int
    length: int
    lkey: int
    rkey: int
    opcode: int
    flags: int
    imm: int
    inline: bytes  # the payload itself, for IBV_SEND_INLINE (else empty)

    @property
    def signaled(self) -> bool:
        return bool(self.flags & WC["IBV_SEND_SIGNALED"])

    @property
    def wire_imm(self) -> int | None:
        """The immediate as the wire carries it: the program wrote it in network byte
        order (verbs' __be32), which the ring holds as it lies in memory."""
        if self.opcode != WC["IBV_WR_RDMA_WRITE_WITH_IMM"]:
            return None
        return int.from_bytes(self.imm.to_bytes(4, "little"), "big")


def program_imm(wire: int) -> int:
    """An immediate from the wire as a completion gives it to the program (__be32)."""
    return int.from_bytes(wire.to_bytes(4, "big"), "little")


class SendQueue:
    """A program's send queue: `take()` the work requests posted since the last."""

    def __init__(self, buf: memoryview, entries: int) -> None:
        if len(buf) != ring_bytes(entries, vl.WQE.codec.size):
            raise ValueError("the ring's size does not match its entries")
        self.buf, self.entries, self.cons = buf, entries, 0
        self.words = Words(buf)

    def take(self) -> list[Wqe]:
        prod = self.words[vl.RING_PROD_AT]
        n = (prod - self.cons) & 0xFFFFFFFF
        if n > self.entries:
            raise Malformed(f"the send queue's producer index is {n} entries ahead of "
                            f"the daemon's, in a ring of {self.entries}")
        out = []
        size = vl.WQE.codec.size
        for _ in range(n):
            at = vl.RING_HEAD + (self.cons % self.entries) * size
            raw = bytes(self.buf[at:at + size])  # copied: the program may rewrite it
            w = vl.WQE.unpack(raw)
            inline = b""
            if w["flags"] & WC["IBV_SEND_INLINE"]:
                inline = raw[vl.WQE_INLINE_AT:vl.WQE_INLINE_AT + min(
                    w["length"], vl.WQE_INLINE_MAX)]
            out.append(Wqe(inline=inline, **w))  # type: ignore[arg-type]
            self.cons = (self.cons + 1) & 0xFFFFFFFF
        # the program learns the slots are free only now, after every copy
        self.words[vl.RING_CONS_AT] = self.cons
        return out


class CompletionQueue:
    """A program's completion queue: `push` one completion; whether the program asked
    to be woken for it (the caller signals its channel then)."""

    def __init__(self, buf: memoryview, entries: int) -> None:
        if len(buf) != ring_bytes(entries, vl.CQE.codec.size):
            raise ValueError("the ring's size does not match its entries")
        self.buf, self.entries, self.prod = buf, entries, 0
        self.words = Words(buf)
        self.overflows = 0

    def push(self, **cqe: int) -> bool:
        cons = self.words[vl.RING_CONS_AT]
        if (self.prod - cons) & 0xFFFFFFFF >= self.entries:
            self.overflows += 1  # the program did not poll: as a NIC, drop and count
            return False
        size = vl.CQE.codec.size
        at = vl.RING_HEAD + (self.prod % self.entries) * size
        self.buf[at:at + size] = vl.CQE.pack(**cqe)
        self.prod = (self.prod + 1) & 0xFFFFFFFF
        self.words[vl.RING_PROD_AT] = self.prod
        armed = self.words[vl.RING_ARMED_AT]
        if armed == vl.ARMED_YES:
            self.words[vl.RING_ARMED_AT] = vl.ARMED_FIRED
            return True
        return False


@dataclass(frozen=True)
class Source:
    """Where a checked write's payload comes from: the program's region, or inline."""

    data: memoryview | bytes


Regions = Callable[[int], "tuple[int, memoryview] | None"]  # lkey -> (base VA, bytes)


def check(w: Wqe, regions: Regions, max_len: int) -> Source | int:
    """The write's payload, or the completion status that refuses it: an opcode other
    than RDMA WRITE (with or without immediate), a length past `max_len`, an lkey not
    the program's, or bytes outside its region."""
    if w.opcode not in (WC["IBV_WR_RDMA_WRITE"], WC["IBV_WR_RDMA_WRITE_WITH_IMM"]):
        return WC["IBV_WC_LOC_QP_OP_ERR"]
    if not 0 < w.length <= max_len:
        return WC["IBV_WC_LOC_LEN_ERR"]
    if w.flags & WC["IBV_SEND_INLINE"]:
        if w.length > vl.WQE_INLINE_MAX:
            return WC["IBV_WC_LOC_LEN_ERR"]
        return Source(w.inline)
    region = regions(w.lkey)
    if region is None:
        return WC["IBV_WC_LOC_PROT_ERR"]
    base, view = region
    off = w.addr - base
    if off < 0 or off + w.length > len(view):
        return WC["IBV_WC_LOC_PROT_ERR"]
    return Source(view[off:off + w.length])
