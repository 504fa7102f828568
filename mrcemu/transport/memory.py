"""Memory regions registered with an R_Key: where received payloads are placed."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass
class MemoryRegion:
    rkey: int
    base: int  # the VA of byte 0
    buf: bytearray

    def contains(self, va: int, length: int) -> bool:
        return self.base <= va and va + length <= self.base + len(self.buf)

    def write(self, va: int, data: bytes) -> None:
        off = va - self.base
        self.buf[off:off + len(data)] = data

    def sha256(self) -> str:
        return hashlib.sha256(self.buf).hexdigest()


class MemoryTable:
    def __init__(self) -> None:
        self.regions: dict[int, MemoryRegion] = {}
        self._next_key = 0x1000

    def register(self, size: int, base: int = 0x7F00_0000_0000, rkey: int | None = None
                 ) -> MemoryRegion:
        if rkey is None:
            rkey = self._next_key
            self._next_key += 1
        mr = MemoryRegion(rkey, base, bytearray(size))
        self.regions[rkey] = mr
        return mr

    def check(self, rkey: int, va: int, length: int) -> MemoryRegion | str:
        """The region to write, or the reason to drop: bad_rkey or va_out_of_range."""
        mr = self.regions.get(rkey)
        if mr is None:
            return "bad_rkey"
        if not mr.contains(va, length):
            return "va_out_of_range"
        return mr
