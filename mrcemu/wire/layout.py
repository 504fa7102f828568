"""Every MRC header as one declarative table: the single source of the wire layouts.

The struct codec (`codec`) and the Scapy layers (`layers`) are built from these
tables, and `generate` writes the C header the BPF switch includes (`bpf/mrc_wire.h`).
Changing a field is one edit here plus `make generate`; a unit test fails when a
generated file is stale.

A header is a list of fields in wire order, most significant bit first, big-endian.
Widths are in bits; a header is a whole number of bytes. This module is pure data.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from mrcemu.wire.constants import (
    ICRC_LEN,
    IPPROTO_IPV6,
    MRC_DATA,
    ROCE_WITH_RETH,
    TIMESTAMP_FTYPE,
    WITH_IMM,
    EndpointOp,
    NackReason,
    Opcode,
    SackMark,
)


@dataclass(frozen=True)
class Field:
    name: str
    bits: int
    signed: bool = False
    enum: type[enum.IntEnum] | None = None  # values shown by name (Scapy, dissectors)
    hex: bool = False  # shown in hex
    lua: str | None = None  # the Wireshark filter name under the header's prefix, if not `name`
    default: int = 0  # the value sent when the caller gives none


@dataclass(frozen=True)
class Layout:
    name: str
    fields: tuple[Field, ...]
    lua: str = "mrc"  # the Wireshark filter prefix of its fields

    @property
    def bits(self) -> int:
        return sum(f.bits for f in self.fields)

    @property
    def size(self) -> int:
        return self.bits // 8

    def offsets(self) -> dict[str, int]:
        """Each field's bit offset from the header's first bit."""
        out, at = {}, 0
        for f in self.fields:
            out[f.name] = at
            at += f.bits
        return out


def _layout(name: str, *fields: Field, lua: str = "mrc") -> Layout:
    lay = Layout(name, fields, lua)
    if lay.bits % 8:
        raise ValueError(f"{name}: {lay.bits} bits is not a whole number of bytes")
    for f in fields:
        if f.signed and f.bits not in (8, 16, 32, 64):
            raise ValueError(f"{name}.{f.name}: a signed field must be 8/16/32/64 bits")
    return lay


F = Field

BTH = _layout(
    "BTH",
    F("opcode", 8, enum=Opcode, hex=True), F("solicited", 1, lua="se"), F("migreq", 1),
    F("padcount", 2), F("version", 4), F("pkey", 16, hex=True),
    F("fecn", 1), F("becn", 1), F("resv6", 6), F("dqpn", 24),
    # byte 8: A, R, rtx (a retransmission), ts (a TSETH follows METH)
    F("ackreq", 1), F("r", 1), F("rtx", 1), F("ts", 1), F("resv4", 4), F("psn", 24),
)
METH = _layout("METH", F("rqmsn", 16), F("msn", 16))
# The 4-byte timestamp word TSETH is, and PETH and ERTH end with.
def _ts_word(rsv: str) -> tuple[Field, ...]:
    return (F("tx_timestamp", 16, lua="ts"), F("tsr", 1), F(rsv, 11),
            F("ftype", 4, default=TIMESTAMP_FTYPE))


TSETH = _layout("TSETH", *_ts_word("rsv"), lua="mrc.tseth")
RETH = _layout("RETH", F("va", 64, hex=True), F("rkey", 32, hex=True), F("dmalen", 32))
IMMDT = _layout("ImmDt", F("imm", 32, hex=True))
AETH = _layout("AETH", F("syndrome", 8, hex=True), F("msn", 24), lua="mrc.aeth")
SETH = _layout(
    "SETH",
    # byte 1: next-header's low bit, m (6:5), reserved (4:2), pr (1), reserved (0)
    F("type", 4), F("nxt", 5), F("m", 2, enum=SackMark), F("rsv0", 3), F("pr", 1),
    F("rsv00", 1),
    # with pr = 1 the probe_id answered (see `probe_id_of`), else the trigger PSN - cack_psn
    F("ack_psn_offset", 16, signed=True), F("entropy", 32, hex=True),
    F("spdcid", 16), F("dpdcid", 16), F("rsv1", 8), F("cack_psn", 24),
    F("cc_type", 4), F("cc_fl", 4), F("mpr", 8), F("sack_offset", 16, signed=True),
    F("sack_bitmap", 64, hex=True, lua="bitmap"), lua="mrc.sack",
)
CC_STATE = _layout(
    "CC_STATE",
    F("tx_timestamp", 16), F("rsv", 1), F("ooo_count", 15),
    F("r_c", 1), F("rcv_cwnd_pen", 7), F("rcvd_bytes", 24), lua="mrc.cc",
)
NETH = _layout(
    "NETH",
    F("type", 4), F("nxt", 5), F("rsv0", 7), F("nack_reason", 8, enum=NackReason, hex=True,
                                                 lua="reason"),
    F("vendor", 8, hex=True), F("entropy", 32, hex=True), F("spdcid", 16), F("dpdcid", 16),
    F("rsv1", 8), F("nack_psn", 24, lua="psn"), F("cc_type", 4), F("cc_fl", 4), F("rsv2", 8),
    F("tx_timestamp", 16), lua="mrc.nack",
)
PETH = _layout(
    # No entropy: the responder reflects the EV of the probe's own UDP source port and
    # flow label. No PSN: a probe consumes none.
    "PETH",
    F("type", 4), F("nxt", 5), F("rsv0", 7), F("rsv1", 8), F("vendor", 8, hex=True),
    F("probe_id", 16, lua="id"), F("rsv2", 16), F("spdcid", 16), F("dpdcid", 16),
    *_ts_word("rsv3"), lua="mrc.probe",
)
ERTH = _layout(
    # Connectionless: DQPN ENDPOINT_DQPN, the request id in BTH PSN[15:0].
    "ERTH",
    F("type", 4), F("nxt", 5), F("rsv0", 5), F("op", 2, enum=EndpointOp), F("rsv1", 8),
    F("vendor", 8, hex=True), F("port_status_mask", 32, hex=True, lua="port_status"),
    F("rsv2", 32), *_ts_word("rsv3"), lua="mrc.ep",
)
EETH = _layout(
    # op at bits 3:2 of byte 1, as three transcriptions have it (MCL's 5:4 do not add up)
    "EETH",
    F("type", 4), F("nxt", 5), F("rsv0", 3), F("op", 2, enum=EndpointOp, lua="resp_op"),
    F("rsv1", 2),
    F("rsv2", 64), F("rsv3", 64), F("rsv4", 64), F("rsv5", 16),
    F("tx_timestamp", 16, lua="ts"), F("rsv6", 48), lua="mrc.ep",
)

# A CNP's 16 reserved bytes after BTH (RoCEv2 annex A17: PSN 0, nothing else meant).
CNPETH = _layout("CNP", F("rsv0", 64, hex=True), F("rsv1", 64, hex=True), lua="mrc.cnp")

HEADERS: tuple[Layout, ...] = (BTH, METH, TSETH, RETH, IMMDT, AETH, SETH, CC_STATE, NETH,
                               PETH, ERTH, EETH, CNPETH)

# Which headers follow BTH, per opcode. Data packets depend on BTH.ts (TSETH) too.
CONTROL: dict[Opcode, tuple[Layout, ...]] = {
    Opcode.ACKNOWLEDGE: (AETH,), Opcode.RC_ACK: (AETH,), Opcode.CNP: (CNPETH,),
    Opcode.RELIABILITY_SACK: (SETH, CC_STATE), Opcode.RELIABILITY_NACK: (NETH,),
    Opcode.RELIABILITY_PROBE_REQ: (PETH,), Opcode.ENDPOINT_REQUEST: (ERTH,),
    Opcode.ENDPOINT_RESPONSE: (EETH,),
}


def data_headers(opcode: int, ts: bool) -> tuple[Layout, ...]:
    """The headers after BTH of a data packet (KeyError for any other opcode)."""
    if opcode in MRC_DATA:
        return (METH, *((TSETH,) if ts else ()), RETH, *((IMMDT,) if opcode in WITH_IMM else ()))
    if opcode in ROCE_WITH_RETH:
        return (RETH,)
    if opcode == Opcode.RC_WRITE_LAST_IMM:
        return (IMMDT,)
    if opcode in (Opcode.RC_WRITE_MIDDLE, Opcode.RC_WRITE_LAST):
        return ()
    raise KeyError(opcode)


def headers_for(opcode: int, ts: bool) -> tuple[Layout, ...]:
    if opcode in CONTROL:
        return CONTROL[opcode]
    return data_headers(opcode, ts)


def probe_id_of(seth: dict[str, int]) -> int:
    """The probe_id a SACK with pr = 1 answers: its ack_psn_offset's 16 bits, unsigned."""
    return seth["ack_psn_offset"] & 0xFFFF


