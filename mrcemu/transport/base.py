"""What both transports share: the message and counter records, decoding untrusted
bytes without ever raising, the event queue, and the contract the I/O shell drives.

The NIC daemon and the simulated network see a `Connection` and nothing else: no
isinstance, no private attributes. Each transport fills in the same entry points.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from mrcemu import datapath
from mrcemu.transport.events import Event, MessageCompleted
from mrcemu.transport.evs import EvProfile
from mrcemu.transport.trace import TxTrace
from mrcemu.wire import codec
from mrcemu.wire.constants import PSN_MASK


def unwrap(psn24: int, ref: int) -> int:
    """The full PSN nearest to `ref` whose low 24 bits are `psn24`."""
    base = ref - (1 << 23)
    return base + ((psn24 - base) & PSN_MASK)


def put_frames(out: list[tuple[int, bytes]] | datapath.Ports,
               frames: Iterable[tuple[int, bytes]]) -> int:
    """(EV, frame) pairs appended to a list, or queued on the NIC's ports (on the port of
    each EV's plane): how many."""
    n = 0
    if isinstance(out, list):
        for f in frames:
            out.append(f)
            n += 1
        return n
    for ev, pkt in frames:
        out.queue(ev, pkt)
        n += 1
    return n


@dataclass
class Message:
    msn: int
    va: int
    rkey: int
    data: memoryview
    first_psn: int
    npkts: int
    imm: int | None
    acked: int = 0
    posted_at: float = 0.0
    done_at: float | None = None
    size: int = 0  # bytes; kept when the data is released at completion

    def __post_init__(self) -> None:
        self.size = len(self.data)

    def complete(self, now: float) -> MessageCompleted:
        """Done: remember when, let go of the source buffer, and say so."""
        self.done_at = now
        self.data = memoryview(b"")
        return MessageCompleted(self.msn, self.size, self.npkts, self.posted_at, now)


@dataclass
class Stats:
    tx_data: int = 0
    tx_bytes: int = 0
    retransmits: int = 0
    rtos: int = 0
    nacks_rx: int = 0
    remote_access_naks: int = 0  # requests the peer refused (a remote access NAK)
    access_naks_tx: int = 0  # remote access NAKs we sent, as responder (MRC)
    trims_nacked: int = 0
    sacks_rx: int = 0
    rx_data: int = 0
    rx_bytes: int = 0
    rx_dup: int = 0
    sacks_tx: int = 0
    acks_tx: int = 0  # RoCE cumulative ACKs (ACKNOWLEDGE), one per completed message
    acks_rx: int = 0
    nacks_tx: int = 0
    probes_tx: int = 0
    probes_answered: int = 0
    reverse_probes: int = 0  # B9: probes that keep a receiving connection's ack EVs fresh
    reverse_adopted: int = 0  # of their answers, those that changed the reverse set
    # a port-status update sent again: no answer came to the last copy within a probe's
    # round trip (one lost copy otherwise left the peer on a dead or a revived plane)
    port_updates_resent: int = 0
    dropped: Counter = field(default_factory=Counter)
    per_ev: Counter = field(default_factory=Counter)  # data packets sent, by EV
    # MRC's loss recovery (docs/transport.md): packets per-EV order found lost, and of
    # those the ones a trailing NACK showed trimmed; EVs stopped
    # as overdue, back in use, retired for an unanswered probe or for a data probe's
    # answer that proved a loss; packets queued to go again because they were overdue,
    # and because their EV was retired (or its plane went down): an ack that comes
    # while one waits for room in the window cancels its copy, so `retransmits` may be
    # fewer
    hole_losses: int = 0
    holes_trimmed: int = 0
    ev_stops: int = 0
    ev_stops_cleared: int = 0
    probe_timeouts: int = 0
    probe_proofs: int = 0
    overdue_resent: int = 0
    retired_resent: int = 0
    # NSCC's window reactions (MRC; transport/nscc.py): quick adapts, multiplicative
    # decreases
    cc_quick_adapts: int = 0
    cc_decreases: int = 0
    losses: int = 0  # packets found lost and not trimmed (per-EV order or RTO)
    losses_ignored: int = 0  # of those, RTO losses on an EV heard from since they went
    losses_unqueued: int = 0  # losses the data path could not queue (out of memory)
    # marked SACKs from a thinned EV (evs.py), heard by NSCC as unmarked (sender.c)
    ce_thinned: int = 0
    # acks of PSNs never sent (a stale copy from a QP made before this one, or forged),
    # ignored whole (sender.c)
    acks_beyond_sent: int = 0
    # CE-marked data received (MRC echoes it in a SACK; RoCE answers it with a CNP), and
    # DCQCN's CNPs sent and received (RoCE)
    rx_ce: int = 0
    cnps_tx: int = 0
    cnps_rx: int = 0
    lb: Counter = field(default_factory=Counter)  # the load balancer's own counters

    def to_json(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if not isinstance(v, Counter)}
        d["dropped"] = dict(self.dropped)
        d["lb"] = dict(self.lb)
        d["per_ev"] = {f"0x{k:08x}": v for k, v in self.per_ev.items()}
        return d


