"""Shared by the switch integration tests: incast and counter deltas."""

from __future__ import annotations

import json

from mrcemu.nic import transfer
from mrcemu.topology import load
from tests.integration.conftest import mrcemu


def switch_counters() -> dict[str, dict[str, int]]:
    """Port name -> counters, every switch."""
    out = json.loads(mrcemu("stats", "--json").stdout)
    return {port: c for ports in out.values() for port, c in ports.items()}


def delta(after: dict, before: dict) -> dict[str, dict[str, int]]:
    return {p: {k: v - before.get(p, {}).get(k, 0) for k, v in c.items()}
            for p, c in after.items()}


def incast(topology: str = "default", dst: int = 7, size: int = 8 << 20) -> list[dict]:
    topo = load(topology)
    results, _ = transfer.run_many(topo, [(a, dst, size, "mrc", a) for a in range(topo.hosts)
                                          if a != dst])
    return results
