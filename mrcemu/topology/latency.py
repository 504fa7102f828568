"""The fabric's fixed latencies at the scale model's scale (docs/topologies.md, the scale model).

The built-in fabrics are a 1:5000 model of the white paper's: a 100 Gb/s plane is a
20 Mb/s link. A scale model is faithful only if its times scale with its rates, so
the paper's measured latencies (5.2.1, ib_write_lat one way: 5.09 us within a T0,
6.54 us across a T1) are multiplied by the same factor. Serialization already scales
with the link rate; what is added is the rest: each NIC's and each switch's fixed
latency. Pure: numbers in, numbers out.

The fit. A 2-byte write within a leaf crosses one switch, across leaves three (leaf,
spine, leaf); its serialization at 100 Gb/s is a few ns. So
    local = nic + 1 x switch = 5.09 us,  cross = nic + 3 x switch = 6.54 us
gives switch = 0.725 us a hop and nic = 4.365 us (both NICs, sender and receiver, one
way). At 1:5000 a cross-leaf round trip is then 65.4 ms and a same-leaf one 50.9 ms.
"""

from __future__ import annotations

from typing import Protocol


class Topology(Protocol):
    """What these need of a topology (model.Topology, which imports this module)."""

    planes: int
    leaves_per_plane: int
    host_link_mbps: float
    mtu: int
    scale: float | None
    nic_latency_us: float
    switch_latency_us: float

    @property
    def has_latency(self) -> bool: ...

    def leaf_of(self, host: int) -> int: ...

# The paper's fabric: what the scale divides.
PAPER_PLANE_MBPS = 100_000.0
# ib_write_lat, one way (white paper 5.2.1).
PAPER_ONE_WAY_LOCAL_US = 5.09
PAPER_ONE_WAY_CROSS_US = 6.54
# The fit above.
SWITCH_LATENCY_US = round((PAPER_ONE_WAY_CROSS_US - PAPER_ONE_WAY_LOCAL_US) / 2, 6)
NIC_LATENCY_US = round(PAPER_ONE_WAY_LOCAL_US - SWITCH_LATENCY_US, 6)


def time_scale(topo: Topology) -> float:
    """How many times slower than the paper's fabric this one runs: the topology's
    `scale`, or (unset) the paper's plane rate over this fabric's host link rate."""
    return topo.scale if topo.scale is not None else PAPER_PLANE_MBPS / topo.host_link_mbps


def hops(topo: Topology, a: int, b: int) -> int:
    """Switches a packet from host a to host b crosses: its leaf, or leaf, spine, leaf."""
    return 1 if topo.leaf_of(a) == topo.leaf_of(b) else 3


def one_way_s(topo: Topology, n_hops: int) -> float:
    """The fixed one-way latency over `n_hops` switches, in this fabric's seconds."""
    return time_scale(topo) * (topo.nic_latency_us + n_hops * topo.switch_latency_us) * 1e-6


def base_rtt_s(topo: Topology, a: int, b: int) -> float:
    """The fixed part of a round trip between two hosts (serialization and queueing
    come on top)."""
    return 2 * one_way_s(topo, hops(topo, a, b))


def longest_rtt_s(topo: Topology) -> float:
    """The fixed part of the longest round trip between two hosts: across leaves, or
    within the one leaf of a fabric that has one."""
    return 2 * one_way_s(topo, 3 if topo.leaves_per_plane > 1 else 1)


def bdp_packets(topo: Topology, payload: int) -> int:
    """Packets of `payload` bytes a host has in flight over the longest base round trip
    with every plane at line rate: what windows and the SACK span must carry."""
    return int(topo.planes * topo.host_link_mbps * 1e6 * longest_rtt_s(topo) / (8 * payload))


def delay_ring_bytes(topo: Topology) -> int:
    """The bytes of one of a NIC's delay-line rings (datapath/delay.c): twice what the
    host's ports bring in at line rate over the longest one-way latency, plus a few
    frames, so only a fabric running past line rate fills it (and a full ring drops and
    counts). 0 without latency."""
    if not topo.has_latency:
        return 0
    line_rate = topo.planes * topo.host_link_mbps * 1e6 / 8  # bytes/s over every port
    longest_one_way = one_way_s(topo, 3 if topo.leaves_per_plane > 1 else 1)
    return int(2 * line_rate * longest_one_way) + 4 * (14 + topo.mtu)


def delay_line_bytes(topo: Topology) -> int:
    """A NIC's delay line in all: a ring per one-way latency its frames can have (same
    leaf, and across leaves when there are several). It is held from the daemon's start,
    within the NIC memory budget."""
    return delay_ring_bytes(topo) * (2 if topo.leaves_per_plane > 1 else 1)


def describe(topo: Topology, slowdown: float = 1.0) -> dict:
    """What a report says of the scale, for a run on `topo` slowed `slowdown` times
    (`topo` is the slowed fabric): the model's scale (the paper's plane over this
    fabric's, before any --slowdown, which is also the factor from the report's seconds
    to the paper's), the slowdown, and the base round trips in the report's seconds. A
    run's report gives the fabric's own times at full speed (scenario/fullspeed.py), so
    the factor is the model's and the round trips are the unslowed fabric's."""
    k = time_scale(topo) / slowdown
    return {"time_scale": round(k, 3), "slowdown": slowdown,
            "latency": topo.has_latency,
            "base_rtt_s": {"cross_leaf": round(2 * one_way_s(topo, 3) / slowdown, 6),
                           "same_leaf": round(2 * one_way_s(topo, 1) / slowdown, 6)}}


def duration(s: float) -> str:
    """Seconds as people read them: 65.4 ms, 13.1 µs, 2.31 s."""
    if s == 0:
        return "0 s"
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(s) >= f or unit == "ns":
            return f"{s / f:.3g} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def on_paper(s: float, scale: dict) -> str:
    """A time of this run, and what it is on the paper's fabric: '65.4 ms here = 13.1 µs
    on the paper's fabric'. `scale` is `describe`'s block."""
    return f"{duration(s)} here = {duration(s / scale['time_scale'])} on the paper's fabric"


def scale_line(scale: dict) -> str:
    """report.md's and send's one sentence on the scale (report.md says apart how much
    slower the run went: its times are at full speed all the same)."""
    head = (f"Scale model 1:{scale['time_scale']:g} of the paper's fabric: rates divided "
            f"by it, times multiplied.")
    if not scale["latency"]:
        return head + " Fixed latency off (nic_latency_us and switch_latency_us 0)."
    return (head + f" Base round trip {on_paper(scale['base_rtt_s']['cross_leaf'], scale)} "
            f"across leaves, {duration(scale['base_rtt_s']['same_leaf'])} within a leaf.")
