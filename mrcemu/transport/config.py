"""Transport knobs. Times are seconds on the caller's monotonic clock.

`TransportConfig.for_topology` is the one place a fabric's config is made: the
fabric manager makes it at `up`, snapshots it into the state, and hands it to every
NIC daemon; whoever needs it later reads the snapshot.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

from mrcemu.datapath import MAX_DEVIATIONS
from mrcemu.errors import MrcemuError
from mrcemu.topology import latency
from mrcemu.topology.paths import EV_VARIANTS
from mrcemu.transport import dcqcn
from mrcemu.transport.lb import POLICIES
from mrcemu.wire.layout import mrc_data_overhead


class _Fabric(Protocol):
    mtu: int
    host_link_mbps: float
    fabric_link_mbps: float
    trim_threshold_bytes: int
    planes: int
    leaves_per_plane: int
    scale: float | None
    nic_latency_us: float
    switch_latency_us: float

    def leaf_of(self, host: int) -> int: ...


# The host link rate the clocks below were chosen for: 20 Mb/s, where a 4 KiB packet
# takes 1.7 ms on the wire and a trim-bounded queue ~25 ms to drain.
REFERENCE_MBPS = 20.0
# The built-ins' scale model: a 100 Gb/s plane at REFERENCE_MBPS.
REFERENCE_SCALE = latency.PAPER_PLANE_MBPS / REFERENCE_MBPS
PLANE_SHARES = ("capacity", "paths", "full")  # TransportConfig.plane_share
# The clocks that are multiples of a packet's wire time (or of a queue's drain time), and
# so scale with the link rate. Routing reconvergence is the routing protocol's, not the
# link's, and does not.
RATE_CLOCKS = ("min_rto", "max_rto", "target_delay", "network_rtt", "nack_delay",
               "sack_delay", "probe_interval",
               "ack_slack", "roce_timeout")
# DCQCN's clocks are the paper fabric's, stretched by the scale model (transport/dcqcn.py):
# (field, microseconds on the paper's fabric).
DCQCN_CLOCKS = (("dcqcn_cnp_interval", dcqcn.CNP_INTERVAL_US),
                ("dcqcn_alpha_interval", dcqcn.ALPHA_INTERVAL_US),
                ("dcqcn_increase_interval", dcqcn.INCREASE_INTERVAL_US))
# NSCC's target: this share of the queueing a trim threshold allows (UEC's reference:
# 0.75 of its network RTT with trimming, its queues holding about a round trip). The
# built-ins' 60 kB threshold at 20 Mb/s is 24 ms of queue.
TARGET_SHARE = 0.75
REFERENCE_TRIM_QUEUE = 60_000 * 8 / (REFERENCE_MBPS * 1e6)
# What a faithful run lets the hosts add to a packet's round trip, at the reference rate:
# a paced send up to the fidelity verdict's p99 limit late (7 ms, the pacer's two-frame
# bucket) and its SACK held up to `sack_delay` (2 ms). Scaled like the clocks.
HOST_SLACK = 0.009
# What the emulated NICs add to a round trip whatever the rate (their Python policy,
# AF_PACKET and the veths), measured as NSCC's sampled base RTT between two hosts on one
# leaf at 10 Gb/s: 0.28-0.30 ms where the fixed latency is 0.10 ms. It does not scale.
HOST_ROUND_TRIP = 0.0003
# The fixed latency is what an unloaded round trip reads when the hosts' own part is
# under a tenth of it (the built-ins: 51-65 ms at 20 Mb/s, 8 ms at 160).
KNOWN_RTT_FLOOR = 10 * HOST_ROUND_TRIP


def wire_rtt(pmtu: int, host_link_mbps: float) -> float:
    """A round trip with no fixed latency: about four packet times on the wire."""
    return 4 * (pmtu + mrc_data_overhead()) * 8 / (host_link_mbps * 1e6)


def host_bdp(planes: int, host_link_mbps: float, rtt: float) -> int:
    """Bytes a host's ports carry over `rtt` at line rate."""
    return round(planes * host_link_mbps * 1e6 / 8 * rtt)


def clock_scale(host_link_mbps: float) -> float:
    """How many times slower than the reference the clocks of a fabric with these host
    links run (and the fidelity limits with them)."""
    return REFERENCE_MBPS / host_link_mbps


# The verbs' local ACK timeout unit: a QP's `timeout` n waits 4.096 us x 2^n.
ACK_TIMEOUT_UNIT = 4.096e-6


