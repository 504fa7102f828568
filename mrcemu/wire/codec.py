"""The per-packet codec: precompiled `struct` layouts, no Scapy.

Every layout here mirrors a Scapy layer in `layers` field for field; the
property tests in tests/unit/wire prove encode byte-identical to Scapy's
`raw()` and decode equal to Scapy's dissection. Decoding untrusted bytes
raises only `DecodeError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from mrcemu.wire import icrc
from mrcemu.wire.constants import (
    ICRC_LEN,
    MRC_DATA,
    ROCE_UDP_PORT,
    ROCE_WITH_RETH,
    TRIMMED_DSCPS,
    WITH_IMM,
    Opcode,
)


class DecodeError(Exception):
    """Untrusted bytes that are not a packet we accept. `reason` is one of
    truncated, not_roce, unknown_opcode, bad_length, bad_icrc."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


class Header:
    """A fixed-size header: struct slots, each holding big-endian bit fields.

    `groups` is [(struct code, [(field, bits), ...]), ...]; a signed slot
    ('h', 'b', 'i', 'q') holds one field.
    """

    def __init__(self, name: str, groups: list[tuple[str, list[tuple[str, int]]]]) -> None:
        self.name = name
        self.groups = groups
        self.struct = struct.Struct("!" + "".join(code for code, _ in groups))
        self.size = self.struct.size
        self.fields = [f for _, fs in groups for f, _ in fs]

    def pack(self, values: dict[str, int]) -> bytes:
        slots = []
        for code, fs in self.groups:
            if code in "hbiq":
                slots.append(int(values.get(fs[0][0], 0)))
                continue
            v = 0
            for name, bits in fs:
                v = (v << bits) | (int(values.get(name, 0)) & ((1 << bits) - 1))
            slots.append(v)
        return self.struct.pack(*slots)

    def unpack(self, buf: bytes | memoryview, offset: int = 0) -> dict[str, int]:
        out = {}
        for (code, fs), v in zip(self.groups, self.struct.unpack_from(buf, offset), strict=True):
            if code in "hbiq":
                out[fs[0][0]] = v
                continue
            for name, bits in reversed(fs):
                out[name] = v & ((1 << bits) - 1)
                v >>= bits
        return out


BTH = Header("BTH", [
    ("B", [("opcode", 8)]),
    ("B", [("solicited", 1), ("migreq", 1), ("padcount", 2), ("version", 4)]),
    ("H", [("pkey", 16)]),
    ("I", [("fecn", 1), ("becn", 1), ("resv6", 6), ("dqpn", 24)]),
    ("I", [("ackreq", 1), ("r", 1), ("rtx", 1), ("ts", 1), ("resv4", 4), ("psn", 24)]),
])
METH = Header("METH", [("H", [("rqmsn", 16)]), ("H", [("msn", 16)])])
TSETH = Header("TSETH", [("I", [("timestamp", 32)])])
RETH = Header("RETH", [("Q", [("va", 64)]), ("I", [("rkey", 32)]), ("I", [("dmalen", 32)])])
IMMDT = Header("ImmDt", [("I", [("imm", 32)])])
AETH = Header("AETH", [("I", [("syndrome", 8), ("msn", 24)])])
SETH = Header("SETH", [
    ("H", [("type", 4), ("nxt", 5), ("m", 2), ("pr", 1), ("rsv0", 4)]),
    ("h", [("ack_psn_offset", 16)]),
    ("I", [("entropy", 32)]),
    ("H", [("spdcid", 16)]), ("H", [("dpdcid", 16)]),
    ("I", [("rsv1", 8), ("cack_psn", 24)]),
    ("B", [("cc_type", 4), ("cc_fl", 4)]),
    ("B", [("mpr", 8)]),
    ("h", [("sack_offset", 16)]),
    ("Q", [("sack_bitmap", 64)]),
])
CC_STATE = Header("CC_STATE", [
    ("H", [("tx_timestamp", 16)]),
    ("H", [("rsv", 1), ("ooo_count", 15)]),
    ("I", [("r_c", 1), ("rcv_cwnd_pen", 7), ("rcvd_bytes", 24)]),
])
NETH = Header("NETH", [
    ("H", [("type", 4), ("nxt", 5), ("rsv0", 7)]),
    ("B", [("nack_reason", 8)]), ("B", [("vendor", 8)]),
    ("I", [("entropy", 32)]),
    ("H", [("spdcid", 16)]), ("H", [("dpdcid", 16)]),
    ("I", [("rsv1", 8), ("nack_psn", 24)]),
    ("B", [("cc_type", 4), ("cc_fl", 4)]), ("B", [("rsv2", 8)]),
    ("H", [("tx_timestamp", 16)]),
])
PETH = Header("PETH", [
    ("H", [("type", 4), ("nxt", 5), ("rsv0", 7)]),
    ("H", [("probe_seq", 16)]),
    ("I", [("entropy", 32)]),
    ("H", [("spdcid", 16)]), ("H", [("dpdcid", 16)]),
    ("I", [("rsv1", 8), ("psn", 24)]),
])
ERTH = Header("ERTH", [
    ("B", [("req_type", 8)]), ("B", [("flags", 8)]), ("H", [("seq", 16)]),
    ("I", [("entropy", 32)]),
    ("H", [("spdcid", 16)]), ("H", [("dpdcid", 16)]),
    ("I", [("port_status", 32)]),
])
EETH = Header("EETH", [
    ("B", [("resp_type", 8)]), ("B", [("status", 8)]), ("H", [("seq", 16)]),
    ("I", [("entropy", 32)]),
    ("H", [("spdcid", 16)]), ("H", [("dpdcid", 16)]),
    ("I", [("port_status", 32)]),
    ("Q", [("req_timestamp", 64)]), ("Q", [("resp_timestamp", 64)]),
    ("I", [("rsv", 32)]),
])

