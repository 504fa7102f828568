"""Max-min fair rates by progressive filling: every flow's rate rises together until a
link fills, whose flows are then fixed; again with the rest. A flow may load a link by
a share of its rate (a sprayed flow puts 1/n of it on each of n paths). numpy, so that a
fabric of many thousand flows fills in milliseconds."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# A flow's use of the links: link -> the share of its rate that crosses it.
Use = Mapping[Hashable, float]
# A link is full when what is left of it is below this share of its capacity.
FULL = 1e-9


@dataclass(frozen=True)
class Incidence:
    """Flows against links, built once for a set of flows: entry k puts `weight[k]` of
    flow `flow[k]`'s rate on link `link[k]`; `capacity[j]` is link j's."""

    flow: np.ndarray
    link: np.ndarray
    weight: np.ndarray
    capacity: np.ndarray
    flows: int

    @classmethod
    def of(cls, uses: Sequence[Use], capacity: Mapping[Hashable, float]) -> Incidence:
        index = {name: j for j, name in enumerate(capacity)}
        f, link, w = [], [], []
        for i, use in enumerate(uses):
            for name, share in use.items():
                f.append(i)
                link.append(index[name])
                w.append(share)
        return cls(np.asarray(f, dtype=np.int64), np.asarray(link, dtype=np.int64),
                   np.asarray(w, dtype=float), np.asarray(list(capacity.values()),
                                                          dtype=float), len(uses))


def fill(inc: Incidence, live: np.ndarray | None = None) -> np.ndarray:
    """Each flow's max-min fair rate, among the flows `live` (a mask; every flow when
    None); a flow not live, or on no link, gets 0 or inf respectively."""
    live = np.ones(inc.flows, dtype=bool) if live is None else live.copy()
    rate = np.zeros(inc.flows)
    on_links = np.bincount(inc.flow, minlength=inc.flows) > 0
    rate[live & ~on_links] = np.inf
    active = live & on_links
    left = inc.capacity.copy()
    while active.any():
        keep = active[inc.flow]
        load = np.bincount(inc.link[keep], inc.weight[keep], minlength=len(left))
        used = np.flatnonzero(load > 0)
        room = left[used] / load[used]
        first = used[np.argmin(room)]  # the link that fills first: full, whatever rounding
        rise = max(float(room.min()), 0.0)
        rate[active] += rise
        left -= rise * load
        tight = (load > 0) & (left <= FULL * np.maximum(inc.capacity, 1.0))
        tight[first] = True
        hit = np.bincount(inc.flow[keep], tight[inc.link[keep]].astype(float),
                          minlength=inc.flows) > 0
        active &= ~hit
    return rate


def rates(flows: Sequence[Use], capacity: Mapping[Hashable, float]) -> list[float]:
    """Each flow's max-min fair rate, in the capacities' unit. A flow that crosses no
    link is unbounded (inf)."""
    return fill(Incidence.of(flows, capacity)).tolist()
