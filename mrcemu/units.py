"""Sizes as people write them: 64MiB, 8MiB, 512KiB, 4096."""

from __future__ import annotations

import re

from mrcemu.errors import MrcemuError

UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 10**6, "mb": 10**6,
         "mib": 1 << 20, "g": 10**9, "gb": 10**9, "gib": 1 << 30}


def parse_size(text: str | int) -> int:
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise MrcemuError(f"size {text} must be positive")
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in UNITS:
        raise MrcemuError(f"size {text!r} is not a size: use e.g. 64MiB, 8MiB, 512KiB or bytes")
    n = int(float(m.group(1)) * UNITS[m.group(2).lower()])
    if n <= 0:
        raise MrcemuError(f"size {text!r} must be positive")
    return n
