"""EV profiles from the topology: the only place paths become sendable addresses."""

from __future__ import annotations

from mrcemu.errors import MrcemuError
from mrcemu.topology import Topology
from mrcemu.topology.addressing import host_address
from mrcemu.topology.paths import paths
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
                           per_plane=cfg.ev_set_per_plane)


QPN_BASE = {"mrc": 0x1000, "roce": 0x2000}


def qpn(peer: int, transport: str = "mrc") -> int:
    """Our QP number for the connection with `peer` (deterministic, so no handshake)."""
    return QPN_BASE[transport] + peer


def local_qpn_pair(a: int, b: int, transport: str = "mrc") -> tuple[int, int]:
    """(a's QPN for b, b's QPN for a)."""
    return qpn(b, transport), qpn(a, transport)
