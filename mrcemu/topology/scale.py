"""What a fabric split over servers costs each server, in closed form (docs/scale-out.md).

Pure. `Fabric` is a topology's shape as plain numbers, so it may be far larger than
the model accepts (the white paper's 131,072 hosts a plane; the model stops at 1,024,
the 10-bit uSID index). `footprint` gives, per server of a `plane` or `rack` split
(`topology/cluster.place`), the namespaces, devices, routes and switch ports that
`mrcemu up --cluster` would make there. The unit tests check every figure against the
layout, the route tables and the placement the code really builds, on the built-in
topologies.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fabric:
    planes: int
    leaves_per_plane: int
    spines_per_plane: int
    hosts_per_leaf: int

    @property
    def hosts(self) -> int:
        return self.leaves_per_plane * self.hosts_per_leaf

    @property
    def links(self) -> int:
        per_plane = self.hosts + self.leaves_per_plane * self.spines_per_plane
        return self.planes * per_plane


@dataclass
class Share:
    """One server's part of a fabric."""

    namespaces: int = 0  # nodes: hosts and switches
    hosts: int = 0  # NIC daemons
    veths: int = 0  # veth ends (both ends of a link within the server)
    vxlan: int = 0  # VXLAN ports (this server's end of a link to another)
    routes: int = 0  # static routes written (seg6local End and plain)
    switch_ports: int = 0  # entries in the switch program's per-port maps

    def add(self, other: Share) -> None:
        for k in vars(self):
            setattr(self, k, getattr(self, k) + getattr(other, k))


# Route tables (topology/routes.py): a host has one route a plane; a leaf one a host
# below it, one a spine (a spine's uSID) and one for same-leaf paths; a spine one a
# leaf and one for its own uSID.
def _leaf(f: Fabric) -> Share:
    return Share(namespaces=1, routes=f.hosts_per_leaf + f.spines_per_plane + 1,
                 switch_ports=f.hosts_per_leaf + f.spines_per_plane)


def _spine(f: Fabric) -> Share:
    return Share(namespaces=1, routes=f.leaves_per_plane + 1, switch_ports=f.leaves_per_plane)


def _host(f: Fabric) -> Share:
    return Share(namespaces=1, hosts=1, routes=f.planes)


def _times(s: Share, k: int) -> Share:
    return Share(**{name: v * k for name, v in vars(s).items()})


def footprint(f: Fabric, servers: int, placement: str) -> list[Share]:
    """Each server's share, in the order of the cluster file's servers."""
    out = [Share() for _ in range(servers)]
    if placement == "plane":
        # hosts on the first; plane p's switches on 1 + p mod (n - 1): every host link
        # crosses, the leaf-spine links stay within a plane's server.
        home = out[0]
        home.add(_times(_host(f), f.hosts))
        if servers > 1:
            home.vxlan += f.hosts * f.planes
        for p in range(f.planes):
            s = out[0] if servers == 1 else out[1 + p % (servers - 1)]
            s.add(_times(_leaf(f), f.leaves_per_plane))
            s.add(_times(_spine(f), f.spines_per_plane))
            s.veths += 2 * f.leaves_per_plane * f.spines_per_plane
            if servers == 1:
                s.veths += 2 * f.hosts
            else:
                s.vxlan += f.hosts
        return out
    if placement != "rack":
        raise ValueError(f"placement {placement!r}: plane or rack")
    # leaf i of every plane and its hosts on server i mod n; plane p's spine j on
    # (p * spines + j) mod n. Host links never cross.
    leaves_on = [len(range(s, f.leaves_per_plane, servers)) for s in range(servers)]
    for s in range(servers):
        n_leaves = leaves_on[s]
        out[s].add(_times(_host(f), n_leaves * f.hosts_per_leaf))
        out[s].add(_times(_leaf(f), n_leaves * f.planes))
        out[s].veths += 2 * n_leaves * f.hosts_per_leaf * f.planes
    spines_on = [0] * servers
    for p in range(f.planes):
        for j in range(f.spines_per_plane):
            spines_on[(p * f.spines_per_plane + j) % servers] += 1
    total = f.planes * f.spines_per_plane
    for s in range(servers):
        out[s].add(_times(_spine(f), spines_on[s]))
        # a spine here: a veth pair to each leaf here, a VXLAN port to each elsewhere;
        # a leaf here: a VXLAN port to each spine elsewhere
        out[s].veths += 2 * spines_on[s] * leaves_on[s]
        out[s].vxlan += spines_on[s] * (f.leaves_per_plane - leaves_on[s])
        out[s].vxlan += leaves_on[s] * (total - spines_on[s])
    return out


# The white paper's fabric (its section 5.2): 8 planes of 100 Gb/s, two tiers of
# 512-port switches: a leaf has 256 hosts below and 256 spines above; a spine, 512
# leaves. 131,072 hosts.
PAPER = Fabric(planes=8, leaves_per_plane=512, spines_per_plane=256, hosts_per_leaf=256)
