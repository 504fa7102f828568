"""The statistics a study judges its counts by: a goodness-of-fit of observed link loads
to the binomial that a uniform hash gives, and the expected worst link of a leaf. Pure;
scipy's distributions do the arithmetic."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

# Pearson's rule of thumb: a bin expecting fewer observations than this is merged into
# its neighbour, where the chi-square approximation would otherwise fail.
MIN_EXPECTED = 5.0


@dataclass(frozen=True)
class Bin:
    lo: int  # loads lo..hi, inclusive
    hi: int
    observed: int
    expected: float


@dataclass(frozen=True)
class BinomialFit:
    """Observed loads against Bin(n, p): Pearson's chi-square over bins merged until each
    expects MIN_EXPECTED, with bins - 1 degrees of freedom (nothing is estimated from the
    data). `p_value` is None where fewer than two bins remain."""

    n: int
    p: float
    observations: int
    mean: float
    bins: tuple[Bin, ...]
    chi2: float
    dof: int
    p_value: float | None

    def to_json(self) -> dict:
        return {"n": self.n, "p": self.p, "observations": self.observations,
                "mean": round(self.mean, 4), "expected_mean": round(self.n * self.p, 4),
                "chi2": round(self.chi2, 3), "dof": self.dof,
                "p_value": None if self.p_value is None else float(f"{self.p_value:.4g}"),
                "bins": [{"loads": [b.lo, b.hi], "observed": b.observed,
                          "expected": round(b.expected, 2)} for b in self.bins]}


def _merged(pmf: Sequence[float], counts: Counter, total: int) -> list[Bin]:
    out: list[Bin] = []
    lo, obs, exp = 0, 0, 0.0
    for k, q in enumerate(pmf):
        obs, exp = obs + counts.get(k, 0), exp + q * total
        if exp >= MIN_EXPECTED:
            out.append(Bin(lo, k, obs, exp))
            lo, obs, exp = k + 1, 0, 0.0
    if lo < len(pmf):  # the upper tail left over: into the last bin
        if out:
            last = out.pop()
            out.append(Bin(last.lo, len(pmf) - 1, last.observed + obs, last.expected + exp))
        else:
            out.append(Bin(lo, len(pmf) - 1, obs, exp))
    return out


def binomial_fit(loads: Sequence[int], n: int, p: float) -> BinomialFit:
    """How well independent `loads` (each 0..n) fit Bin(n, p)."""
    if not loads:
        raise ValueError("no loads to fit")
    if any(not 0 <= x <= n for x in loads):
        raise ValueError(f"a load outside 0..{n}: {min(loads)}..{max(loads)}")
    pmf = stats.binom.pmf(range(n + 1), n, p)
    bins = _merged([float(q) for q in pmf], Counter(loads), len(loads))
    chi2 = sum((b.observed - b.expected) ** 2 / b.expected for b in bins)
    dof = len(bins) - 1
    pv = float(stats.chi2.sf(chi2, dof)) if dof >= 1 else None
    return BinomialFit(n, p, len(loads), sum(loads) / len(loads), tuple(bins), chi2, dof, pv)


def expected_max_load(n: int, links: int) -> float:
    """The expected load of the busiest of `links` links when `n` flows each pick one
    uniformly and independently: E[max] = sum over k of P(max >= k), P(max <= k) by
    placing the flows a link at a time (each link's share a binomial of what is left)."""
    if links < 1 or n < 0:
        raise ValueError("need a link, and no fewer than 0 flows")
    total = 0.0
    for k in range(n):  # P(max > k) for k = 0 .. n-1
        # ways[r]: probability that the links so far each carry <= k, with r flows left
        ways = {n: 1.0}
        for left in range(links, 0, -1):
            nxt: dict[int, float] = {}
            for r, w in ways.items():
                if left == 1:
                    if r <= k:
                        nxt[0] = nxt.get(0, 0.0) + w
                    continue
                pmf = stats.binom.pmf(range(min(r, k) + 1), r, 1.0 / left)
                for c, q in enumerate(pmf):
                    nxt[r - c] = nxt.get(r - c, 0.0) + w * float(q)
            ways = nxt
        below = ways.get(0, 0.0)
        total += 1.0 - below
        if below > 1.0 - 1e-12:
            break
    return total
