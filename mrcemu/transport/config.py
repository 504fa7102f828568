"""Transport knobs. Times are seconds on the caller's monotonic clock."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransportConfig:
    pmtu: int = 4096  # payload bytes per data packet
    min_rto: float = 0.100  # above the two trim-bounded queues a path can cross (~50 ms here)
    max_rto: float = 1.0
    init_cwnd: int = 64 * 4096  # bytes
    max_cwnd: int = 512 * 4096
    min_cwnd: int = 4096
    target_delay: float = 0.020  # queueing delay NSCC aims for, above the base RTT
    sack_every: int = 4  # packets between SACKs
    sack_delay: float = 0.002  # a SACK goes out at most this long after a packet
    reorder_window: float = 0.005  # RACK: later-sent packet acked this much earlier = loss
    rcv_window: int = 8192  # PSNs the receiver accepts beyond its cumulative ACK
    probe_interval: float = 0.050
    ev_min_active: int = 1  # per destination: never fall below this many usable EVs
    ev_backups_per_path: int = 1  # EV variants per path held in the backup set
    seed: int = 1
    # RoCE baseline
    roce_window: int = 16  # packets in flight
    roce_timeout: float = 0.2  # local ACK timeout; doubles on each retry
    roce_ack_every: int = 8
    roce_retry_count: int = 7
    roce_reconvergence: float = 2.0  # emulated routing reconvergence delay
