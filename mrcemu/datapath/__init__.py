"""The compiled data path: the codec's per-packet work in C (`wire.c`, `_datapath.c`).

The pure-Python codec (`mrcemu.wire.codec`) stays the readable reference; the functions
here take and return the same things, and tests/unit/datapath proves them byte-identical
to it (hypothesis) while `make fuzz` (scripts/fuzz.py) feeds the C parser hostile bytes under
AddressSanitizer. Layouts come from the generated `mrc_layout.h` (`make generate`).

The extension is built by the package's own build (`pip install -e .`, which
`make install` runs) with the machine's gcc.
"""

from __future__ import annotations

from mrcemu.wire import codec

try:
    from mrcemu.datapath import _datapath
except ImportError as e:  # pragma: no cover - only on an install that skipped the build
    raise ImportError(f"the compiled data path is not built ({e}): run `make install`") from e

_datapath.setup(codec.Decoded, codec.DecodeError)

icrc = _datapath.icrc
crc32 = _datapath.crc32
# The MRC responder's per-packet work (responder.c) and the memory it places into.
Regions = _datapath.Regions
Responder = _datapath.Responder
# The MRC requester's per-packet work (sender.c), and the per-EV record it shares with
# the policy's Ev (evs.py).
Sender = _datapath.Sender
# The most deviations of an EV's round trips either of its two ages may be set to.
MAX_DEVIATIONS: int = _datapath.MAX_DEVIATIONS
EvSlot = _datapath.EvSlot
# transport/nscc.py's congestion window, compiled (nscc.c): the Sender's SACK path moves it
# without a Python call; the Python class stays the reference it is tested against.
Nscc = _datapath.Nscc
# A NIC's plane ports (ports.c): paced frame queues the requester and the responder
# frame into, burst sends, and burst reads that hand an attached QP's data straight to
# its responder and its unmarked SACKs to its sender.
Ports = _datapath.Ports
# One RoCE RC QP's per-packet work (roce.c): its requester frames from the posted source
# buffers into the ports, its responder places in-order data and queues ACK/NAKs, both on
# the QP's one ECMP path; transport/roce.py keeps the go-back-N policy.
RoceQp = _datapath.RoceQp
# The scale model's delay line (delay.c): frames held until the fabric's fixed latency
# has passed, per class (hops) a FIFO.
DelayLine = _datapath.DelayLine
# The NIC's event loop over its Ports (loop.c): waits with microsecond timeouts, reads,
# releases, paces, and serves the MRC QPs the policy armed until the policy has work.
Loop = _datapath.Loop
peek_dqpn = _datapath.peek_dqpn
# An MRC data packet from a per-opcode body template (codec.data_body with the
# per-packet fields zero): the requester's framing in one call.
frame_data = _datapath.frame_data
udp_checksum = _datapath.udp_checksum
# fill(buffer, seed): the seeded bytes a write sends (fill.c).
fill = _datapath.fill
_finish = _datapath.finish


# codec.decode, compiled: decode(pkt, verify_icrc=True, wire_len=None) -> the same
# Decoded, the same DecodeError reasons. Bound directly: no Python frame per packet.
decode = _datapath.decode


def finish(src: bytes, dst: bytes, sport: int, tclass: int, flow_label: int, hlim: int,
           body: bytes, delivered: bytes | None = None, via: bytes | None = None,
           payload: bytes = b"") -> bytes:
    """codec.finish, compiled (`payload` is appended to `body` without a copy)."""
    return _finish(src, dst, sport, tclass, flow_label, hlim, body, payload, delivered, via)


def encode_data(src: bytes, dst: bytes, *, sport: int, flow_label: int, dscp: int, ecn: int,
                payload: bytes | memoryview, hlim: int = 64, via: bytes | None = None,
                **headers: int | None) -> bytes:
    """codec.encode_data, compiled framing (the headers are the codec's `data_body`)."""
    return _finish(src, dst, sport, (dscp << 2) | ecn, flow_label, hlim,
                   codec.data_body(**headers), payload, None, via)


def encode(src: bytes, dst: bytes, *, sport: int, flow_label: int, dscp: int, ecn: int,
           bth: dict[str, int], headers: dict[str, dict[str, int]] | None = None,
           payload: bytes = b"", hlim: int = 64, delivered: bytes | None = None,
           via: bytes | None = None) -> bytes:
    """codec.encode, compiled framing (headers packed by the codec's own tables)."""
    return _finish(src, dst, sport, (dscp << 2) | ecn, flow_label, hlim,
                   codec.body(bth, headers), payload, delivered, via)
