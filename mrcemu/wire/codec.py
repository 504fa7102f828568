"""The per-packet codec: precompiled `struct` layouts, no Scapy.

Every header is built from its table in `layout`, as the Scapy layers are; the
property tests in tests/unit/wire prove encode byte-identical to Scapy's
`raw()` and decode equal to Scapy's dissection. Decoding untrusted bytes
raises only `DecodeError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from mrcemu.wire import icrc, layout
from mrcemu.wire.constants import (
    ACCEPTED_UDP_PORTS,
    ICRC_LEN,
    IPPROTO_IPV6,
    MRC_DATA,
    ROCE_UDP_PORT,
    TIMESTAMP_FTYPE,
    TRIMMED_DSCPS,
    ev_join,
)


class DecodeError(Exception):
    """Untrusted bytes that are not a packet we accept. `reason` is one of
    truncated, not_roce, unknown_opcode, bad_length, bad_icrc."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}
_SIGNED = {8: "b", 16: "h", 32: "i", 64: "q"}


def _slots(fields: tuple[layout.Field, ...]) -> list[tuple[str, list[tuple[str, int]]]]:
    """Cut a header's fields into struct slots of 8/16/32/64 bits that never split a
    field (the first such cut; big-endian, any valid cut gives the same bytes). A signed
    field is a slot of its own."""
    if not fields:
        return []
    if fields[0].signed:
        return [(_SIGNED[fields[0].bits], [(fields[0].name, fields[0].bits)]),
                *_slots(fields[1:])]
    bits = 0
    for i, f in enumerate(fields):
        if f.signed:
            break
        bits += f.bits
        if bits in _CODES:
            try:
                rest = _slots(fields[i + 1:])
            except ValueError:
                continue  # a longer slot may leave a rest that fits
            return [(_CODES[bits], [(g.name, g.bits) for g in fields[:i + 1]]), *rest]
        if bits > 64:
            break
    raise ValueError(f"fields {[f.name for f in fields]} do not fit 8/16/32/64-bit slots")


class Header:
    """A fixed-size header from its layout table: struct slots, each holding big-endian
    bit fields (`groups` is [(struct code, [(field, bits), ...]), ...])."""

    def __init__(self, lay: layout.Layout) -> None:
        self.name = lay.name
        self.layout = lay
        self.groups = _slots(lay.fields)
        self.struct = struct.Struct("!" + "".join(code for code, _ in self.groups))
        self.size = self.struct.size
        self.fields = [f for _, fs in self.groups for f, _ in fs]
        self.defaults = {f.name: f.default for f in lay.fields}

    def pack(self, values: dict[str, int]) -> bytes:
        """The header's bytes; a field not in `values` takes its table default."""
        slots, dflt = [], self.defaults
        for code, fs in self.groups:
            if code in "hbiq":
                slots.append(int(values.get(fs[0][0], dflt[fs[0][0]])))
                continue
            v = 0
            for name, bits in fs:
                v = (v << bits) | (int(values.get(name, dflt[name])) & ((1 << bits) - 1))
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


_BY_LAYOUT = {lay: Header(lay) for lay in layout.HEADERS}
BTH, METH, TSETH, RETH, IMMDT, AETH, SETH, CC_STATE, NETH, PETH, ERTH, EETH, CNPETH = (
    _BY_LAYOUT[lay] for lay in layout.HEADERS)

# Headers after BTH, per opcode: the table's, as codec headers.
CONTROL: dict[int, tuple[Header, ...]] = {
    op: tuple(_BY_LAYOUT[h] for h in hs) for op, hs in layout.CONTROL.items()}
_HEADERS_FOR: dict[tuple[int, bool], tuple[Header, ...]] = {}


def headers_for(opcode: int, ts: bool) -> tuple[Header, ...]:
    """The headers after BTH (KeyError for an opcode we do not know)."""
    key = (opcode, ts)
    hs = _HEADERS_FOR.get(key)
    if hs is None:
        hs = _HEADERS_FOR[key] = tuple(_BY_LAYOUT[h] for h in layout.headers_for(opcode, ts))
    return hs


IP6 = struct.Struct("!IHBB16s16s")
UDPH = struct.Struct("!HHHH")
IP6_UDP = IP6.size + UDPH.size


