"""The traffic of synchronous jobs, step by step: which host writes to which in each step,
as collective libraries schedule it. A step ends when its last write completes, and the
next starts then (the runner's phases). Pure."""

from __future__ import annotations

import random
from collections.abc import Sequence

# Draws before a cross-leaf permutation is given up on: a leaf of k hosts among n is
# avoided by a uniform permutation with probability about exp(-k), 3e-4 for k = 8.
MAX_DRAWS = 200_000


def cross_leaf_permutation(leaf_of: Sequence[int], rng: random.Random) -> list[int]:
    """A permutation, uniform among those that send every host across leaves: each host
    writes to one host on another leaf, and each host is written to by one."""
    n = len(leaf_of)
    if len(set(leaf_of)) < 2 or max(leaf_of.count(x) for x in set(leaf_of)) * 2 > n:
        raise ValueError("no permutation sends every host across leaves: a leaf holds "
                         "more than half the hosts")
    for _ in range(MAX_DRAWS):
        # A uniform permutation drawn host by host (Fisher-Yates), given up at the first
        # host it would send within its leaf: rejection, so the kept ones are uniform,
        # at a fraction of the cost of drawing each whole.
        left = list(range(n))
        dst = []
        for h in range(n):
            i = rng.randrange(n - h)
            d = left[i]
            if leaf_of[d] == leaf_of[h]:
                break
            left[i] = left[n - h - 1]
            dst.append(d)
        else:
            return dst
    raise ValueError(f"no cross-leaf permutation in {MAX_DRAWS} draws")


def permutation_steps(leaf_of: Sequence[int], size: int, steps: int,
                      seed: int) -> list[list[tuple[int, int, int]]]:
    """`steps` steps, each a cross-leaf permutation of its own, drawn from `seed`."""
    out = []
    for step in range(steps):
        dst = cross_leaf_permutation(leaf_of, random.Random(seed * 1_000_003 + step))
        out.append([(h, d, size) for h, d in enumerate(dst)])
    return out


def shifted_all_to_all(hosts: int, size: int) -> list[list[tuple[int, int, int]]]:
    """An all-to-all as hosts - 1 steps, step k a shift: each host writes to the one k
    after it, so that every host sends one write and receives one in each step."""
    return [[(h, (h + k) % hosts, size) for h in range(hosts)] for k in range(1, hosts)]


def step_ideal_s(flows: Sequence[tuple[int, int, int]], port_bytes_s: float) -> float:
    """The least a step can take: its busiest host's bytes (sent, or received) at its
    line rate."""
    sent: dict[int, int] = {}
    got: dict[int, int] = {}
    for s, d, n in flows:
        sent[s] = sent.get(s, 0) + n
        got[d] = got.get(d, 0) + n
    return max([*sent.values(), *got.values()], default=0) / port_bytes_s
