"""The RoCE baseline's compiled data path (roce.c, datapath.RoceQp) against the Python
go-back-N it replaced (roce_reference.py, kept as the reference): under loss,
duplication and reordering, every frame sent, every byte placed, every event and every
counter are the same."""

from __future__ import annotations

import random
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcemu import datapath
from mrcemu.topology import load
from mrcemu.topology.paths import ev_fields
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.profiles import local_qpn_pair, profile
from mrcemu.transport.roce import RoceConnection
from mrcemu.transport.simnet import SimNet
from mrcemu.wire import codec
from mrcemu.wire.constants import Opcode
from tests.unit.datapath import roce_reference


class TapNet(SimNet):
    """A SimNet that keeps every frame it was handed, with when and from whom."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.frames: list[tuple[float, str, int, bytes]] = []

    def _transmit(self, src: str, ev: int, pkt: bytes) -> None:
        self.frames.append((self.now, src, ev, bytes(pkt)))
        super()._transmit(src, ev, pkt)


def run_pair(cls, msgs, seed, loss, dup, jitter, blackhole_first=False, until=30.0):
    topo = load("default")
    cfg = TransportConfig(seed=seed, roce_reconvergence=0.05, roce_timeout=0.004)
    qa, qb = local_qpn_pair(0, 7)
    ca = cls(cfg, profile(topo, 0, 7, cfg), qa, qb, flow_key=b"h0h7")
    cb = cls(cfg, profile(topo, 7, 0, cfg), qb, qa, flow_key=b"h7h0")
    net = TapNet(seed=seed)
    net.default.loss, net.default.dup, net.default.jitter = loss, dup, jitter
    if blackhole_first:
        plane, spine = ev_fields(ca.ev.ev)
        net.path("h0", plane, spine).blackhole = True
    net.attach("h0", ca, "h7")
    net.attach("h7", cb, "h0")
    regions = []
    for k, (size, imm) in enumerate(msgs):
        rng = random.Random(k)
        data = bytes(rng.getrandbits(8) for _ in range(size))
        mr = cb.memory.register(max(size, 1))
        regions.append(mr)
        ca.post_write(data, mr.base, mr.rkey, 0.0, imm=imm)
    net.run(until, stop=lambda: ca.idle and not net._q)

    def events(c):
        out = []
        while (e := c.next_event()) is not None:
            out.append(e)
        return out

    return {"frames": net.frames, "memory": [bytes(mr.buf) for mr in regions],
            "events_a": events(ca), "events_b": events(cb),
            "stats_a": ca.stats.to_json(), "stats_b": cb.stats.to_json(),
            "trace": (list(ca.tx_trace.t), list(ca.tx_trace.ev), list(ca.tx_trace.rtx)),
            "idle": ca.idle, "failed": ca.failed}


def assert_same(new, ref):
    assert len(new["frames"]) == len(ref["frames"])
    for i, (a, b) in enumerate(zip(new["frames"], ref["frames"], strict=True)):
        assert a == b, f"frame {i} differs"
    for k in ("memory", "events_a", "events_b", "stats_a", "stats_b", "trace", "idle",
              "failed"):
        assert new[k] == ref[k], k


@settings(max_examples=40, deadline=None)
@given(msgs=st.lists(st.tuples(st.integers(0, 70000), st.none() | st.integers(0, 2**32 - 1)),
                     min_size=1, max_size=4),
       seed=st.integers(1, 1000), loss=st.sampled_from([0.0, 0.02, 0.1]),
       dup=st.sampled_from([0.0, 0.05]), jitter=st.sampled_from([0.0, 0.002]))
def test_compiled_roce_does_what_the_python_reference_did(msgs, seed, loss, dup, jitter):
    new = run_pair(RoceConnection, msgs, seed, loss, dup, jitter)
    ref = run_pair(roce_reference.RoceConnection, msgs, seed, loss, dup, jitter)
    assert_same(new, ref)
    if not loss and not dup and not jitter:
        assert new["idle"]


def test_a_blackholed_path_rehashes_both_ways_the_same():
    # The ACK path's rehash (lost ACKs: the responder moves the route) and the
    # requester's (its timeout) against the reference, event for event.
    msgs = [(50_000, 7), (4096, None)]
    new = run_pair(RoceConnection, msgs, 5, 0.0, 0.0, 0.0, blackhole_first=True)
    ref = run_pair(roce_reference.RoceConnection, msgs, 5, 0.0, 0.0, 0.0,
                   blackhole_first=True)
    assert_same(new, ref)
    assert new["idle"] and any(type(e).__name__ == "PathRehashed" for e in new["events_a"])


def qp(local=0x2001, remote=0x2007, regions=None):
    """A RoceQp as transport/roce.py builds one (ACK every 4 packets)."""
    return datapath.RoceQp(
        local, remote, 4096, 4, 0.05, regions or datapath.Regions(),
        codec.body({"opcode": Opcode.RC_ACK, "dqpn": remote}, {"AETH": {}}), (0, 0x60, 0x62), 0,
        tuple(codec.body({"opcode": op, "dqpn": remote},
                         {"RETH": {}} if op in (Opcode.RC_WRITE_FIRST, Opcode.RC_WRITE_ONLY)
                         else {})
              for op in (Opcode.RC_WRITE_ONLY, Opcode.RC_WRITE_FIRST, Opcode.RC_WRITE_MIDDLE,
                         Opcode.RC_WRITE_LAST, Opcode.RC_WRITE_LAST_IMM)))


PATH = (0x04010002, 0x0401, 0x0002, bytes(range(16)), bytes(range(16, 32)),
        bytes(range(32, 48)))
BASE = 0x7F00_0000_0000


def frames_of(size, imm=None, rkey=0x1000):
    """The data frames a fresh requester (QP 0x2001 to 0x2007) sends for one message."""
    q = qp()
    q.set_route([PATH], 0)
    first = q.post(bytes(i & 0xFF for i in range(size)), BASE, rkey, imm)
    out: list = []
    assert q.send(out, first, max(1, -(-size // 4096))) == len(out)
    return [arrived(f) for _ev, f in out]


def arrived(frame):
    """The frame as the fabric delivers it: its DA the delivered address (simnet)."""
    return frame[:24] + PATH[4] + frame[40:]


def responder(size):
    """QP 0x2007 with one region of `size` bytes at BASE, R_Key 0x1000."""
    regions, buf = datapath.Regions(), bytearray(size)
    regions.add(0x1000, BASE, buf)
    rx = qp(0x2007, 0x2001, regions)
    rx.set_route([PATH], 0)
    return rx, buf


def test_wrong_qps_keys_and_addresses_are_dropped_with_memory_unchanged():
    frames = frames_of(9000)
    rx, buf = responder(8192)  # one message of 9000 bytes does not fit: va_out_of_range
    for f in frames:
        assert rx.rx(f, 0.0) is None
    # Only the first packet carries RETH; the two after it have no message to go into.
    assert rx.counters()["dropped"] == {"va_out_of_range": 1, "out_of_order": 2}
    other = qp(0x2005, 0x2001)
    other.set_route([PATH], 0)
    assert other.rx(frames[0], 0.0) is None
    assert other.counters()["dropped"] == {"wrong_qp": 1}
    rx, buf = responder(16384)
    assert rx.rx(frames_of(100, rkey=0x1001)[0], 0.0) is None
    assert rx.counters()["dropped"] == {"bad_rkey": 1}
    assert bytes(buf) == bytes(len(buf)) and rx.rx_bytes == 0


def test_malformed_packets_are_refused_without_a_write():
    frame = frames_of(100)[0]
    rx, buf = responder(4096)
    bad = bytearray(frame)
    bad[-1] ^= 0xFF  # the ICRC
    with pytest.raises(codec.DecodeError) as e:
        rx.rx(bytes(bad), 0.0)
    assert e.value.reason == "bad_icrc"
    with pytest.raises(codec.DecodeError):
        rx.rx(frame[:50], 0.0)
    assert bytes(buf) == bytes(4096) and rx.rx_bytes == 0
    # The frame itself is placed, completes its message and is acknowledged at once.
    assert rx.rx(frame, 0.0) is None
    assert bytes(buf[:100]) == bytes(i & 0xFF for i in range(100))
    assert rx.take_completions() == [(0, None)]
    (ev, ack), = rx.take_control()
    d = codec.decode(arrived(ack))
    assert ev == PATH[0] and d.opcode == Opcode.RC_ACK and d.psn == 0
    assert d.headers["AETH"] == {"syndrome": 0, "msn": 1}


def test_the_frames_are_the_codecs():
    # Byte for byte what codec.encode builds for the same packet (the reference).
    frames = frames_of(9000, imm=0xABCD)
    data = bytes(i & 0xFF for i in range(9000))
    ops = (Opcode.RC_WRITE_FIRST, Opcode.RC_WRITE_MIDDLE, Opcode.RC_WRITE_LAST_IMM)
    for k, (op, f) in enumerate(zip(ops, frames, strict=True)):
        f = f[:24] + PATH[5] + f[40:]  # as sent: to the container
        headers = {}
        if op == Opcode.RC_WRITE_FIRST:
            headers["RETH"] = {"va": BASE, "rkey": 0x1000, "dmalen": 9000}
        if op == Opcode.RC_WRITE_LAST_IMM:
            headers["ImmDt"] = {"imm": 0xABCD}
        want = codec.encode(PATH[3], PATH[5], delivered=PATH[4], sport=PATH[1],
                            flow_label=PATH[2], dscp=0, ecn=0,
                            bth={"opcode": op, "dqpn": 0x2007, "psn": k, "ackreq": int(k == 2)},
                            headers=headers, payload=data[k * 4096:(k + 1) * 4096])
        assert f == want, k


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        qp().set_route([(1, 2, 3, b"short", bytes(16), bytes(16))], 0)
    q = qp()
    with pytest.raises(RuntimeError):
        q.send([], 0, 1)  # no route yet
    q.set_route([PATH], 0)
    with pytest.raises(ValueError):
        q.send([], 0, 1)  # nothing posted
    with pytest.raises(TypeError):
        q.send(object(), 0, 1)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        ports = datapath.Ports([(a.fileno(), 0, bytes(14), bytes(16), 1.0)], 0.0, 4, 9014, 2,
                               9014.0)
        with pytest.raises(TypeError):  # a RoceQp takes its own ACKs: no Sender
            ports.attach(1, q, object())
        with pytest.raises(TypeError):
            ports.attach(1, object(), None)
        ports.attach(1, q, None)
