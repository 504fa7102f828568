"""Making a connection by transport name: the one place the two transports are told apart."""

from __future__ import annotations

import math
import zlib
from dataclasses import replace

from mrcemu.topology import Topology, latency
from mrcemu.transport.base import Connection
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.memory import MemoryTable
from mrcemu.transport.mrc import MrcConnection
from mrcemu.transport.profiles import ecmp_profile, first_qpn, profile, qpn
from mrcemu.transport.roce import RoceConnection, first_flow_index, start_flows

TRANSPORTS = ("mrc", "roce")


# Flows a RoCE QP may be rehashed through on an ECMP fabric (each a flow label).
ECMP_REHASHES = 8


def flow_key(host: int, peer: int) -> bytes:
    """What a RoCE QP's flow hashes name its pair by."""
    return bytes([host & 0xFF, peer & 0xFF])


def ecmp_entropies(host: int, peer: int, qpn: int) -> list[int]:
    """The flows of `host`'s RoCE QP number `qpn` toward `peer` on an ECMP fabric: like a
    RoCEv2 NIC's UDP source port, each flow's entropy is a hash of the QP; the switches'
    multipath hash, not this NIC, then picks its spine."""
    key = flow_key(host, peer) + qpn.to_bytes(4, "big")
    return [zlib.crc32(key + bytes([k])) for k in range(ECMP_REHASHES)]


def roce_first_flow(topo: Topology, host: int, peer: int, local: int, remote: int) -> int:
    """The EV (on an ECMP fabric: the flow label the switches hash) that `host`'s RoCE QP
    `local`, whose peer QP is `remote`, sends on until it is rehashed: what
    `make_connection` and `RoceConnection` give it, for a census of the switches' hash."""
    prof = ecmp_profile(topo, host, peer, ecmp_entropies(host, peer, first_qpn(local)))
    flows = start_flows(prof)
    return flows[first_flow_index(flow_key(host, peer), local, remote, len(flows))]


def make_connection(transport: str, topo: Topology, host: int, peer: int,
                    cfg: TransportConfig, memory: MemoryTable | None = None,
                    qp: int = 0, gen: int = 0) -> Connection:
    """`host`'s connection toward `peer` (its QP `qp` of the pair, made `gen` times
    before): the QP numbers and EV profile from the topology, the transport by name."""
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}: use {' or '.join(TRANSPORTS)}")
    local, remote = qpn(peer, transport, qp, gen), qpn(host, transport, qp, gen)
    if transport == "mrc":
        # NSCC's base RTT starts at this pair's own fixed round trip: a leaf's own flows
        # are 51 ms where the fabric's longest is 65 (the built-ins at 1:5000).
        known = latency.base_rtt_s(topo, host, peer) if cfg.rtt_known else 0.0
        return MrcConnection(cfg, profile(topo, host, peer, cfg), local, remote, memory,
                             known_rtt=known)
    key = flow_key(host, peer)
    if topo.ecmp:
        # Hashed on generation 0's number (first_qpn): the same spines in every column.
        prof = ecmp_profile(topo, host, peer, ecmp_entropies(host, peer, first_qpn(local)))
        # The fabric's own routing reconverges there (fabric/inject.py): the QP keeps
        # its flow, as a real RC QP does, and retries until the route is back or its
        # retry count runs out. (On uSID fabrics it re-hashes itself after the delay.)
        cfg = replace(cfg, roce_reconvergence=math.inf)
    else:
        prof = profile(topo, host, peer, cfg)
    return RoceConnection(cfg, prof, local, remote, memory, flow_key=key)
