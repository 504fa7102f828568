"""Paths between hosts, each named by an entropy value (EV).

An EV is 32 bits: the high 16 travel as the UDP source port and the low 16 as
the IPv6 flow label, so a capture shows which path a packet took.
High 16: 0b11 | plane(4) | spine(10), with spine 1023 meaning the same-leaf path and
1022 a flow an ECMP fabric hashes (the sender does not choose its spine).
Low 16: variant(4) | the path's index among the pair's paths (12). Variants are extra
EVs on the same path, the pool an EV profile's backups come from. An ECMP flow's low
16 are its entropy: the flow label the switches' multipath hash reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv6Address

from mrcemu.topology.addressing import Kind, container, host_address, usid
from mrcemu.topology.layout import host_name, leaf_name, spine_name
from mrcemu.topology.model import MAX_INDEX, Topology

SAME_LEAF = MAX_INDEX
ECMP_SPINE = MAX_INDEX - 1
# The EV's subfields as (name, lowest bit, bits): what the functions below pack and
# unpack, and what the Wireshark dissector shows as mrc.ev.<name> (generated from here).
EV_FIELDS: tuple[tuple[str, int, int], ...] = (
    ("plane", 26, 4), ("spine", 16, 10), ("variant", 12, 4), ("index", 0, 12))


_VARIANT_SHIFT, _VARIANT_BITS = next((at, width) for name, at, width in EV_FIELDS
                                    if name == "variant")
EV_VARIANTS = 1 << _VARIANT_BITS  # the EVs a path can have: its base EV and the others


def make_ev(plane: int, spine: int | None, index: int) -> int:
    s = SAME_LEAF if spine is None else spine
    return ((0xC000 | (plane << 10) | s) << 16) | (index & 0xFFFF)


def ev_variant(ev: int, variant: int) -> int:
    """The same path's EV with another variant number (0 is the base EV)."""
    mask = (EV_VARIANTS - 1) << _VARIANT_SHIFT
    return (ev & ~mask) | ((variant % EV_VARIANTS) << _VARIANT_SHIFT)


def ev_fields(ev: int) -> tuple[int, int | None]:
    """(plane, spine) of an EV; spine None for the same-leaf path and an ECMP flow."""
    hi = ev >> 16
    plane, spine = (hi >> 10) & 0xF, hi & 0x3FF
    return plane, (None if spine in (SAME_LEAF, ECMP_SPINE) else spine)


def is_ecmp_ev(ev: int) -> bool:
    return (ev >> 16) & 0x3FF == ECMP_SPINE


def path_label(ev: int) -> str:
    """How reports name an EV's path: p2s1, p2 (same leaf) or p0-ecmp (hashed)."""
    plane, spine = ev_fields(ev)
    if is_ecmp_ev(ev):
        return f"p{plane}-ecmp"
    return f"p{plane}s{spine}" if spine is not None else f"p{plane}"


def ev_udp_sport(ev: int) -> int:
    return ev >> 16


def ev_flow_label(ev: int) -> int:
    return ev & 0xFFFF


@dataclass(frozen=True)
class Path:
    ev: int
    src: int
    dst: int
    plane: int
    spine: int | None
    container: IPv6Address  # the uSID path, source leaf first: the (outer) DA as sent
    delivered: IPv6Address  # the destination port's address: the DA on arrival
    hops: tuple[str, ...]  # every node, source host to destination host

    @property
    def switch_hops(self) -> int:
        """Nodes that forward the packet, each lowering the hop limit by one."""
        return len(self.hops) - 2

    @property
    def dst_port(self) -> str:
        return f"{host_name(self.dst)}-p{self.plane}"

    def to_json(self) -> dict:
        return {
            "ev": f"0x{self.ev:08x}", "plane": self.plane, "spine": self.spine,
            "container": str(self.container), "delivered": str(self.delivered),
            "hops": list(self.hops),
        }


def paths(topo: Topology, a: int, b: int) -> list[Path]:
    """Every path from host a to host b: one per (plane, spine), or per plane on one leaf."""
    for h, label in ((a, "source"), (b, "destination")):
        if not 0 <= h < topo.hosts:
            raise ValueError(f"{label} host h{h} is not in this topology (h0..h{topo.hosts - 1})")
    if a == b:
        return []
    la, lb = topo.leaf_of(a), topo.leaf_of(b)
    out: list[Path] = []
    for p in range(topo.planes):
        dst_host = usid(p, Kind.HOST, b)
        delivered = host_address(p, b)
        src_leaf = usid(p, Kind.LEAF, la)  # on the path too (the white paper, 2.2): it is named
        if la == lb:
            out.append(Path(make_ev(p, None, len(out)), a, b, p, None,
                            container(src_leaf, dst_host),
                            delivered, (host_name(a), leaf_name(p, la), host_name(b))))
            continue
        for s in range(topo.spines_per_plane):
            c = container(src_leaf, usid(p, Kind.SPINE, s), usid(p, Kind.LEAF, lb), dst_host)
            hops = (host_name(a), leaf_name(p, la), spine_name(p, s), leaf_name(p, lb),
                    host_name(b))
            out.append(Path(make_ev(p, s, len(out)), a, b, p, s, c, delivered, hops))
    return out


def ecmp_paths(topo: Topology, a: int, b: int, entropies: list[int]) -> list[Path]:
    """Host a's flows to host b on an ECMP fabric, one per entropy (12 bits each): plain
    packets to b's address, which every switch routes, the source leaf hashing each
    flow over its spines. The hops between the leaves are the kernel's choice, unknown
    here, so a path names its leaves only."""
    if not topo.ecmp:
        raise ValueError(f"{topo.name} is not an ECMP fabric (routing: {topo.routing})")
    for h, label in ((a, "source"), (b, "destination")):
        if not 0 <= h < topo.hosts:
            raise ValueError(f"{label} host h{h} is not in this topology (h0..h{topo.hosts - 1})")
    la, lb = topo.leaf_of(a), topo.leaf_of(b)
    hops = ((host_name(a), leaf_name(0, la), host_name(b)) if la == lb else
            (host_name(a), leaf_name(0, la), leaf_name(0, lb), host_name(b)))
    dst = host_address(0, b)
    out, seen = [], set()
    for e in entropies:
        ev = make_ev(0, ECMP_SPINE, e & 0xFFF)
        if ev not in seen:
            seen.add(ev)
            out.append(Path(ev, a, b, 0, None, dst, dst, hops))
    return out