def retry_budget(timeout: int, retry_cnt: int, slowdown: float) -> float | None:
    """How long a QP's request may go unacknowledged before it fails with a retry-exceeded
    error: a NIC's `timeout` x (`retry_cnt` + 1), on the program's clock, which runs
    `slowdown` times faster than the fabric's. None: `timeout` 0, the verbs' "wait
    forever"."""
    if timeout == 0:
        return None
    return ACK_TIMEOUT_UNIT * (1 << timeout) * (retry_cnt + 1) * slowdown


def pmtu_for(mtu: int) -> int:
    """Largest RoCE PMTU (256..4096) whose packet fits the link MTU."""
    room = mtu - mrc_data_overhead()
    p = 4096
    while p > room and p > 256:
        p //= 2
    return p


@dataclass(frozen=True)
class TransportConfig:
    pmtu: int = 4096  # payload bytes per data packet
    # The last resort, after per-EV order, the overdue scan and its probe: above the
    # trim-bounded queueing a packet can meet on the built-ins (three 24 ms queues at
    # 20 Mb/s) plus an unloaded round trip, so it calls no queued packet lost.
    min_rto: float = 0.100
    max_rto: float = 1.0
    init_cwnd: int = 64 * 4096  # bytes
    max_cwnd: int = 512 * 4096
    min_cwnd: int = 4096
    # NSCC (transport/nscc.py), as UEC's reference derives it from the network
    # (for_topology): the queueing delay it aims for, 0.75 of what a trim-bounded queue
    # holds (the reference's 0.75 of its network RTT, where its queues hold about one);
    # the network RTT, its adjustment period; the delay a trim's NACK stands for, the
    # trim-bounded queue's; and the host's BDP over the network RTT, which scales its
    # increases. At 20 Mb/s a 60 kB trim threshold is 24 ms of queue; these defaults are
    # eight such ports with no fixed latency (with the scale model's, the built-ins'
    # longest round trip is 65.4 ms).
    target_delay: float = TARGET_SHARE * REFERENCE_TRIM_QUEUE
    network_rtt: float = wire_rtt(4096, REFERENCE_MBPS)
    nack_delay: float = REFERENCE_TRIM_QUEUE
    bdp_bytes: int = host_bdp(8, REFERENCE_MBPS, wire_rtt(4096, REFERENCE_MBPS))
    # Whether an unloaded round trip reads the fabric's fixed latency (the scale model's,
    # beside which the hosts' processing is small: KNOWN_RTT_FLOOR). Where it does, a
    # connection's NSCC starts its base RTT at its own pair's fixed round trip (the
    # factory passes it), as the reference's configured one does; where not, the first
    # sample sets it.
    rtt_known: bool = False
    sack_every: int = 4  # packets between SACKs
    sack_delay: float = 0.002  # a SACK goes out at most this long after a packet
    # What the hosts may add to an ack (HOST_SLACK): an EV is stopped, and overdue, after
    # its own smoothed RTT plus the deviations below plus this; a stopped EV's probe is unanswered
    # after the connection's smoothed RTT plus this; a per-EV order hole waits this long
    # for a NACK that says the packet was trimmed, not lost (docs/transport.md, loss recovery).
    ack_slack: float = HOST_SLACK
    # An EV is stopped (no new data on it, its probes sent) once its oldest packet is
    # older than its own smoothed RTT plus `stop_deviations` deviations plus `ack_slack`;
    # the packet itself goes again only at `overdue_deviations` (docs/transport.md, loss recovery;
    # docs/transport.md, "Late is judged ... at two ages").
    # 0 <= stop <= overdue <= datapath.MAX_DEVIATIONS.
    stop_deviations: float = 1.0
    overdue_deviations: float = 6.0
    rcv_window: int = 8192  # PSNs the receiver accepts beyond its cumulative ACK
    probe_interval: float = 0.050
    # Path health (transport/pathmon.py; docs/transport.md, "Path health", says why these):
    ce_skip_rotations: int = 1  # an echoed CE mark skips the EV this many rotations
    trim_skip_rotations: int = 2  # a mid-path trim, this many
    probes_to_restore: int = 2  # answered probes that bring an ASSUMED_BAD EV back
    ev_min_active: int = 1  # per destination: never fall below this many usable EVs
    ev_backups_per_path: int = 1  # EV variants per path held in the backup set
    # Active EVs a path: each an EV variant of it (the same route, another EV number), as
    # uet-htsim's 64 EVs hash onto its 4 spines, 16 a spine. One here: a plane's EV set
    # is its 4 paths. More make a policy's sweep of the set span a round trip, as the
    # reference's does (docs/load-balancing.md); variants are 16 a path in all.
    ev_per_path: int = 1
    # Active EVs a plane (0: one per path). paper experiment E7 restricts a connection to 2 a
    # plane, as real NICs' EV profiles can (mrc_ctl.h).
    ev_set_per_plane: int = 0
    # The planes a connection sprays over (empty: all). With `ev_set_per_plane` 1 it pins
    # a connection to one EV (the plane's lowest spine): paper experiment E8.
    ev_planes: tuple[int, ...] = ()
    # A plane's share of the spraying when it lost a path (its EV retired) and each of its
    # other paths has its EV: `capacity`, a backup EV on another of its paths takes the
    # retired one's share while that path's queue stays quiet, and hands it back at the
    # path's first mark (evs.py: EvProfile.congested); `paths`, never (one share a usable
    # path); `full`, always (the reference design's rule; kept to compare).
    plane_share: str = "capacity"
    # Which EV each packet takes (transport/lb; docs/load-balancing.md): MRC's own
    # profile, or a baseline a researcher compares it with.
    load_balancing: str = "mrc"
    seed: int = 1
    # The verbs' retry limit (ibv_modify_qp's `timeout` and `retry_cnt`): `retry_budget`
    # of them. A program's QP sets its own; these are the NIC's own connections' (a
    # scenario's workload, `mrcemu send`): NCCL's defaults for its queue pairs, the
    # patience of a training job's, 8.6 s unslowed: a shorter one fails connections an
    # overloaded host only slows (an RTO's backoff is seconds). MRC counts any
    # acknowledgement on any path as progress: the budget runs out only when nothing at
    # all is acknowledged while packets are out.
    qp_timeout: int = 18
    qp_retry_cnt: int = 7
    slowdown: float = 1.0  # `up --slowdown`: the program's clock against the fabric's
    # RoCE baseline
    # Packets a QP has in flight: what a port's queues held in flight with no fixed
    # latency; for_topology adds the port's bandwidth-delay product over the scale
    # model's fixed round trip, so the window never limits a QP below line rate and
    # DCQCN, not the window, sets its rate (real RC has no such window on WRITEs).
    roce_window: int = 16
    roce_timeout: float = 0.2  # local ACK timeout; doubles on each retry
    roce_ack_every: int = 8
    roce_retry_count: int = 7
    roce_reconvergence: float = 2.0  # emulated routing reconvergence delay
    # DCQCN (transport/dcqcn.py): RoCE data is ECN-capable, a responder answers CE with
    # CNPs and a requester cuts its rate on each. The reference's clocks at the built-ins'
    # 1:5000 (for_topology takes the fabric's own scale): a CNP at most every 250 ms a
    # QP (NP), alpha's decay (K) and a rate increase (T) every 275 ms, or 10 MB sent (B).
    roce_dcqcn: bool = True
    roce_line_rate: float = REFERENCE_MBPS * 1e6 / 8  # bytes/s of a QP's port
    dcqcn_cnp_interval: float = dcqcn.CNP_INTERVAL_US * 1e-6 * REFERENCE_SCALE
    dcqcn_alpha_interval: float = dcqcn.ALPHA_INTERVAL_US * 1e-6 * REFERENCE_SCALE
    dcqcn_increase_interval: float = dcqcn.INCREASE_INTERVAL_US * 1e-6 * REFERENCE_SCALE
    dcqcn_increase_bytes: int = dcqcn.INCREASE_BYTES

    def __post_init__(self) -> None:
        for name, least in (("ce_skip_rotations", 1), ("trim_skip_rotations", 1),
                            ("probes_to_restore", 1), ("ev_set_per_plane", 0),
                            ("ev_per_path", 1), ("ev_backups_per_path", 0)):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= least):
                raise MrcemuError(f"transport config: {name} must be a whole number "
                                  f">= {least}, not {getattr(self, name)!r}")
        for name in ("stop_deviations", "overdue_deviations"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool)
                    and 0 <= v <= MAX_DEVIATIONS):
                raise MrcemuError(f"transport config: {name} must be a number from 0 to "
                                  f"{MAX_DEVIATIONS}, not {v!r}")
        for name, most in (("qp_timeout", 31), ("qp_retry_cnt", 7)):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= most):
                raise MrcemuError(f"transport config: {name} must be a whole number from 0 "
                                  f"to {most} (the verbs' range), not {v!r}")
        if not (isinstance(self.slowdown, (int, float)) and self.slowdown > 0):
            raise MrcemuError(f"transport config: slowdown must be above 0, not "
                              f"{self.slowdown!r}")
        if self.stop_deviations > self.overdue_deviations:
            raise MrcemuError("transport config: stop_deviations "
                              f"({self.stop_deviations}) must not exceed overdue_deviations "
                              f"({self.overdue_deviations}): an EV is stopped no later "
                              "than its packet goes again")
        if self.ev_per_path + self.ev_backups_per_path > EV_VARIANTS:
            raise MrcemuError(f"transport config: ev_per_path ({self.ev_per_path}) plus "
                              f"ev_backups_per_path ({self.ev_backups_per_path}) must be at "
                              f"most {EV_VARIANTS}: the EV variants a path has")
        if self.plane_share not in PLANE_SHARES:
            raise MrcemuError(f"transport config: plane_share must be one of "
                              f"{', '.join(PLANE_SHARES)}, not {self.plane_share!r}")
        if self.load_balancing not in POLICIES:
            raise MrcemuError(f"transport config: load_balancing must be one of "
                              f"{', '.join(POLICIES)}, not {self.load_balancing!r}")
        planes = self.ev_planes
        if (not isinstance(planes, tuple) or len(set(planes)) != len(planes)
                or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0
                           for p in planes)):
            raise MrcemuError("transport config: ev_planes must be distinct plane numbers "
                              f"(0 and up), not {planes!r}")

    @classmethod
    def for_topology(cls, topo: _Fabric, seed: int = 1,
                     slowdown: float = 1.0) -> TransportConfig:
        """The config a fabric runs with: the PMTU its links carry, the run's seed (which
        orders every EV profile's spraying), and clocks scaled to its links: on links
        k times slower than 20 Mb/s every packet and queue takes k times longer, so the
        RTO and the rest are k times longer too. The same protocol then
        runs on a slower clock, which is how a small host emulates a fabric faithfully
        (fewer packets a second, the same number of packets per RTT). `slowdown` is
        `mrcemu run --slowdown`: the whole experiment runs that many times slower, so
        the emulated routing reconvergence does too (the links are already slowed in
        `topo`)."""
        k = clock_scale(topo.host_link_mbps)
        base = cls()
        clocks = {name: getattr(base, name) * k for name in RATE_CLOCKS}
        clocks |= {name: us * 1e-6 * latency.time_scale(topo) for name, us in DCQCN_CLOCKS}
        # The scale model's fixed latency (topology/latency.py): no timeout may fire
        # within a round trip's fixed part, and the windows must carry what a host has
        # in flight over it (both as they were with no latency).
        pmtu = pmtu_for(topo.mtu)
        rtt = latency.longest_rtt_s(topo)
        bdp_packets = latency.bdp_packets(topo, pmtu)
        bdp = bdp_packets * pmtu
        # A RoCE QP is on one port: its share of the host's BDP, rounded up.
        port_bdp = -(-bdp_packets // topo.planes)
        for name in ("min_rto", "max_rto", "roce_timeout"):
            clocks[name] += rtt
        # NSCC's delays, from the trim threshold's queue and the network RTT (without the
        # scale model's latency a round trip is about four packet times: the wire's).
        if topo.trim_threshold_bytes > 0:
            trim_queue = topo.trim_threshold_bytes * 8 / (topo.fabric_link_mbps * 1e6)
        else:
            trim_queue = 0.0
        clocks["network_rtt"] = rtt or wire_rtt(pmtu, topo.host_link_mbps)
        clocks["nack_delay"] = trim_queue
        clocks["target_delay"] = (TARGET_SHARE * trim_queue if trim_queue
                                  else clocks["network_rtt"])
        return cls(pmtu=pmtu, seed=seed, slowdown=slowdown,
                   roce_line_rate=topo.host_link_mbps * 1e6 / 8,
                   roce_reconvergence=base.roce_reconvergence * slowdown,
                   init_cwnd=max(base.init_cwnd, bdp), max_cwnd=max(base.max_cwnd, 2 * bdp),
                   bdp_bytes=host_bdp(topo.planes, topo.host_link_mbps, clocks["network_rtt"]),
                   rtt_known=rtt >= KNOWN_RTT_FLOOR,
                   roce_window=base.roce_window + port_bdp,
                   **clocks)

    @property
    def retry_budget(self) -> float | None:
        """Seconds a request of the NIC's own may go unacknowledged (None: no limit)."""
        return retry_budget(self.qp_timeout, self.qp_retry_cnt, self.slowdown)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TransportConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise MrcemuError(f"transport config: unknown field(s) {', '.join(unknown)}; "
                              f"known: {', '.join(sorted(known))}")
        if isinstance(data.get("ev_planes"), list):  # JSON has no tuples
            data = {**data, "ev_planes": tuple(data["ev_planes"])}
        return cls(**data)
