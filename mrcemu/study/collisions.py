"""The collision study, pure: which runs measure a size (the scenarios), and what their
reports say together (each transport's step efficiency over the steps, its flows'
shares of their ports, the permutation's flows sorted as the paper's appendix sorts
them). No fabric here: collisions_run.py runs what this plans."""

from __future__ import annotations

import random
import statistics
from collections import Counter
from dataclasses import dataclass

from mrcemu.study.fabrics import ECMP_FABRICS, MRC_FABRICS

# A lone flow's iterations: its time alone is the yardstick of every shared one.
ALONE_ITERATIONS = 3
# The paper's appendix sorts a flow by what it got of what it gets alone: about all
# of it, a half, a third, or less. A share is put in the nearest bucket's band: above
# the midpoint of 1 and 1/2, above that of 1/2 and 1/3, above that of 1/3 and 1/4.
BUCKETS = (("line rate", 0.75), ("a half", 5 / 12), ("a third", 7 / 24), ("less", float("-inf")))


@dataclass(frozen=True)
class Run:
    """One run of a size: a transport on its fabric, a lone flow or the permutation."""

    hosts: int
    transport: str  # mrc, roce
    qps: int  # QPs a pair (MRC: always 1, it sprays its one QP)
    alone: bool  # a single cross-leaf flow, not the permutation

    @property
    def row(self) -> str:
        """The transport row its figures go in: `mrc`, `roce-4qp`."""
        return "mrc" if self.transport == "mrc" else f"roce-{self.qps}qp"

    @property
    def label(self) -> str:
        return f"{self.row}-{'alone' if self.alone else 'steps'}"

    @property
    def topology(self) -> str:
        return (MRC_FABRICS if self.transport == "mrc" else ECMP_FABRICS)[self.hosts]

    def mapping(self, steps: int, seed: int) -> dict:
        """The run as a scenario file's mapping: every write bandwidth-bound (the
        permutation's default size, a lone flow's too); a lone flow from h0 to the last
        host, on another leaf."""
        from mrcemu.scenario.model import default_step_size
        from mrcemu.topology import load

        wl: dict = ({"kind": "single", "src": "h0", "dst": f"h{self.hosts - 1}",
                     "size": default_step_size(load(self.topology)),
                     "iterations": ALONE_ITERATIONS} if self.alone
                    else {"kind": "permutation", "steps": steps})
        if self.qps > 1:
            wl["qps"] = self.qps
        return {"description": f"collision study, {self.hosts} hosts: {self.label}",
                "topology": self.topology, "workload": wl, "transports": [self.transport],
                "seed": seed, "timeout_s": 600 + 60 * steps}


def row_qps(row: str) -> int:
    """A row's QPs a pair (`roce-4qp`: 4; `mrc`: 1)."""
    return 1 if row == "mrc" else int(row.removeprefix("roce-").removesuffix("qp"))


def row_runs(row: str, qps: list[int]) -> tuple[str, str]:
    """The labels of the runs behind a row: its transport's lone flow (RoCE's at the
    first count of QPs, as `plan` runs it) and its steps."""
    alone = "mrc-alone" if row == "mrc" else f"roce-{qps[0]}qp-alone"
    return alone, f"{row}-steps"


def plan(hosts: int, qps: list[int]) -> list[Run]:
    """A size's runs: each transport's lone flow, then its permutation; RoCE at each
    count of QPs a pair (its lone flow at the first)."""
    out = [Run(hosts, "mrc", 1, True), Run(hosts, "mrc", 1, False),
           Run(hosts, "roce", qps[0], True)]
    return out + [Run(hosts, "roce", m, False) for m in qps]


def bucket(share: float) -> str:
    return next(name for name, above in BUCKETS if share > above)


def histogram(shares: list[float]) -> dict[str, int]:
    out = {name: 0 for name, _ in BUCKETS}
    for s in shares:
        out[bucket(s)] += 1
    return out


