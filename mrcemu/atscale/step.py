"""A synchronous step in the model: every pair's bytes moved at max-min fair rates that
are set again each time a flow finishes (a fluid model), the step ending with its last
flow; its efficiency is the least it could take over that. Monte Carlo over seeded
draws of the permutation and the hash."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

import numpy as np

from mrcemu.atscale import maxmin
from mrcemu.atscale.clos import Clos
from mrcemu.scenario.patterns import cross_leaf_permutation


@dataclass(frozen=True)
class Transport:
    """How a transport places a pair's bytes: `sprayed` over every path (MRC), or over
    `qps` hashed QPs a plane (RoCE: one plane's QPs share the pair's bytes equally);
    `efficiency` what its lone flow keeps of its port (measured on the emulator)."""

    sprayed: bool
    qps: int = 1
    efficiency: float = 1.0


def step_time(fab: Clos, pairs: list[tuple[int, int]], t: Transport,
              rng: random.Random) -> float:
    """The fluid step's time for `pairs` each moving one unit (a host plane port's worth
    a unit of time, all planes together carrying `planes` units a unit of time)."""
    uses: list[dict] = []
    left: list[float] = []
    for s, d in pairs:
        if t.sprayed:
            uses.append(fab.sprayed(s, d))
            left.append(1.0)
            continue
        n = fab.planes * t.qps
        for p in range(fab.planes):
            for _ in range(t.qps):
                uses.append({link: 1.0 for link in fab.hashed(s, d, p, rng)})
                left.append(1.0 / n)
    cap = {k: v * t.efficiency for k, v in fab.capacities.items()}
    inc = maxmin.Incidence.of(uses, cap)
    rest = np.asarray(left)
    live = np.ones(len(uses), dtype=bool)
    now = 0.0
    while live.any():
        r = maxmin.fill(inc, live)
        dt = float(np.min(rest[live] / r[live]))
        now += dt
        rest[live] -= r[live] * dt
        live &= rest > 1e-9
    return now


def ideal_time(fab: Clos) -> float:
    """A permutation step's least: each host's unit at its full line rate (all planes)."""
    return 1.0 / fab.planes


@dataclass(frozen=True)
class Band:
    mean: float
    p10: float
    p90: float
    draws: int


def permutation_efficiency(fab: Clos, t: Transport, draws: int, seed: int) -> Band:
    """A cross-leaf permutation step's efficiency over `draws` draws of the permutation
    (and of the hash, for hashed QPs)."""
    rng = random.Random(f"atscale:{seed}")
    leaf_of = [fab.leaf_of(h) for h in range(fab.hosts)]
    effs = []
    for _ in range(draws):
        dst = cross_leaf_permutation(leaf_of, rng)
        effs.append(ideal_time(fab) / step_time(fab, list(enumerate(dst)), t, rng))
    q = statistics.quantiles(effs, n=10) if len(effs) > 1 else [effs[0]] * 9
    return Band(statistics.fmean(effs), q[0], q[-1], draws)
