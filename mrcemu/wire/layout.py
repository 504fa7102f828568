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
    MRC_DATA,
    ROCE_WITH_RETH,
    WITH_IMM,
    EndpointType,
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
TSETH = _layout("TSETH", F("timestamp", 32, hex=True))
RETH = _layout("RETH", F("va", 64, hex=True), F("rkey", 32, hex=True), F("dmalen", 32))
IMMDT = _layout("ImmDt", F("imm", 32, hex=True))
AETH = _layout("AETH", F("syndrome", 8, hex=True), F("msn", 24), lua="mrc.aeth")
SETH = _layout(
    "SETH",
    F("type", 4), F("nxt", 5), F("m", 2, enum=SackMark), F("pr", 1), F("rsv0", 4),
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
    "PETH",
    F("type", 4), F("nxt", 5), F("rsv0", 7), F("probe_seq", 16, lua="seq"),
    F("entropy", 32, hex=True), F("spdcid", 16), F("dpdcid", 16), F("rsv1", 8), F("psn", 24),
    lua="mrc.probe",
)
ERTH = _layout(
    "ERTH",
    F("req_type", 8, enum=EndpointType, lua="type"), F("flags", 8, hex=True), F("seq", 16),
    F("entropy", 32, hex=True), F("spdcid", 16), F("dpdcid", 16),
    F("port_status", 32, hex=True), lua="mrc.ep",
)
EETH = _layout(
    "EETH",
    F("resp_type", 8, enum=EndpointType, lua="type"), F("status", 8, hex=True), F("seq", 16),
    F("entropy", 32, hex=True), F("spdcid", 16), F("dpdcid", 16),
    F("port_status", 32, hex=True), F("req_timestamp", 64), F("resp_timestamp", 64),
    F("rsv", 32, hex=True), lua="mrc.ep",
)

HEADERS: tuple[Layout, ...] = (BTH, METH, TSETH, RETH, IMMDT, AETH, SETH, CC_STATE, NETH,
                               PETH, ERTH, EETH)

# Which headers follow BTH, per opcode. Data packets depend on BTH.ts (TSETH) too.
CONTROL: dict[Opcode, tuple[Layout, ...]] = {
    Opcode.ACKNOWLEDGE: (AETH,), Opcode.RC_ACK: (AETH,),
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


def mrc_data_headers_max() -> int:
    """Bytes from BTH to the end of the longest MRC data header chain: what a trim keeps."""
    return max(sum(h.size for h in (BTH, *data_headers(op, ts)))
               for op in MRC_DATA for ts in (False, True))
