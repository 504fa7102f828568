"""The switch's virtual-queue arithmetic, compiled from the very header the BPF program
includes, against exact integer arithmetic: no overflow after a long idle."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

VQ_H = Path(__file__).resolve().parents[3] / "mrcemu" / "bpf" / "vq.h"
HARNESS = r"""
#include <stdio.h>
#include "vq.h"
int main(void) {
    unsigned long long q, dt, rate;
    while (scanf("%llu %llu %llu", &q, &dt, &rate) == 3)
        printf("%llu\n", (unsigned long long)vq_drain(q, dt, rate));
    return 0;
}
"""
U64 = (1 << 64) - 1


@pytest.fixture(scope="module")
def vq(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("needs gcc to compile bpf/vq.h for the host")
    d = tmp_path_factory.mktemp("vq")
    (d / "h.c").write_text(HARNESS)
    exe = d / "vq"
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-I", str(VQ_H.parent),
                    str(d / "h.c"), "-o", str(exe)], check=True)

    def run(cases: list[tuple[int, int, int]]) -> list[int]:
        out = subprocess.run([str(exe)], input="".join(f"{q} {t} {r}\n" for q, t, r in cases),
                             capture_output=True, text=True, check=True).stdout
        return [int(x) for x in out.split()]
    return run


def exact(q: int, dt: int, rate_bps: int) -> int:
    r = rate_bps // 8
    if not r:
        return q
    return max(0, q - dt * r // 1_000_000_000)


BOOT_NS = 3 * 24 * 3600 * 10**9  # a port's first packet: now - 0, three days after boot


def wraps_to_nothing(rate_bps: int) -> int:
    """The idle time after which dt * rate/8 wraps 64 bits to almost nothing: the old
    arithmetic then drained nothing and kept the whole stale queue."""
    return (1 << 64) // (rate_bps // 8) + 1


def test_long_idle_drains_the_queue_instead_of_wrapping(vq):
    cases = [
        (150_000, wraps_to_nothing(20_000_000), 20_000_000),  # 20 Mb/s, 2 h 3 min idle
        (150_000, wraps_to_nothing(100_000_000_000), 100_000_000_000),  # 100 Gb/s, 1.5 s
        (150_000, 2 * wraps_to_nothing(800_000_000_000), 800_000_000_000),
        (150_000, BOOT_NS, 20_000_000),  # a port's first packet: now - 0
    ]
    assert all(dt * (r // 8) > U64 for _q, dt, r in cases)
    # Wrapped, the product is smaller than one second's drain at that rate:
    assert all((dt * (r // 8)) % (1 << 64) // 10**9 < q for q, dt, r in cases[:3])
    assert vq(cases) == [0, 0, 0, 0]


def test_short_gaps_drain_exactly(vq):
    cases = [(150_000, 1_000_000, 20_000_000), (4_096, 0, 20_000_000),
             (200_000, 80_000_000, 20_000_000), (200_000, 79_999_999, 20_000_000),
             (0, 5, 20_000_000), (9_000, 10**9, 0)]
    assert vq(cases) == [exact(*c) for c in cases]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1 << 32), st.integers(0, U64),
                          st.integers(0, 1 << 40)), min_size=1, max_size=40))
def test_matches_exact_arithmetic_everywhere(vq, cases):
    assert vq(cases) == [exact(*c) for c in cases]
