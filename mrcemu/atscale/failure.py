"""A link failure in the model: the chance that one failed link between a leaf and a
spine touches a synchronous step (P_hit), and the share of a job's time a rate of such
failures idles it, from a stall a transport pays each time it is touched (measured on
the emulator, not modelled here)."""

from __future__ import annotations

import random

from mrcemu.atscale.clos import Clos
from mrcemu.atscale.step import Transport
from mrcemu.scenario.patterns import cross_leaf_permutation

LinkKey = tuple[int, int, int]  # plane, leaf, spine: both directions, as a link fails


def _links(fab: Clos, path: list[tuple]) -> set[LinkKey]:
    out = set()
    for link in path:
        if link[0] == "l2s":
            out.add((link[1], link[2], link[3]))
        elif link[0] == "s2l":
            out.add((link[1], link[3], link[2]))
    return out


def step_links(fab: Clos, dst: list[int], t: Transport,
               rng: random.Random) -> set[LinkKey] | None:
    """The leaf-spine links a permutation step's flows cross, either way; None for a
    sprayed transport, whose flows cross every link of their leaves. A hashed QP's ACKs
    come back over its data's spine and add no link: Linux orders a packet's two
    addresses before it hashes them, so a QP's packets and its responder's (the same
    flow label) hash alike, and the failure study's counters agree (see p_hit)."""
    if t.sprayed:
        return None
    out: set[LinkKey] = set()
    for s, d in enumerate(dst):
        for p in range(fab.planes):
            for _ in range(t.qps):
                out |= _links(fab, fab.hashed(s, d, p, rng))
    return out


def p_hit(fab: Clos, t: Transport, draws: int, seed: int) -> float:
    """The chance that a leaf-spine link, drawn uniformly, carries a packet of a
    cross-leaf permutation step (either way), over `draws` draws of the permutation,
    the hash and the link. In a two-tier fabric with one QP a pair it is
    1 - (1 - 1/spines)^(2 · hosts a leaf): the leaf's flows out and in."""
    rng = random.Random(f"p_hit:{seed}")
    leaf_of = [fab.leaf_of(h) for h in range(fab.hosts)]
    hit = 0
    for _ in range(draws):
        dst = cross_leaf_permutation(leaf_of, rng)
        link = (rng.randrange(fab.planes), rng.randrange(fab.leaves), rng.randrange(fab.spines))
        used = step_links(fab, dst, t, rng)
        if used is None:  # sprayed: a flow from or to the link's leaf crosses it
            hit += any(link[1] in (leaf_of[s], leaf_of[d]) for s, d in enumerate(dst))
        else:
            hit += link in used
    return hit / draws


def idle_share(flaps_per_minute: float, p_hit: float, stall_s: float) -> float:
    """The share of a synchronous job's time spent waiting on failures: link failures at
    `flaps_per_minute` of its productive time, each touching the step with chance `p_hit`
    and then stalling every host `stall_s`: x / (1 + x), x = rate · P_hit · stall (for a
    small x, x itself)."""
    x = flaps_per_minute / 60 * p_hit * stall_s
    return x / (1 + x)
