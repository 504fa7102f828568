"""Making a connection by transport name: the one place the two transports are told apart."""

from __future__ import annotations

from mrcemu.topology import Topology
from mrcemu.transport.base import Connection
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.memory import MemoryTable
from mrcemu.transport.mrc import MrcConnection
from mrcemu.transport.profiles import profile, qpn
from mrcemu.transport.roce import RoceConnection

TRANSPORTS = ("mrc", "roce")


def make_connection(transport: str, topo: Topology, host: int, peer: int,
                    cfg: TransportConfig, memory: MemoryTable | None = None) -> Connection:
    """`host`'s connection toward `peer`: the QP numbers and EV profile from the
    topology, the transport by name."""
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}: use {' or '.join(TRANSPORTS)}")
    prof = profile(topo, host, peer, cfg)
    local, remote = qpn(peer, transport), qpn(host, transport)
    if transport == "mrc":
        return MrcConnection(cfg, prof, local, remote, memory)
    return RoceConnection(cfg, prof, local, remote, memory,
                          flow_key=bytes([host & 0xFF, peer & 0xFF]))