class Connection(Protocol):
    """One QP toward one peer, sans-IO: fed packets and the time, it returns packets
    and timers and reports `Event`s."""

    local_qpn: int
    remote_qpn: int
    stats: Stats
    tx_trace: TxTrace
    profile: EvProfile

    def post_write(self, data: bytes | bytearray | memoryview, remote_va: int, rkey: int,
                   now: float, imm: int | None = None) -> int: ...
    def receive(self, pkt: bytes | memoryview, now: float) -> None: ...
    def receive_frame(self, pkt: bytes | memoryview, now: float,
                      via: bytes | None = None) -> None: ...
    def receive_decoded(self, d: codec.Decoded, now: float) -> None: ...
    def packets_to_send(self, now: float, budget: int | None = None
                        ) -> list[tuple[int, bytes]]: ...
    def send_to(self, ports: datapath.Ports, now: float, budget: int) -> int: ...
    def attach(self, ports: datapath.Ports) -> None: ...
    def received(self, now: float) -> None: ...
    def timer(self, now: float) -> None: ...
    def next_timer(self) -> float | None: ...
    def loop_state(self) -> tuple[bool, float | None, float | None]: ...
    def port_status(self, planes_up: set[int], now: float, announce: bool = True) -> None: ...
    def next_event(self) -> Event | None: ...
    def message(self, msn: int) -> Message | None: ...
    def unfinished(self) -> Iterable[Message]: ...
    def snapshot(self, now: float) -> dict: ...
    def cc_state(self) -> dict[str, float]: ...
    @property
    def plane_mask(self) -> int: ...
    @property
    def rx_bytes(self) -> int: ...
    @property
    def failed(self) -> bool: ...
    @property
    def rto(self) -> float: ...
    @property
    def cwnd(self) -> int | None: ...
    @property
    def srtt(self) -> float | None: ...
    @property
    def busy(self) -> bool: ...
    @property
    def idle(self) -> bool: ...


class ConnectionBase:
    """The shared half of both transports."""

    stats: Stats
    profile: EvProfile
    # Who frames and parses: the compiled data path. The Python codec is the same
    # functions, byte for byte (tests/unit/datapath); `make bench` swaps it in per
    # connection to measure the difference side by side.
    wire = datapath

    def __init__(self) -> None:
        self._events: deque[Event] = deque()
        # The EV profile reports its state changes into the same queue, so the drained
        # order is the order things happened in.
        self.profile.emit = self._events.append

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    def send_to(self, ports: datapath.Ports, now: float, budget: int) -> int:
        """What `packets_to_send` returns, queued on the NIC's ports: how many frames."""
        return put_frames(ports, self.packets_to_send(now, budget))

    def loop_state(self) -> tuple[bool, float | None, float | None]:
        """Whether the NIC's compiled loop may serve this connection without the policy
        (the policy's next timer meanwhile, and from when data is news to it): not by
        default."""
        return False, None, None

    def attach(self, ports: datapath.Ports) -> None:
        """Let the NIC's ports hand this QP's packets to its compiled data path, if it
        has one (Ports.attach); the rest reach `receive_frame`."""

    def cc_state(self) -> dict[str, float]:
        """Where the congestion control's window and delay estimate stand, for reports
        (none by default; its reactions are counted in `stats`)."""
        return {}

    @property
    def plane_mask(self) -> int:
        """The planes whose ports this QP sends data on (bit p: plane p): the NIC gives
        it only those ports' free slots (nic/daemon.py, flush). The free slots of a port
        it never uses let it queue that many more frames on the ones it does, a standing
        queue in the host that every RTT sample then holds (paper experiment E2's four ports
        down: 64 frames a port, the round trip 0.22 s growing to 0.8)."""
        down = self.profile.planes_down
        return sum(1 << p for p in self.profile.planes if p not in down)

    def received(self, now: float) -> None:
        """The NIC's data path handled packets for this QP itself (Ports.receive)."""

    def packets_to_send(self, now: float, budget: int | None = None
                        ) -> list[tuple[int, bytes]]:
        raise NotImplementedError

    def receive(self, pkt: bytes | memoryview, now: float) -> None:
        """A packet from the simulated network: what is malformed is counted here."""
        try:
            self.receive_frame(pkt, now)
        except codec.DecodeError as e:
            self._malformed(e.reason)

    def _malformed(self, reason: str) -> None:
        self.stats.dropped[f"malformed_{reason}"] += 1

    def receive_frame(self, pkt: bytes | memoryview, now: float,
                      via: bytes | None = None) -> None:
        """One packet as the NIC read it, `via` the address an encapsulated packet's
        outer DA must be. Raises DecodeError (reason not_our_usid for a wrong outer DA)."""
        d = self.wire.decode(pkt)
        if via is not None and d.via is not None and d.via != via:
            raise codec.DecodeError("not_our_usid")
        self.receive_decoded(d, now)

    @property
    def rx_bytes(self) -> int:
        """Payload bytes placed in memory so far."""
        return self.stats.rx_bytes

    def receive_decoded(self, d: codec.Decoded, now: float) -> None:
        raise NotImplementedError