# Headers after BTH, per opcode (data packets are handled by `data_headers`).
CONTROL: dict[int, tuple[Header, ...]] = {
    Opcode.ACKNOWLEDGE: (AETH,), Opcode.RC_ACK: (AETH,),
    Opcode.RELIABILITY_SACK: (SETH, CC_STATE), Opcode.RELIABILITY_NACK: (NETH,),
    Opcode.RELIABILITY_PROBE_REQ: (PETH,), Opcode.ENDPOINT_REQUEST: (ERTH,),
    Opcode.ENDPOINT_RESPONSE: (EETH,),
}


def data_headers(opcode: int, ts: bool) -> tuple[Header, ...]:
    if opcode in MRC_DATA:
        return (METH, *((TSETH,) if ts else ()), RETH, *((IMMDT,) if opcode in WITH_IMM else ()))
    if opcode in ROCE_WITH_RETH:
        return (RETH,)
    if opcode == Opcode.RC_WRITE_LAST_IMM:
        return (IMMDT,)
    if opcode in (Opcode.RC_WRITE_MIDDLE, Opcode.RC_WRITE_LAST):
        return ()
    raise KeyError(opcode)


def headers_for(opcode: int, ts: bool) -> tuple[Header, ...]:
    if opcode in CONTROL:
        return CONTROL[opcode]
    return data_headers(opcode, ts)


IP6 = struct.Struct("!IHBB16s16s")
UDPH = struct.Struct("!HHHH")
IP6_UDP = IP6.size + UDPH.size


def _udp_checksum(src: bytes, dst: bytes, udp_and_data: bytes) -> int:
    # The ones' complement sum of 16-bit words is the integer's value mod 0xffff
    # (2**16 = 1 mod 0xffff): one big-int operation instead of a Python loop.
    n = len(udp_and_data)
    data = src + dst + n.to_bytes(4, "big") + b"\x00\x00\x00\x11" + udp_and_data
    if n % 2:
        data += b"\x00"
    v = int.from_bytes(data, "big")
    folded = (v - 1) % 0xFFFF + 1 if v else 0
    ck = ~folded & 0xFFFF
    return ck or 0xFFFF