def probe_id_as_offset(probe_id: int) -> int:
    """The signed ack_psn_offset value that carries `probe_id` (the inverse of the above)."""
    probe_id &= 0xFFFF
    return probe_id - 0x10000 if probe_id >= 0x8000 else probe_id


# The headers around BTH: an MRC packet is IPv6-in-IPv6 (outer to the uSID path, inner
# to the destination port), then UDP; the RoCEv2 baseline has one IPv6 header.
IPV6_LEN = 40
UDP_LEN = 8
IPV6_DST = slice(24, 40)  # the destination address within an IPv6 header
BTH_AT = 2 * IPV6_LEN + UDP_LEN  # where BTH starts in an MRC packet (its opcode is byte 0)
ROCE_BTH_AT = IPV6_LEN + UDP_LEN  # and in a plain RoCEv2 packet


def bth_at(pkt: bytes | bytearray | memoryview) -> int:
    """Where BTH starts in this IPv6 packet: after one header or two."""
    return BTH_AT if pkt[6] == IPPROTO_IPV6 else ROCE_BTH_AT


def mrc_data_overhead() -> int:
    """Bytes an MRC data packet carries besides its payload, at most."""
    return 2 * IPV6_LEN + UDP_LEN + mrc_data_headers_max() + ICRC_LEN


def mrc_data_headers_max() -> int:
    """Bytes from BTH to the end of the longest MRC data header chain: what a trim keeps."""
    return max(sum(h.size for h in (BTH, *data_headers(op, ts)))
               for op in MRC_DATA for ts in (False, True))
