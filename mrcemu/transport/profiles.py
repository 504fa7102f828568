"""EV profiles from the topology: the only place paths become sendable addresses."""

from __future__ import annotations

from mrcemu.topology import Topology
from mrcemu.topology.addressing import host_address
from mrcemu.topology.paths import paths
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.evs import EvProfile, PathInfo


def path_infos(topo: Topology, a: int, b: int) -> list[PathInfo]:
    return [PathInfo(p.ev, p.plane, p.spine, host_address(p.plane, a).packed,
                     p.container.packed, p.delivered.packed) for p in paths(topo, a, b)]


def profile(topo: Topology, a: int, b: int, cfg: TransportConfig) -> EvProfile:
    return EvProfile.build(path_infos(topo, a, b), cfg.ev_backups_per_path, cfg.ev_min_active,
                           seed=cfg.seed * 1_000_003 + a * 1024 + b)


def qpn(local: int, peer: int) -> int:
    """Our QP number for the connection with `peer` (deterministic, so no handshake)."""
    return 0x1000 + peer


__all__ = ["path_infos", "profile", "qpn", "local_qpn_pair"]


def local_qpn_pair(a: int, b: int) -> tuple[int, int]:
    """(a's QPN for b, b's QPN for a)."""
    return qpn(a, b), qpn(b, a)
