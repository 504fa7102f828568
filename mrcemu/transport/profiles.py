"""EV profiles from the topology: the only place paths become sendable addresses."""

from __future__ import annotations

from mrcemu.errors import MrcemuError
from mrcemu.topology import Topology
from mrcemu.topology.addressing import host_address
from mrcemu.topology.paths import ecmp_paths, paths
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.evs import EvProfile, PathInfo


def path_infos(topo: Topology, a: int, b: int) -> list[PathInfo]:
    return [PathInfo(p.ev, p.plane, p.spine, host_address(p.plane, a).packed,
                     p.container.packed, p.delivered.packed) for p in paths(topo, a, b)]


def profile(topo: Topology, a: int, b: int, cfg: TransportConfig) -> EvProfile:
    infos = path_infos(topo, a, b)
    if cfg.ev_planes:
        unknown = sorted(set(cfg.ev_planes) - {p.plane for p in infos})
        if unknown:
            raise MrcemuError(f"transport config: ev_planes names plane(s) "
                              f"{', '.join(map(str, unknown))}, which the fabric does not "
                              f"have (planes 0-{topo.planes - 1})")
        infos = [p for p in infos if p.plane in cfg.ev_planes]
    return EvProfile.build(infos, cfg.ev_backups_per_path, cfg.ev_min_active,
                           seed=cfg.seed * 1_000_003 + a * 1024 + b,
                           per_plane=cfg.ev_set_per_plane, cfg=cfg, per_path=cfg.ev_per_path)


def ecmp_profile(topo: Topology, a: int, b: int, entropies: list[int]) -> EvProfile:
    """A RoCE QP's flows on an ECMP fabric: one EV per entropy, all active (the QP takes
    one; a rehash, the next)."""
    infos = [PathInfo(p.ev, p.plane, p.spine, host_address(0, a).packed,
                      p.container.packed, p.delivered.packed)
             for p in ecmp_paths(topo, a, b, entropies)]
    return EvProfile.build(infos, backups_per_path=0)


QPN_BASE = {"mrc": 0x1000, "roce": 0x2000}
# QPs a pair may have per transport (RoCE's QP scaling): QP k of a pair is numbered
# k * QP_STRIDE above the first, so that a QP number says peer, transport and k.
MAX_QPS = 16
QP_STRIDE = 0x400


# A connection made again (a QP destroyed and created anew) takes the next generation,
# numbered GEN_STRIDE higher: copies of the old one's packets still on the wire or in a
# NIC's delay line then name a QP that is gone, as a real NIC's fresh QPN makes them,
# where the same number would take them into the new one's PSNs, which start at 0 again.
GEN_STRIDE = 0x10000
GENERATIONS = 0x100  # 24-bit QPNs: generation 255's highest is 0xFF5FFF


def qpn(peer: int, transport: str = "mrc", qp: int = 0, gen: int = 0) -> int:
    """Our QP number for the connection with `peer` (deterministic, so no handshake),
    made `gen` times before (mod GENERATIONS)."""
    if not 0 <= qp < (MAX_QPS if transport == "roce" else 1):
        raise ValueError(f"{transport} QP {qp}: a pair has "
                         f"{MAX_QPS if transport == 'roce' else 1} at most")
    return (gen % GENERATIONS) * GEN_STRIDE + QPN_BASE[transport] + qp * QP_STRIDE + peer


def newer_generation(gen: int, than: int) -> bool:
    """Whether generation `gen` is later than `than`, the numbers wrapping at GENERATIONS
    (half of them ahead, half behind)."""
    return 0 < (gen - than) % GENERATIONS < GENERATIONS // 2


def first_qpn(q: int) -> int:
    """The number QP `q` had at generation 0: what a pair keeps however often it was
    made again (its flow hash, its random streams), so a run's columns are alike."""
    return q % GEN_STRIDE


def qp_of(q: int, hosts: int) -> tuple[str, int, int, int] | None:
    """(transport, peer, QP index, generation) a QP number of ours stands for, or None."""
    gen, q = divmod(q, GEN_STRIDE)
    for transport, base in QPN_BASE.items():
        k, peer = divmod(q - base, QP_STRIDE)
        if (0 <= k < (MAX_QPS if transport == "roce" else 1) and 0 <= peer < hosts
                and gen < GENERATIONS):
            return transport, peer, k, gen
    return None


def local_qpn_pair(a: int, b: int, transport: str = "mrc", qp: int = 0,
                   gen: int = 0) -> tuple[int, int]:
    """(a's QPN for b, b's QPN for a)."""
    return qpn(b, transport, qp, gen), qpn(a, transport, qp, gen)
