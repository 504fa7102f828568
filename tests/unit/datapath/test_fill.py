"""datapath.fill (fill.c): the bytes a write sends, byte-identical to splitmix64 as
written out below, so that a reader can regenerate any write from its seed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu import datapath

M = (1 << 64) - 1


def splitmix64_bytes(n: int, seed: int) -> bytes:
    out = bytearray()
    s = seed
    while len(out) < n:
        s = (s + 0x9E3779B97F4A7C15) & M
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        out += (z ^ (z >> 31)).to_bytes(8, "little")
    return bytes(out[:n])


@settings(max_examples=200)
@given(n=st.integers(0, 300), seed=st.integers(0, M))
def test_fill_is_splitmix64(n, seed):
    b = bytearray(b"\xAA" * n)
    datapath.fill(b, seed)
    assert bytes(b) == splitmix64_bytes(n, seed)


def test_seeds_differ_and_no_8_bytes_repeat_in_a_mebibyte():
    a, b = bytearray(1 << 20), bytearray(1 << 20)
    datapath.fill(a, 1)
    datapath.fill(b, 2)
    assert a != b
    words = {bytes(a[i:i + 8]) for i in range(0, len(a), 8)}
    assert len(words) == len(a) // 8  # a packet at the wrong offset changes the hash


def test_fill_needs_a_writable_buffer():
    with pytest.raises(TypeError):
        datapath.fill(b"read-only", 1)