def finish(src: bytes, dst: bytes, sport: int, tclass: int, flow_label: int, hlim: int,
           body: bytes, delivered: bytes | None = None) -> bytes:
    """IPv6 + UDP around `body` (BTH onwards, without ICRC), with ICRC and UDP checksum.

    `dst` is the address as sent (a uSID container); `delivered` the address the
    packet will carry on arrival, which the ICRC and UDP checksum must cover.
    """
    final = delivered or dst
    udp_len = UDPH.size + len(body) + ICRC_LEN
    vtf = (6 << 28) | ((tclass & 0xFF) << 20) | (flow_label & 0xFFFFF)
    udp0 = UDPH.pack(sport, ROCE_UDP_PORT, udp_len, 0)
    pkt = IP6.pack(vtf, udp_len, 17, hlim, src, final) + udp0 + body + b"\x00\x00\x00\x00"
    crc = icrc.crc(pkt).to_bytes(4, "little")
    ck = _udp_checksum(src, final, udp0 + body + crc)
    return (IP6.pack(vtf, udp_len, 17, hlim, src, dst) + UDPH.pack(sport, ROCE_UDP_PORT,
                                                                   udp_len, ck) + body + crc)


# The data path: one precompiled struct for BTH + METH + RETH, the common case.
_BTH_METH_RETH = struct.Struct("!BBHIIHHQII")


def encode_data(src: bytes, dst: bytes, *, sport: int, flow_label: int, dscp: int, ecn: int,
                opcode: int, dqpn: int, psn: int, msn: int, va: int, rkey: int, dmalen: int,
                payload: bytes, rqmsn: int = 0, ackreq: int = 0, rtx: int = 0,
                timestamp: int | None = None, imm: int | None = None, hlim: int = 64,
                solicited: int = 0, pkey: int = 0xFFFF, delivered: bytes | None = None) -> bytes:
    """An MRC WRITE packet: BTH / METH / [TSETH] / RETH / [ImmDt] / payload."""
    flags = (ackreq << 31) | (rtx << 29) | ((timestamp is not None) << 28) | (psn & 0xFFFFFF)
    if timestamp is None:
        body = _BTH_METH_RETH.pack(opcode, solicited << 7, pkey, dqpn & 0xFFFFFF, flags, rqmsn,
                                   msn, va, rkey, dmalen)
    else:
        body = (BTH.struct.pack(opcode, solicited << 7, pkey, dqpn & 0xFFFFFF, flags)
                + METH.struct.pack(rqmsn, msn) + TSETH.struct.pack(timestamp)
                + RETH.struct.pack(va, rkey, dmalen))
    if imm is not None:
        body += IMMDT.struct.pack(imm)
    return finish(src, dst, sport, (dscp << 2) | ecn, flow_label, hlim, body + payload,
                  delivered)


def encode(src: bytes, dst: bytes, *, sport: int, flow_label: int, dscp: int, ecn: int,
           bth: dict[str, int], headers: dict[str, dict[str, int]] | None = None,
           payload: bytes = b"", hlim: int = 64, delivered: bytes | None = None) -> bytes:
    """Any packet: BTH fields by name, then each header after BTH by its layer name."""
    headers = headers or {}
    b = {"pkey": 0xFFFF, **bth}
    body = BTH.pack(b)
    for h in headers_for(b["opcode"], bool(b.get("ts"))):
        body += h.pack(headers.get(h.name, {}))
    return finish(src, dst, sport, (dscp << 2) | ecn, flow_label, hlim, body + payload,
                  delivered)


@dataclass(slots=True)
class Decoded:
    src: bytes
    dst: bytes
    dscp: int
    ecn: int
    flow_label: int
    hlim: int
    sport: int
    bth: dict[str, int]
    headers: dict[str, dict[str, int]] = field(default_factory=dict)
    payload: bytes = b""
    trimmed: bool = False
    icrc_ok: bool | None = None
    snapped: bool = False  # a capture kept only the first bytes: payload partial, no ICRC

    @property
    def opcode(self) -> int:
        return self.bth["opcode"]

    @property
    def psn(self) -> int:
        return self.bth["psn"]

    @property
    def ev(self) -> int:
        return (self.sport << 16) | (self.flow_label & 0xFFFF)