def udp_checksum(src: bytes, dst: bytes, udp_and_data: bytes) -> int:
    """The IPv6 UDP checksum of `udp_and_data` (checksum field zero) from src to dst."""
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
           body: bytes, delivered: bytes | None = None, via: bytes | None = None) -> bytes:
    """IPv6 + UDP around `body` (BTH onwards, without ICRC), with ICRC and UDP checksum.

    With `via` (MRC): IPv6-in-IPv6. The inner header is addressed to `dst`, the
    destination port; the outer one to `via`, the uSID path, with the same traffic class
    and flow label. ICRC and UDP checksum cover the inner packet, which no switch changes.

    Without (the plain RoCEv2 baseline): one header, to `dst` as sent (a uSID
    container); `delivered` is the address it carries on arrival, which the ICRC and
    UDP checksum must then cover.
    """
    final = dst if via is not None else delivered or dst
    udp_len = UDPH.size + len(body) + ICRC_LEN
    vtf = (6 << 28) | ((tclass & 0xFF) << 20) | (flow_label & 0xFFFFF)
    udp0 = UDPH.pack(sport, ROCE_UDP_PORT, udp_len, 0)
    pkt = IP6.pack(vtf, udp_len, 17, hlim, src, final) + udp0 + body + b"\x00\x00\x00\x00"
    crc = icrc.crc(pkt).to_bytes(4, "little")
    ck = udp_checksum(src, final, udp0 + body + crc)
    inner = (IP6.pack(vtf, udp_len, 17, hlim, src, dst if via is None else final)
             + UDPH.pack(sport, ROCE_UDP_PORT, udp_len, ck) + body + crc)
    if via is None:
        return inner
    return IP6.pack(vtf, len(inner), IPPROTO_IPV6, hlim, src, via) + inner


# The data path: precompiled structs for BTH + METH + [TSETH] + RETH.
_BTH_METH_RETH = struct.Struct("!BBHIIHHQII")
_BTH_METH_TSETH_RETH = struct.Struct("!BBHIIHHHHQII")
# TSETH's second 16 bits with tsr = 0: reserved, then ftype in the low 4 bits.
_TS_FLAGS = TIMESTAMP_FTYPE


def data_body(*, opcode: int, dqpn: int, psn: int, msn: int, va: int, rkey: int,
              dmalen: int, rqmsn: int = 0, ackreq: int = 0, rtx: int = 0,
              timestamp: int | None = None, imm: int | None = None, solicited: int = 0,
              pkey: int = 0xFFFF) -> bytes:
    """BTH / METH / [TSETH] / RETH / [ImmDt] of an MRC WRITE packet."""
    flags = (ackreq << 31) | (rtx << 29) | ((timestamp is not None) << 28) | (psn & 0xFFFFFF)
    if timestamp is None:
        body = _BTH_METH_RETH.pack(opcode, solicited << 7, pkey, dqpn & 0xFFFFFF, flags, rqmsn,
                                   msn, va, rkey, dmalen)
    else:
        body = _BTH_METH_TSETH_RETH.pack(opcode, solicited << 7, pkey, dqpn & 0xFFFFFF, flags,
                                         rqmsn, msn, timestamp & 0xFFFF, _TS_FLAGS, va, rkey,
                                         dmalen)
    if imm is not None:
        body += IMMDT.struct.pack(imm)
    return body


def encode_data(src: bytes, dst: bytes, *, sport: int, flow_label: int, dscp: int, ecn: int,
                payload: bytes, hlim: int = 64, via: bytes | None = None,
                **headers: int | None) -> bytes:
    """An MRC WRITE packet: BTH / METH / [TSETH] / RETH / [ImmDt] / payload, to the
    port address `dst` inside an outer header to `via` (see `finish`); `headers` are
    `data_body`'s. `timestamp` is TSETH's 16-bit tx_timestamp (TIMESTAMP_UNIT ticks);
    None sends none."""
    return finish(src, dst, sport, (dscp << 2) | ecn, flow_label, hlim,
                  data_body(**headers) + payload, via=via)


def frame_data(template: bytes, src: bytes, dst: bytes, via: bytes | None, sport: int,
               flow_label: int, tclass: int, psn: int, msn: int, va: int, rkey: int,
               dmalen: int, ackreq: int, rtx: int, timestamp: int, imm: int,
               payload: bytes | memoryview) -> bytes:
    """An MRC data packet from a body template (`data_body` for its opcode and DQPN with
    every per-packet field zero): what the requester sends, positional for speed.
    The template says whether TSETH and ImmDt are there; `imm` is ignored without."""
    b = BTH.unpack(template)
    has_imm = IMMDT in headers_for(b["opcode"], bool(b["ts"]))
    return encode_data(src, dst, sport=sport, flow_label=flow_label, dscp=tclass >> 2,
                       ecn=tclass & 3, payload=bytes(payload), via=via, opcode=b["opcode"],
                       dqpn=b["dqpn"], psn=psn, msn=msn, va=va, rkey=rkey, dmalen=dmalen,
                       ackreq=ackreq, rtx=rtx, timestamp=timestamp if b["ts"] else None,
                       imm=imm if has_imm else None)


