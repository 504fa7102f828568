"""Max-min fair rates by progressive filling: every flow's rate rises together until a
link fills, whose flows are then fixed; again with the rest. A flow may load a link by
a share of its rate (a sprayed flow puts 1/n of it on each of n paths)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# A flow's use of the links: link -> the share of its rate that crosses it.
Use = Mapping[object, float]


def rates(flows: Sequence[Use], capacity: Mapping[object, float]) -> list[float]:
    """Each flow's max-min fair rate, in the capacities' unit. A flow that crosses no
    link is unbounded (inf)."""
    rate = [0.0] * len(flows)
    left = dict(capacity)
    active = {i for i, f in enumerate(flows) if f}
    for i, f in enumerate(flows):
        if not f:
            rate[i] = float("inf")
    while active:
        load: dict[object, float] = {}
        for i in active:
            for link, share in flows[i].items():
                load[link] = load.get(link, 0.0) + share
        # the rise every active flow can take before the first link fills
        rise, full = min((left[link] / w, link) for link, w in load.items() if w > 0)
        rise = max(rise, 0.0)
        for i in active:
            rate[i] += rise
        for link, w in load.items():
            left[link] -= rise * w
        tight = {link for link, w in load.items() if w > 0 and left[link] <= 1e-12 * max(
            1.0, capacity[link])}
        tight.add(full)
        done = {i for i in active if any(link in tight for link in flows[i])}
        active -= done
    return rate
