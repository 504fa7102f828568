"""Clos fabrics as the model sees them: hosts on leaves (T0), leaves on spines (T1) in
each of several planes, and optionally pods joined by a third tier (T2). Every link has
a capacity in units of a host's port in one plane; a flow is the links it crosses."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Clos:
    hosts: int
    hosts_per_leaf: int
    spines: int  # T1 switches a plane (in a pod, with pods)
    planes: int = 1
    uplink: float = 1.0  # a leaf-spine link's capacity, in host plane ports
    pods: int = 1  # three tiers when more than one: pods joined by `cores`
    cores: int = 0  # T2 switches a plane, each linked to every spine of every pod

    @property
    def leaves(self) -> int:
        return self.hosts // self.hosts_per_leaf

    def leaf_of(self, host: int) -> int:
        return host // self.hosts_per_leaf

    def pod_of(self, host: int) -> int:
        return self.leaf_of(host) * self.pods // self.leaves

    @functools.cached_property
    def capacities(self) -> dict[tuple, float]:
        """Every link the model can load, by name: host ports both ways, leaf-spine both
        ways, spine-core both ways; built once a fabric (read it, do not change it)."""
        cap: dict[tuple, float] = {}
        for p in range(self.planes):
            for h in range(self.hosts):
                cap["up", p, h] = cap["down", p, h] = 1.0
            for leaf in range(self.leaves):
                for s in range(self.spines):
                    cap["l2s", p, leaf, s] = cap["s2l", p, s, leaf] = self.uplink
            for pod in range(self.pods if self.pods > 1 else 0):
                for s in range(self.spines):
                    for c in range(self.cores):
                        # a spine's core links carry what its leaves send out of the pod
                        cap["s2c", p, pod, s, c] = cap["c2s", p, c, pod, s] = (
                            self.uplink * self.leaves // self.pods / self.cores)
        return cap

    def path(self, src: int, dst: int, plane: int, spine: int, core: int = 0,
             spine2: int = 0) -> list[tuple]:
        """The links from `src` to `dst` in `plane` through `spine` (and for another pod,
        up to `core` and down through the other pod's `spine2`)."""
        a, b = self.leaf_of(src), self.leaf_of(dst)
        out: list[tuple] = [("up", plane, src)]
        if a != b:
            if self.pods > 1 and self.pod_of(src) != self.pod_of(dst):
                out += [("l2s", plane, a, spine),
                        ("s2c", plane, self.pod_of(src), spine, core),
                        ("c2s", plane, core, self.pod_of(dst), spine2),
                        ("s2l", plane, spine2, b)]
            else:
                out += [("l2s", plane, a, spine), ("s2l", plane, spine, b)]
        return out + [("down", plane, dst)]

    def hashed(self, src: int, dst: int, plane: int, rng: random.Random) -> list[tuple]:
        """A QP's path in `plane` as a uniform hash picks it at every hop that has a
        choice (the census found the kernel's uniform and independent)."""
        return self.path(src, dst, plane, rng.randrange(self.spines),
                         rng.randrange(max(1, self.cores)), rng.randrange(self.spines))

    def sprayed(self, src: int, dst: int) -> dict[tuple, float]:
        """A flow sprayed evenly over every path of every plane: the share of its rate
        on each link (each tier's links of a plane share it equally)."""
        a, b = self.leaf_of(src), self.leaf_of(dst)
        use: dict[tuple, float] = {}
        k, c = self.spines, max(1, self.cores)
        for p in range(self.planes):
            w = 1.0 / self.planes
            use["up", p, src] = use["down", p, dst] = w
            if a == b:
                continue
            for s in range(k):
                use["l2s", p, a, s] = use["s2l", p, s, b] = w / k
            if self.pods > 1 and self.pod_of(src) != self.pod_of(dst):
                pa, pb = self.pod_of(src), self.pod_of(dst)
                for s in range(k):
                    for x in range(c):
                        use["s2c", p, pa, s, x] = use["c2s", p, x, pb, s] = w / (k * c)
        return use