def decode(pkt: bytes | memoryview, verify_icrc: bool = True,
           wire_len: int | None = None) -> Decoded:
    """Decode an IPv6 packet. Trimmed packets (DSCP TRIMMED or TRIMMED_LASTHOP, cut to
    the headers, no payload and no ICRC) decode with `trimmed=True`.

    `wire_len`, for captures: the packet's length on the wire when a snap length kept
    less. Its lengths are then checked against that, its headers decoded as far as the
    capture holds them, and the packet comes back `snapped` (partial payload, ICRC not
    checked) rather than malformed."""
    try:
        return _decode(memoryview(pkt), verify_icrc, wire_len)
    except DecodeError:
        raise
    except (struct.error, KeyError, ValueError, IndexError) as e:  # pragma: no cover - guard
        raise DecodeError("bad_length", repr(e)) from None


def _decode(m: memoryview, verify_icrc: bool, wire_len: int | None = None) -> Decoded:
    snapped = wire_len is not None and wire_len > len(m)
    full = wire_len if snapped else len(m)
    if len(m) < IP6_UDP + BTH.size:
        raise DecodeError("truncated", f"{len(m)} bytes")
    vtf, plen, nh, hlim, src, dst = IP6.unpack_from(m, 0)
    if vtf >> 28 != 6 or nh != 17:
        raise DecodeError("not_roce", "not IPv6/UDP")
    if plen != full - IP6.size:
        raise DecodeError("bad_length", f"IPv6 payload length {plen}, have {full - 40}")
    sport, dport, ulen, _ck = UDPH.unpack_from(m, IP6.size)
    if dport != ROCE_UDP_PORT:
        raise DecodeError("not_roce", f"UDP port {dport}")
    if ulen != plen:
        raise DecodeError("bad_length", f"UDP length {ulen}, IPv6 payload {plen}")
    tclass = (vtf >> 20) & 0xFF
    dscp, ecn = tclass >> 2, tclass & 3
    bth = BTH.unpack(m, IP6_UDP)
    try:
        hdrs = headers_for(bth["opcode"], bool(bth["ts"]))
    except KeyError:
        raise DecodeError("unknown_opcode", f"0x{bth['opcode']:02x}") from None
    off = IP6_UDP + BTH.size
    trimmed = dscp in TRIMMED_DSCPS and bth["opcode"] in MRC_DATA
    end = len(m) if trimmed or snapped else len(m) - ICRC_LEN
    headers = {}
    for h in hdrs:
        if off + h.size > end:
            raise DecodeError("truncated", f"{h.name} needs {h.size} bytes at {off}")
        headers[h.name] = h.unpack(m, off)
        off += h.size
    d = Decoded(bytes(src), bytes(dst), dscp, ecn, vtf & 0xFFFFF, hlim, sport, bth, headers,
                trimmed=trimmed, snapped=snapped)
    if snapped:
        d.payload = bytes(m[off:full - ICRC_LEN])  # as much of it as was kept
        return d
    if trimmed:
        if off != len(m):
            # A trimmed packet may still carry its ICRC slot; anything else is malformed.
            if len(m) - off != ICRC_LEN:
                raise DecodeError("bad_length", "trimmed packet longer than its headers")
        return d
    if bth["opcode"] in CONTROL and off != end:
        raise DecodeError("bad_length", f"{len(m) - off - ICRC_LEN} bytes after the headers")
    d.payload = bytes(m[off:end])
    if verify_icrc:
        if not icrc.verify(m):
            raise DecodeError("bad_icrc")
        d.icrc_ok = True
    return d


def trim(pkt: bytes, dscp: int) -> bytes:
    """What a switch does to a data packet above its trim threshold: keep the headers,
    drop payload and ICRC, fix the lengths and the UDP checksum, set the DSCP."""
    d = decode(pkt, verify_icrc=False)
    keep = IP6_UDP + BTH.size + sum(h.size for h in headers_for(d.opcode, bool(d.bth["ts"])))
    body = bytearray(pkt[:keep])
    ulen = keep - IP6.size
    struct.pack_into("!H", body, 4, ulen)
    vtf = struct.unpack_from("!I", body, 0)[0]
    vtf = (vtf & ~(0x3F << 22)) | ((dscp & 0x3F) << 22)  # DSCP: top 6 bits of the TC
    struct.pack_into("!I", body, 0, vtf)
    struct.pack_into("!HH", body, IP6.size + 4, ulen, 0)
    ck = _udp_checksum(bytes(body[8:24]), bytes(body[24:40]), bytes(body[IP6.size:]))
    struct.pack_into("!H", body, IP6.size + 6, ck)
    return bytes(body)