def body(bth: dict[str, int], headers: dict[str, dict[str, int]] | None = None) -> bytes:
    """BTH by field name, then each header after it by its layer name."""
    headers = headers or {}
    b = {"pkey": 0xFFFF, **bth}
    out = BTH.pack(b)
    for h in headers_for(b["opcode"], bool(b.get("ts"))):
        out += h.pack(headers.get(h.name, {}))
    return out


def encode(src: bytes, dst: bytes, *, sport: int, flow_label: int, dscp: int, ecn: int,
           bth: dict[str, int], headers: dict[str, dict[str, int]] | None = None,
           payload: bytes = b"", hlim: int = 64, delivered: bytes | None = None,
           via: bytes | None = None) -> bytes:
    """Any packet: `body(bth, headers)` and the payload (`via`, `delivered`: see
    `finish`)."""
    return finish(src, dst, sport, (dscp << 2) | ecn, flow_label, hlim,
                  body(bth, headers) + payload, delivered, via)


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
    via: bytes | None = None  # the outer DA as received (IPv6-in-IPv6); None: plain RoCEv2

    @property
    def opcode(self) -> int:
        return self.bth["opcode"]

    @property
    def psn(self) -> int:
        return self.bth["psn"]

    @property
    def ev(self) -> int:
        return ev_join(self.sport, self.flow_label)


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
    if vtf >> 28 != 6:
        raise DecodeError("not_roce", "not IPv6")
    via = None
    if nh == IPPROTO_IPV6:
        # IPv6-in-IPv6 (MRC): what the network did (hop limit, DSCP, ECN) is in the outer
        # header; the rest of the packet is the inner one, exactly as the sender built it.
        if plen != full - IP6.size:
            raise DecodeError("bad_length", f"outer IPv6 payload length {plen}, "
                                            f"have {full - IP6.size}")
        via = bytes(dst)
        m, full = m[IP6.size:], full - IP6.size
        if len(m) < IP6_UDP + BTH.size:
            raise DecodeError("truncated", f"{len(m)} bytes inside the outer IPv6 header")
        ivtf, plen, nh, _ihlim, src, dst = IP6.unpack_from(m, 0)
        if ivtf >> 28 != 6:
            raise DecodeError("not_roce", "inner header not IPv6")
    if nh != 17:
        raise DecodeError("not_roce", "not IPv6/UDP")
    if plen != full - IP6.size:
        raise DecodeError("bad_length", f"IPv6 payload length {plen}, have {full - 40}")
    sport, dport, ulen, _ck = UDPH.unpack_from(m, IP6.size)
    if dport not in ACCEPTED_UDP_PORTS:
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
                trimmed=trimmed, snapped=snapped, via=via)
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
    drop payload and ICRC, fix the lengths (both IPv6 headers' when encapsulated) and
    the UDP checksum, set the DSCP (in both)."""
    d = decode(pkt, verify_icrc=False)
    base = 0 if d.via is None else IP6.size  # where the IPv6 header before UDP starts
    keep = (base + IP6_UDP + BTH.size
            + sum(h.size for h in headers_for(d.opcode, bool(d.bth["ts"]))))
    body = bytearray(pkt[:keep])
    ulen = keep - base - IP6.size
    for at in {0, base}:
        struct.pack_into("!H", body, at + 4, keep - at - IP6.size)
        vtf = struct.unpack_from("!I", body, at)[0]
        vtf = (vtf & ~(0x3F << 22)) | ((dscp & 0x3F) << 22)  # DSCP: top 6 bits of the TC
        struct.pack_into("!I", body, at, vtf)
    u = base + IP6.size
    struct.pack_into("!HH", body, u + 4, ulen, 0)
    ck = udp_checksum(bytes(body[base + 8:base + 24]), bytes(body[base + 24:base + 40]),
                       bytes(body[u:]))
    struct.pack_into("!H", body, u + 6, ck)
    return bytes(body)


def mark_ce(pkt: bytes) -> bytes:
    """What a switch does to an ECN-capable packet above its marking threshold: CE, in
    both IPv6 headers when encapsulated (as RFC 6040 decapsulation would carry it in)."""
    b = bytearray(pkt)
    b[1] |= 0x30  # the ECN bits of the traffic class
    if b[6] == IPPROTO_IPV6 and len(b) >= 2 * IP6.size:
        b[IP6.size + 1] |= 0x30
    return bytes(b)
