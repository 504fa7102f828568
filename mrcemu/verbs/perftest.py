"""perftest's results, read from what `ib_write_bw` and `ib_write_lat` print, and put in
the fabric's units. Pure.

A program on an emulated host measures with the wall clock, on a fabric running
`slowdown` times slower than its own full speed: its times are the fabric's times the
slowdown, its bandwidths the fabric's over it (docs/programs.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass

PORT = 18515  # perftest's TCP port for its handshake: a server is ready once it listens

# perftest's MiB and Gb (its format_factor): with --report_gbits, Gb/s are 125e6 bytes/s
_UNIT_BYTES = {"MiB/sec": 1 << 20, "MB/sec": 1 << 20, "Gb/sec": 125_000_000}
_NUMBER = r"[-+]?\d+(?:\.\d+)?"


class NotAResult(ValueError):
    """The output has no result table perftest prints (the program failed first)."""


def _row(text: str, header: str, columns: int) -> tuple[str, list[float]]:
    """The header line that has `header`, and the first row of `columns` numbers after
    it."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if header in line and "#iterations" in line:
            for row in lines[i + 1:]:
                cells = row.split()
                if len(cells) >= columns and all(re.fullmatch(_NUMBER, c)
                                                 for c in cells[:columns]):
                    return line, [float(c) for c in cells[:columns]]
    raise NotAResult(f"no '{header}' result table in the program's output")


@dataclass(frozen=True)
class Bandwidth:
    size: int
    iterations: int
    peak_mbps: float  # Mb/s, as the program measured (wall clock)
    average_mbps: float

    def full_speed_mbps(self, slowdown: float) -> float:
        """The average as the fabric's own at full speed."""
        return self.average_mbps * slowdown


def bandwidth(text: str) -> Bandwidth:
    header, (size, iters, peak, avg, _rate) = _row(text, "BW average", 5)
    unit = next((u for u in _UNIT_BYTES if u in header), None)
    if unit is None:
        raise NotAResult(f"an unknown bandwidth unit in {header.strip()!r}")
    to_mbps = _UNIT_BYTES[unit] * 8 / 1e6
    return Bandwidth(int(size), int(iters), peak * to_mbps, avg * to_mbps)


@dataclass(frozen=True)
class Latency:
    size: int
    iterations: int
    typical_us: float  # one way (half the round trip), as the program measured
    average_us: float
    p99_us: float

    def full_speed_us(self, slowdown: float) -> float:
        """The typical one-way latency as the fabric's own at full speed."""
        return self.typical_us / slowdown


def latency(text: str) -> Latency:
    _header, cells = _row(text, "t_typical", 9)
    size, iters, _tmin, _tmax, typical, avg, _std, p99, _p999 = cells
    return Latency(int(size), int(iters), typical, avg, p99)