def transport_row(steps_report: dict | None, alone_report: dict | None) -> dict:
    """One transport's figures at a size, from its permutation's `steps` and its lone
    flow's: each step's efficiency, their mean, p10 and p90 (over steps), the lone
    flow's efficiency, the mean over it (what spraying or hashing keeps of a flow's own
    rate), each flow's share of its port and over its lone rate, and their buckets."""
    if steps_report is None:
        return {"steps": 0}
    effs = [e["efficiency"] for e in steps_report["each"] if e["efficiency"] is not None]
    shares = [s for e in steps_report["each"] for s in e["flow_share"] if s is not None]
    alone = alone_report["efficiency_mean"] if alone_report else None
    rel = [s / alone for s in shares] if alone else []
    mean = statistics.fmean(effs) if effs else None
    return {"steps": len(effs), "efficiency": effs,
            "efficiency_mean": _r(mean),
            "efficiency_p10": _r(_pct(effs, 10)), "efficiency_p90": _r(_pct(effs, 90)),
            "alone_efficiency": _r(alone),
            "of_alone": _r(mean / alone) if mean is not None and alone else None,
            "write_bdps": steps_report.get("write_bdps"),
            "flow_shares": [round(s, 3) for s in shares],
            "buckets": histogram(rel) if rel else None}


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * q / 100
    lo = int(k)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (k - lo)


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def spread(means: list[float]) -> float:
    """The most a size's mean step efficiency is from their mean, a share of it."""
    m = statistics.fmean(means)
    return max(abs(x - m) for x in means) / m


def flat(means: list[float], within: float = 0.05) -> bool:
    """Whether a transport's mean step efficiency stays within `within` (a fraction) of
    its mean across sizes."""
    return bool(means) and spread(means) <= within


def falls(means: list[float]) -> bool:
    """Whether each larger size's mean step efficiency is below the smaller's."""
    return len(means) > 1 and all(b < a for a, b in zip(means, means[1:], strict=False))


def as_text(row: dict) -> dict[str, str]:
    """A transport row's figures as printed, for the CLI and the pages alike."""
    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    return {"mean": f(row.get("efficiency_mean")), "p10": f(row.get("efficiency_p10")),
            "p90": f(row.get("efficiency_p90")), "alone": f(row.get("alone_efficiency")),
            "of_alone": f(row.get("of_alone"))}


def expected_buckets(leaf_of: list[int], spines: int, draws: int,
                     seed: int) -> dict[str, float]:
    """What a uniform hash (the census's finding) gives the flows of cross-leaf
    permutations with one QP a pair, if every flow gets an equal share of each link it
    crosses: a flow on a spine shares its leaf's uplink to it, and that spine's downlink
    to its peer's leaf, and gets 1 / the busier one's flows. The share of flows in each
    bucket, over `draws` permutations."""
    from mrcemu.scenario.patterns import cross_leaf_permutation

    rng = random.Random(f"buckets:{seed}")
    counts = {name: 0 for name, _ in BUCKETS}
    n = 0
    for _ in range(draws):
        dst = cross_leaf_permutation(leaf_of, rng)
        spine = [rng.randrange(spines) for _ in dst]
        up = Counter((leaf_of[h], spine[h]) for h in range(len(dst)))
        down = Counter((spine[h], leaf_of[d]) for h, d in enumerate(dst))
        for h, d in enumerate(dst):
            counts[bucket(1 / max(up[leaf_of[h], spine[h]], down[spine[h], leaf_of[d]]))] += 1
            n += 1
    return {k: v / n for k, v in counts.items()}


def bucket_band(share: float, flows: int, level: float = 0.95) -> tuple[int, int]:
    """The counts of `flows` a bucket holds `level` of the time if each flow is in it
    with probability `share`, independently: the binomial's central interval."""
    from scipy.stats import binom

    lo, hi = binom.interval(level, flows, share)
    return int(lo), int(hi)


# Permutations the equal-share expectation of the buckets is drawn over.
EXPECTATION_DRAWS = 500


def bucket_expectation(row: dict, hosts: int, seed: int) -> dict:
    """A one-QP RoCE row's buckets against a uniform hash under equal shares, on that
    size's ECMP fabric: each bucket's expected share, the counts its flows would hold 95 %
    of the time, and whether the measured count is inside."""
    from mrcemu.topology import load

    topo = load(ECMP_FABRICS[hosts])
    exp = expected_buckets([topo.leaf_of(h) for h in range(hosts)], topo.spines_per_plane,
                           EXPECTATION_DRAWS, seed)
    flows = sum((row.get("buckets") or {}).values())
    out = {}
    for name, p in exp.items():
        lo, hi = bucket_band(p, flows)
        got = (row.get("buckets") or {}).get(name, 0)
        out[name] = {"share": round(p, 4), "band": [lo, hi], "counted": got,
                     "inside": lo <= got <= hi}
    return out
