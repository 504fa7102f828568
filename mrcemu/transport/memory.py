"""Memory regions registered with an R_Key: where received payloads are placed."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from mrcemu.datapath import Regions


@dataclass
class MemoryRegion:
    rkey: int
    base: int  # the VA of byte 0
    buf: bytearray | memoryview
    external: bool = False  # a program's memory (nic/programs.py), not the NIC's

    def contains(self, va: int, length: int) -> bool:
        return self.base <= va and va + length <= self.base + len(self.buf)

    def write(self, va: int, data: bytes) -> None:
        off = va - self.base
        self.buf[off:off + len(data)] = data

    def sha256(self) -> str:
        return hashlib.sha256(self.buf).hexdigest()


class BudgetExceeded(Exception):
    """A registration (or a write's source buffer) would pass the NIC's memory budget."""


class MemoryTable:
    """The NIC's registered regions, within a byte budget (None: no limit)."""

    def __init__(self, budget: int | None = None) -> None:
        self.regions: dict[int, MemoryRegion] = {}
        # The same regions as the compiled data path sees them (it places MRC payloads):
        # it holds each buffer, so a region's memory cannot move or shrink under it.
        self.native = Regions()
        self._next_key = 0x1000
        self.budget = budget

    @property
    def used(self) -> int:
        """The NIC's own bytes: a program's regions are the program's memory."""
        return sum(len(mr.buf) for mr in self.regions.values() if not mr.external)

    def check_budget(self, size: int, also_held: int = 0) -> None:
        """Raise BudgetExceeded unless `size` more bytes fit, with `also_held` bytes held
        outside the regions (the source buffers of unfinished writes)."""
        if size <= 0:
            raise BudgetExceeded(f"a region of {size} bytes: the size must be positive")
        if self.budget is None:
            return
        held = self.used + also_held
        if held + size > self.budget:
            raise BudgetExceeded(
                f"{size:,} bytes would pass the NIC memory budget of {self.budget:,} bytes "
                f"({held:,} in use): send less, free regions, or raise nic_memory_mib "
                "in the topology")

    def register(self, size: int, base: int = 0x7F00_0000_0000, rkey: int | None = None,
                 also_held: int = 0) -> MemoryRegion:
        self.check_budget(size, also_held)  # before allocating anything
        if rkey is None:
            rkey = self._next_key
            self._next_key += 1
        mr = MemoryRegion(rkey, base, bytearray(size))
        self.native.add(rkey, base, mr.buf)
        self.regions[rkey] = mr
        return mr

    def register_external(self, buf: memoryview, base: int) -> MemoryRegion:
        """A region over memory the NIC does not own (a program's, mapped from its
        memfd): outside the budget, which is the NIC's own memory."""
        mr = MemoryRegion(self._next_key, base, buf, external=True)
        self._next_key += 1
        self.native.add(mr.rkey, base, buf)
        self.regions[mr.rkey] = mr
        return mr

    def free(self, rkey: int) -> bool:
        """Deregister `rkey` (from the compiled data path too); False if unknown."""
        self.native.remove(rkey)
        return self.regions.pop(rkey, None) is not None

    def check(self, rkey: int, va: int, length: int) -> MemoryRegion | str:
        """The region to write, or the reason to drop: bad_rkey or va_out_of_range."""
        mr = self.regions.get(rkey)
        if mr is None:
            return "bad_rkey"
        if not mr.contains(va, length):
            return "va_out_of_range"
        return mr
