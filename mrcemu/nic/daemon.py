"""One NIC per host, in the host's namespace: AF_PACKET per plane port, a JSON control
socket, JSON-lines logs on the monotonic clock. Never Scapy, never a crash on bad input.

Run as `python -m mrcemu.nic.daemon --host 3 --topology-json '{...}'` inside the
namespace, or forked into it by `--spawner` (nic/spawner.py: what the fabric's agent does
at `up`, with its topology snapshot).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Iterable
from ipaddress import IPv6Address

from mrcemu import datapath
from mrcemu.errors import MrcemuError
from mrcemu.nic import collector, handlers, meter, sink
from mrcemu.nic.control import ControlServer, log_path, socket_path
from mrcemu.nic.history import History
from mrcemu.nic.links import LinkWatch
from mrcemu.nic.programs import Programs
from mrcemu.nic.programs import socket_path as programs_socket
from mrcemu.nic.wakeups import TimerHold, Wakeups
from mrcemu.topology import Layout, Topology, latency
from mrcemu.topology.addressing import Kind, container_usids, host_address, split_usid
from mrcemu.transport.base import Connection
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import (
    ConnectionFailed,
    Event,
    EvStateChanged,
    MessageCompleted,
    MessageFailed,
    MessageReceived,
)
from mrcemu.transport.factory import make_connection
from mrcemu.transport.memory import MemoryTable
from mrcemu.transport.profiles import newer_generation, qp_of
from mrcemu.wire import codec
from mrcemu.wire.constants import (
    ENDPOINT_DQPN,
    IPPROTO_IPV6,
    ROCE_UDP_PORT,
    Wake,
)

ConnKey = tuple[int, str, int]  # peer, transport, QP index of the pair
ETH_P_IPV6 = 0x86DD
PACKET_IGNORE_OUTGOING = 23
SOL_PACKET = 263  # not exported by Python's socket module
# Frames a port may have waiting in our backlog: the NIC paces each port at its line
# rate itself, so the kernel's qdisc (and our RTT samples) never see a standing queue.
PORT_SLOTS = 2
# Pace a little under line rate: with no ECN-marking switch yet, a port fed at exactly
# its rate by four spines keeps a standing queue downstream that only loss can drain.
PACING = 0.97
# A port's token bucket holds about two frames: bursts stay short, the port stays busy
# (a late wake-up is made up for). What leaves at once waits in the host port's htb,
# which lets one frame through at a time on slow links (fabric/shaping.py): the wire
# never runs ahead of its rate. (One data frame here made 63 of 64 ports of a faithful
# ring all-reduce run below 90 % of their rate on this 2-core host.)
BUCKET = 2 * 9014
# Frames a port's queue holds: the transport fills PORT_SLOTS, control frames may add a
# few more; past this the frame is lost (counted in the ports' counters).
PORT_QUEUE = 64
# On fast links a port may hold this much line rate for the transport: at 10 Gb/s two
# frames drain in 7 us, less than one loop round, and every flush and system call then
# carried a frame or two (D1 measured 450 Mb/s with 2 slots, 690-820 with 13).
SLOT_TIME = 100e-6
# Received goodput is binned per plane at this width for reports (goodput over time).
RX_BIN = 0.01
# The longest the compiled loop runs before the policy's loop turns once more.
LOOP_LIMIT = 0.5


def port_slots(rate: float, mtu: int) -> int:
    """Frames a port may hold for the transport: at least PORT_SLOTS, and on fast links
    as many as SLOT_TIME of line rate, so that one flush and one system call carry a
    burst rather than a frame or two."""
    return min(PORT_QUEUE // 2, max(PORT_SLOTS, int(rate * SLOT_TIME / (14 + mtu))))


def announcers(keys: Iterable[tuple[int, str, int]]) -> set[tuple[int, str, int]]:
    """Of a daemon's connections (peer, transport, QP), those that announce our port
    status: the update is the NIC's, connectionless, one per peer NIC, so of the MRC
    connections with a peer the lowest QP's (the one the peer's NIC answers from)."""
    first: dict[int, int] = {}
    for peer, transport, qp in keys:
        if transport == "mrc" and qp < first.get(peer, qp + 1):
            first[peer] = qp
    return {(peer, "mrc", qp) for peer, qp in first.items()}


def mac_bytes(mac: str) -> bytes:
    return bytes(int(x, 16) for x in mac.split(":"))


class Nic:
    def __init__(self, host: int, topo: Topology, cfg: TransportConfig) -> None:
        self.host = host
        self.name = f"h{host}"
        self.topo = topo
        self.layout = Layout(self.topo)
        self.cfg = cfg
        # Registered regions and the source buffers of unfinished writes share one
        # budget: a request over it is refused before anything is allocated.
        self.memory = MemoryTable(budget=self.topo.nic_memory_mib << 20)
        # A connection is known by (peer, transport, QP index): RoCE's QP scaling gives a
        # pair several QPs; MRC's one QP a pair is index 0.
        self.conns: dict[ConnKey, Connection] = {}
        self.conn_settings: dict[ConnKey, dict] = {}  # what each was made with
        # The generation of each connection's QPN (profiles.GEN_STRIDE), the same at both
        # ends of a pair: the NIC client sets it whenever it has a pair made again. A
        # pair new to both ends starts at the fabric's last reconfiguration's (`epoch`,
        # every NIC's alike), where any connection made before it, even at one end
        # only, now is.
        self.conn_gen: dict[ConnKey, int] = {}
        self.epoch = 0
        self.by_qpn: dict[int, Connection] = {}
        self.history: dict[ConnKey, History] = {}
        self.t0 = time.monotonic()
        self.ports: dict[int, socket.socket] = {}
        self.iface: dict[int, str] = {}
        self.rate: dict[int, float] = {}  # bytes per second
        self.hold = TimerHold()  # the timers wait a little while frames are unread
        self.settled = 0  # messages completed and connections failed, ever
        for i in self.layout.interfaces[self.name]:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
            s.bind((i.name, ETH_P_IPV6))
            s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            s.setblocking(False)
            self.ports[i.plane] = s
            self.iface[i.plane] = i.name
            self.rate[i.plane] = PACING * i.mbps * 1e6 / 8
        # Our packets are ours, not the kernel's: these claim them from it, unread.
        self.sinks = [sink.udp_sink(ROCE_UDP_PORT), sink.protocol_sink(IPPROTO_IPV6)]
        self.port_address = {i.plane: host_address(i.plane, self.host).packed
                             for i in self.layout.interfaces[self.name]}
        # The ports' queues, pacing and burst I/O are compiled (ports.c): the requester
        # frames into them and data for a known QP goes from them to its responder.
        self.tx_ports = datapath.Ports(
            [(self.ports[i.plane].fileno(), i.plane,
              mac_bytes(i.peer_mac) + mac_bytes(i.mac) + b"\x86\xdd",
              self.port_address[i.plane], self.rate[i.plane])
             for i in self.layout.interfaces[self.name]],
            time.monotonic(), PORT_QUEUE, 14 + self.topo.mtu,
            port_slots(min(self.rate.values()), self.topo.mtu), BUCKET)
        # The scale model's fixed latency (topology/latency.py), held on receipt: a frame
        # from host h reaches the data path the one-way latency from h later.
        self.delay_bytes = self._set_delay()
        self.loop = datapath.Loop(self.tx_ports)
        self.ctl_path = socket_path(self.name)
        self.poller = select.epoll()
        self.control = ControlServer(self.ctl_path, lambda req: handlers.dispatch(self, req),
                                     self.poller)
        # Programs run on this host through the verbs shim (nic/programs.py).
        self.programs = Programs(self, programs_socket(self.name), self.poller)
        log_path(self.name).parent.mkdir(parents=True, exist_ok=True)
        self.log_file = open(log_path(self.name), "a", buffering=1)
        self.links = LinkWatch()
        self.poller.register(self.links.fileno(), select.EPOLLIN)
        self.planes_up = set(self.ports)
        self.malformed: dict[str, int] = {}
        self.running = True
        self.touched: set = set()  # connections that received since the last flush
        # The loop visits a connection when it received, when its timer is due, or when
        # it waits for send budget: never every connection it ever had.
        self.wake: Wakeups[Connection] = Wakeups()
        self.keys: dict[Connection, ConnKey] = {}
        self.rx_bins: dict[int, dict[int, int]] = {p: {} for p in self.ports}
        self.rx_bin_s = RX_BIN
        self.meter = meter.Meter(self.ports, self.rate, self.now(), self.tx_ports,
                                 collector.Pauses().install())

    def now(self) -> float:
        return time.monotonic()

    def log(self, event: str, **data: object) -> None:
        self.log_file.write(json.dumps({"t": round(self.now(), 6), "host": self.name,
                                        "event": event, **data}) + "\n")

    # ---- connections --------------------------------------------------------
    def conn(self, peer: int, transport: str, settings: dict | None = None,
             qp: int = 0, gen: int | None = None) -> Connection:
        """The connection with `peer` (its QP `qp` of the pair), made on first use, at
        generation `gen` (None: the pair's last, or the fabric's epoch for a new one).
        `settings` (a write's): transport settings of this connection alone, over the
        fabric's; a connection already made with others refuses them (MrcemuError), as a
        real NIC's QP keeps its profile."""
        key = (peer, transport, qp)
        c = self.conns.get(key)
        settings = settings or {}
        if c is not None and settings != self.conn_settings.get(key, {}):
            raise MrcemuError(f"the {transport} connection to h{peer} was made with settings "
                              f"{self.conn_settings.get(key, {})}, not {settings}: use the "
                              "same settings for every write of a pair")
        if c is None:
            cfg = (TransportConfig.from_json({**self.cfg.to_json(), **settings}) if settings
                   else self.cfg)
            if gen is not None:  # kept whole: only its QPN wraps (profiles.GENERATIONS)
                self.conn_gen[key] = gen
            c = make_connection(transport, self.topo, self.host, peer, cfg, self.memory, qp,
                                self.conn_gen.setdefault(key, self.epoch))
            self.conn_settings[key] = settings
            if self.planes_up != set(self.ports):
                c.port_status(self.planes_up, self.now(),
                              announce=key in announcers([*self.conns, key]))
            self.conns[key] = c
            self.keys[c] = key
            self.by_qpn[c.local_qpn] = c
            c.attach(self.tx_ports)
            self.history[key] = History()
            collector.freeze()  # a connection's tables live as long as it does
        return c

    def remake(self, key: ConnKey, settings: dict | None, gen: int) -> str | None:
        """Replace the connection `key` with a new one made with `settings` (None: the
        ones it had), as a QP destroyed and created again: PSNs, windows, EV states and
        counters start afresh, on the QPN of generation `gen`. The peer must remake its
        end at the same generation, or neither hears the other. Refused,
        with the reason, while the connection has writes unfinished or packets
        unacknowledged."""
        c = self.conns.get(key)
        if c is not None:
            if self.busy(c):
                return (f"h{self.host}'s {key[1]} connection to h{key[0]} is busy: wait for "
                        "its writes to finish")
            if settings is None:
                settings = self.conn_settings.get(key, {})
            del self.conns[key], self.keys[c], self.history[key]
            self.conn_settings.pop(key, None)
            self.by_qpn.pop(c.local_qpn, None)
            # Its copies still in flight (a duplicate's SACK, the completion's second
            # ack, a delay line's backlog) now come back as frames of a QP that is gone.
            self.tx_ports.detach(c.local_qpn)
            self.wake.schedule(c, None, self.now())
            self.wake.fed(c)
            self.touched.discard(c)
            del c
            collector.thaw()  # its cycles are garbage now; conn() freezes the rest again
        self.conn(key[0], key[1], settings, key[2], gen)
        return None

    @staticmethod
    def busy(c: Connection) -> bool:
        """Writes unfinished or packets unacknowledged: a connection not to be made again.
        One in error is never busy: nothing of it will finish."""
        if c.failed:
            return False
        return not c.idle or next(iter(c.unfinished()), None) is not None

    def drain_events(self, c: Connection) -> None:
        """Take the connection's events into its history, logging the ones a person
        reading the log wants to see."""
        peer, transport, _qp = key = self.keys[c]

        def log(ev: Event) -> None:
            if isinstance(ev, (MessageCompleted, MessageFailed, ConnectionFailed)):
                self.settled += 1  # a held `wait` may be answerable now
                self.programs.on_transport_event(key, ev)
            elif isinstance(ev, MessageReceived) and ev.imm is not None:
                self.programs.on_transport_event(key, ev)
            if isinstance(ev, EvStateChanged):
                self.log("ev_state", peer=f"h{peer}", t_change=ev.t,
                         ev=f"0x{ev.ev & 0xFFFFFFFF:08x}", old=ev.old, new=ev.new, why=ev.why)
            elif isinstance(ev, ConnectionFailed):
                self.log("qp_failed", peer=f"h{peer}", transport=transport, why=ev.why)
            elif isinstance(ev, MessageFailed):
                self.log("write_refused", peer=f"h{peer}", transport=transport, msn=ev.msn,
                         why=ev.why)
        self.history[key].drain(c, log)

    def source_bytes(self) -> int:
        """Bytes held as the source of writes not yet complete (released when done)."""
        return sum(m.size for c in self.conns.values() for m in c.unfinished())

    def held_bytes(self) -> int:
        """Bytes the budget holds outside the regions: the sources of unfinished writes
        and the delay line's rings (allocated once, at start)."""
        return self.source_bytes() + self.delay_bytes

    # ---- packets --------------------------------------------------------------
    def budget(self) -> int:
        return self.tx_ports.budget

    def flush(self, c: Connection) -> None:
        """Queue what the connection has to send, and take note of its next timer: call
        after anything that changes a connection's state. A connection the policy can
        leave to the compiled loop (loop_state) is armed there: the loop sends for it,
        runs its delayed SACK and hands it back when the policy is needed or its own
        timer is due; the others are the loop's here."""
        now = self.now()
        given = self.tx_ports.budget_of(c.plane_mask)
        n = c.send_to(self.tx_ports, now, given)
        self.drain_events(c)
        # Every slot taken (control frames count too): it may have more, so it gets the
        # next free slots. Short of that, its windows stopped it, and an ack or a timer
        # brings it back.
        starved = n >= given
        fast, due, data_due = c.loop_state()
        self.loop.arm(c.local_qpn, fast, c.plane_mask, -1.0 if due is None else due,
                      starved, -1.0 if data_due is None else data_due)
        if fast:
            self.wake.fed(c)
            self.wake.schedule(c, None, now)
        else:
            (self.wake.starve if starved else self.wake.fed)(c)
            self.wake.schedule(c, c.next_timer(), now)
        # Out now, as far as the tokens allow: the next connection's flush then finds the
        # slots these frames left. Without it a batch of writes gave the first connection
        # every slot, its SACKs kept them, and each sender sent its messages one
        # destination at a time, every sender the same one first: an incast (trims at
        # one host's leaf ports in every plane, fifty times the usual).
        self.drain_backlogs()

    def _flush_touched(self) -> None:
        for c in self.touched:
            self.flush(c)
        self.touched.clear()

    def _set_delay(self) -> int:
        """Hold received frames for the fabric's fixed latency; the bytes the delay line
        holds (`latency.delay_line_bytes`: a full ring drops, and says so), 0 when the
        topology sets no latency."""
        t = self.topo
        if not t.has_latency:
            self.tx_ports.set_delay([], 0)
            return 0
        delays = [latency.one_way_s(t, latency.hops(t, h, self.host)) for h in range(t.hosts)]
        self.tx_ports.set_delay(delays, latency.delay_ring_bytes(t))
        return latency.delay_line_bytes(t)

    def drain_backlogs(self) -> None:
        """Send what each port's token bucket allows (ports.c)."""
        self.tx_ports.drain(self.now())

    def next_send_time(self) -> float | None:
        """When the first port with frames waiting has the tokens to send one."""
        return self.tx_ports.next_send()

    def _malformed(self, reason: str) -> None:
        if reason != "not_roce":  # other traffic on the port is not ours to count
            self.malformed[reason] = self.malformed.get(reason, 0) + 1

    def _took(self, wake: list[tuple[int, int]], rest: list, now: float) -> None:
        """What the loop handed us: the QPs the policy must see (why: touched, a timer
        due), then what no QP took, each item with the plane it came in on."""
        for q, why in wake:
            c = self.by_qpn[q]
            if why & Wake.TOUCHED:
                c.received(now)
            if why & Wake.TIMER:
                c.timer(now)
            self.touched.add(c)
        for plane, item in rest:
            if type(item) is bytes:
                self.on_frame(item, plane)
            else:  # a Decoded for an attached QP (Ports.attach): by its DQPN
                c = self.by_qpn[item.bth["dqpn"]]
                c.receive_decoded(item, now)
                self.touched.add(c)

    def on_frame(self, frame: bytes, plane: int) -> None:
        if len(frame) < 14 + 40:
            return
        pkt = memoryview(frame)[14:]
        # The connection first, from BTH alone: it parses the packet once, in C.
        q = datapath.peek_dqpn(pkt)
        c = self.by_qpn.get(q)
        if c is None:
            # An endpoint request, or the first packet from a peer that writes to us:
            # decode it here (rare), and only a valid packet makes a connection.
            try:
                d = datapath.decode(pkt)
            except codec.DecodeError as e:
                self._malformed(e.reason)
                return
            if d.via is not None and d.via != self.port_address[plane]:
                self._malformed("not_our_usid")
                return
            if q == ENDPOINT_DQPN:
                c = self.endpoint_conn(d)
                if c is not None:
                    c.receive_decoded(d, self.now())
                    self.touched.add(c)
                    # A port-status update is the peer NIC's: every QP with it applies it
                    # (the one above answered it).
                    peer = self.keys[c][0]
                    for (p, transport, _qp), o in self.conns.items():
                        if o is not c and p == peer and transport == "mrc":
                            o.peer_port_status(d, self.now())
                return
            known = qp_of(q, self.topo.hosts)
            if known is not None and known[1] != self.host:
                transport, peer, k, gen = known
                key = (peer, transport, k)
                if key in self.conns:
                    # Another generation of a connection we have. A newer one: the peer
                    # made the pair again (a QP of its failed), and so do we, unless ours
                    # has writes of its own out. An older one: a copy from before.
                    if not (newer_generation(gen, self.conn_gen.get(key, 0))
                            and not self.busy(self.conns[key])):
                        self._malformed("stale_qp")
                        return
                    self.remake(key, None, gen)
                    c = self.conns[key]
                else:
                    c = self.conn(peer, transport, qp=k, gen=gen)
            if c is None:
                self._malformed("unknown_qp")
                return
        before = c.rx_bytes
        now = self.now()
        try:
            # The fabric consumed every uSID but ours, or this is not for us: an
            # End.DT6-like decapsulation accepts only its own address.
            c.receive_frame(pkt, now, self.port_address[plane])
        except codec.DecodeError as e:
            self._malformed(e.reason)
            return
        got = c.rx_bytes - before
        if got:  # new payload placed in memory: goodput
            b = self.rx_bins[plane]
            k = int(now / RX_BIN)
            b[k] = b.get(k, 0) + got
        self.touched.add(c)

    def endpoint_conn(self, d: codec.Decoded) -> Connection | None:
        """The MRC connection a connectionless endpoint request or response belongs to:
        the one with its sender (known by its source address, a host's port address)
        that announces our port status to it (`announcers`), so that its answer reaches
        the update it answers; the first QP's, made now, if there is none yet."""
        kind_host = None
        usids = container_usids(IPv6Address(d.src))
        if len(usids) == 1:
            try:
                _plane, kind, index = split_usid(usids[0])
            except ValueError:  # not a uSID kind we allocate
                kind = index = None
            kind_host = index if kind == Kind.HOST else None
        if kind_host is None or kind_host == self.host or kind_host >= self.topo.hosts:
            self._malformed("endpoint_from_unknown")
            return None
        (key,) = announcers(k for k in self.conns if k[0] == kind_host) or {
            (kind_host, "mrc", 0)}
        return self.conn(*key[:2], qp=key[2])

    def refresh_links(self) -> None:
        names = self.links.up(set(self.iface.values()))
        up = {plane for plane, ifname in self.iface.items() if ifname in names}
        if up != self.planes_up:
            self.log("port_status", planes_up=sorted(up), was=sorted(self.planes_up))
            self.planes_up = up
            heralds = announcers(self.conns)
            for key, c in self.conns.items():
                c.port_status(up, self.now(), announce=key in heralds)
                self.flush(c)

    # ---- loop -------------------------------------------------------------------
    def run(self) -> None:
        for s in self.ports.values():
            self.poller.register(s.fileno(), select.EPOLLIN)
        self.log("start", pid=os.getpid(), pmtu=self.cfg.pmtu)
        self.refresh_links()  # the state before the first notification
        epfd = self.poller.fileno()
        seen = self.settled
        while self.running:
            # The compiled loop (datapath/loop.c) waits, reads the ports, releases held
            # frames, paces sends and serves the connections armed in it, until the
            # policy has work or its timers (`due`) are due.
            due = self.wake.next_due()
            if (held := self.control.next_deadline()) is not None:
                due = held if due is None else min(due, held)
            events, wake, rest, bins, (waits, left) = self.loop.run(
                epfd, due, LOOP_LIMIT, RX_BIN, self._hungry())
            self.meter.wakeups += waits
            for plane, k, b in bins:  # new payload placed in memory: goodput
                pb = self.rx_bins[plane]
                pb[k] = pb.get(k, 0) + b
            now = self.now()
            self._took(wake, rest, now)
            self._flush_touched()
            for fd, mask in events:
                if fd == self.links.fileno():
                    if self.links.changed():
                        self.refresh_links()
                elif not self.programs.on_event(fd, mask):
                    self.control.on_event(fd, mask)
            self._run_timers(left)
            self.drain_backlogs()
            for c in self.wake.starved():  # longest-waiting first, while slots are free
                if not self.budget():
                    break
                self.flush(c)
            self.control.settle(self.now(), self.settled != seen)
            seen = self.settled
        self.log("stop")

    def _hungry(self) -> int:
        """The planes our own connections wait for slots on (bit p: plane p)."""
        mask = 0
        for c in self.wake.starved():
            mask |= c.plane_mask
        return mask

    def _run_timers(self, left: bool) -> None:
        """The policy's timers that are due, unless held (`TimerHold`): not while
        frames we have not read may answer them, for a millisecond at most."""
        now = self.now()
        if not self.hold.may_run(left, now):
            return
        for c, due in self.wake.pop_due(now):
            self.meter.timers.add(now - due)
            c.timer(now)
            self.flush(c)


def run_nic(host: int, topology_json: str, transport_json: str) -> int:
    """The daemon of host `host`, in this process (inside the host's namespace), until
    SIGTERM."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    topo = Topology(**json.loads(topology_json))
    nic = Nic(host, topo, TransportConfig.from_json(json.loads(transport_json)))
    collector.freeze()  # the topology, the ports, the imports: the daemon's whole life
    try:
        nic.run()
    except SystemExit:
        pass
    except Exception:  # noqa: BLE001 - leave a record, then die visibly to `status`
        nic.log("crash", error=traceback.format_exc())
        raise
    finally:
        nic.programs.close()
        nic.control.close()
        nic.links.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spawner", action="store_true",
                    help="start daemons by fork, one a request line (mrcemu.nic.spawner)")
    ap.add_argument("--host", type=int)
    ap.add_argument("--topology-json",
                    help="the validated topology, as the fabric manager snapshot it")
    ap.add_argument("--transport-json", default="{}",
                    help="the transport config, as the fabric manager snapshot it")
    args = ap.parse_args()
    if args.spawner:
        from mrcemu.nic import spawner

        return spawner.serve(run_nic)
    if args.host is None or args.topology_json is None:
        ap.error("--host and --topology-json are required without --spawner")
    return run_nic(args.host, args.topology_json, args.transport_json)


if __name__ == "__main__":
    sys.exit(main())
