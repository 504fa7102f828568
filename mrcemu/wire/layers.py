"""Scapy layers: the readable definition of every MRC header.

Used by tests, `mrcemu decode`, `mrcemu check` and failure tests that craft odd
packets. Never on the per-packet path: `codec` is, and a property test proves
the two byte-identical. Importing this module rebinds UDP port 4791 from
Scapy's contrib BTH to ours (which names the MRC flag bits).
"""

from __future__ import annotations

from scapy.contrib import roce
from scapy.fields import (
    BitEnumField,
    BitField,
    ByteEnumField,
    ByteField,
    FCSField,
    IntField,
    ShortField,
    SignedShortField,
    XIntField,
    XLongField,
    XShortField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, Raw, bind_layers, split_layers

from mrcemu.wire import icrc
from mrcemu.wire.constants import (
    ROCE_UDP_PORT,
    WITH_IMM,
    EndpointType,
    NackReason,
    Opcode,
    SackMark,
)

OPCODE_NAMES = {op.value: op.name for op in Opcode}


class BTH(roce.BTH):
    """RoCEv2 BTH with MRC's byte 8: A | r | rtx | ts | reserved(4)."""

    name = "BTH"
    fields_desc = [
        ByteEnumField("opcode", 0, OPCODE_NAMES),
        BitField("solicited", 0, 1),
        BitField("migreq", 0, 1),
        BitField("padcount", 0, 2),
        BitField("version", 0, 4),
        XShortField("pkey", 0xFFFF),
        BitField("fecn", 0, 1),
        BitField("becn", 0, 1),
        BitField("resv6", 0, 6),
        BitField("dqpn", 0, 24),
        BitField("ackreq", 0, 1),
        BitField("r", 0, 1),
        BitField("rtx", 0, 1),
        BitField("ts", 0, 1),
        BitField("resv4", 0, 4),
        BitField("psn", 0, 24),
        FCSField("icrc", None, fmt="!I"),
    ]

    def compute_icrc(self, p: bytes) -> bytes:
        udp = self.underlayer
        ip = udp.underlayer if udp is not None else None
        if ip is None:
            return b"\x00" * 4
        # Rebuild the IPv6/UDP headers around our bytes without re-entering this build.
        shell = ip.copy()
        shell[UDP].payload = Raw(p)
        return icrc.compute(bytes(shell))

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        op = self.opcode
        if op in (Opcode.RC_WRITE_FIRST, Opcode.RC_WRITE_ONLY):
            return RETH
        if op == Opcode.RC_WRITE_LAST_IMM:
            return ImmDt
        if Opcode.WRITE_FIRST <= op <= Opcode.WRITE_ONLY_IMM:
            return METH
        return {Opcode.RC_ACK: roce.AETH, Opcode.ACKNOWLEDGE: roce.AETH,
                Opcode.RELIABILITY_SACK: SETH, Opcode.RELIABILITY_NACK: NETH,
                Opcode.RELIABILITY_PROBE_REQ: PETH, Opcode.ENDPOINT_REQUEST: ERTH,
                Opcode.ENDPOINT_RESPONSE: EETH}.get(op, Raw)


def _bth_of(pkt: Packet) -> BTH | None:
    while pkt is not None and not isinstance(pkt, BTH):
        pkt = pkt.underlayer
    return pkt


class METH(Packet):
    name = "METH"
    fields_desc = [ShortField("rqmsn", 0), ShortField("msn", 0)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        bth = _bth_of(self)
        return TSETH if bth is not None and bth.ts else RETH


class TSETH(Packet):
    name = "TSETH"
    fields_desc = [XIntField("timestamp", 0)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return RETH


class RETH(Packet):
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dmalen", 0)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        bth = _bth_of(self)
        return ImmDt if bth is not None and bth.opcode in WITH_IMM else Raw


class ImmDt(Packet):
    name = "ImmDt"
    fields_desc = [XIntField("imm", 0)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class SETH(Packet):
    name = "SETH"
    fields_desc = [
        BitField("type", 0, 4),
        BitField("nxt", 0, 5),
        BitEnumField("m", 0, 2, {m.value: m.name for m in SackMark}),
        BitField("pr", 0, 1),
        BitField("rsv0", 0, 4),
        SignedShortField("ack_psn_offset", 0),
        XIntField("entropy", 0),
        ShortField("spdcid", 0),
        ShortField("dpdcid", 0),
        ByteField("rsv1", 0),
        BitField("cack_psn", 0, 24),
        BitField("cc_type", 0, 4),
        BitField("cc_fl", 0, 4),
        ByteField("mpr", 0),
        SignedShortField("sack_offset", 0),
        XLongField("sack_bitmap", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return CCState


class CCState(Packet):
    name = "CC_STATE"
    fields_desc = [
        ShortField("tx_timestamp", 0),
        BitField("rsv", 0, 1),
        BitField("ooo_count", 0, 15),
        BitField("r_c", 0, 1),
        BitField("rcv_cwnd_pen", 0, 7),
        BitField("rcvd_bytes", 0, 24),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class NETH(Packet):
    name = "NETH"
    fields_desc = [
        BitField("type", 0, 4),
        BitField("nxt", 0, 5),
        BitField("rsv0", 0, 7),
        ByteEnumField("nack_reason", 0, {r.value: r.name for r in NackReason}),
        ByteField("vendor", 0),
        XIntField("entropy", 0),
        ShortField("spdcid", 0),
        ShortField("dpdcid", 0),
        ByteField("rsv1", 0),
        BitField("nack_psn", 0, 24),
        BitField("cc_type", 0, 4),
        BitField("cc_fl", 0, 4),
        ByteField("rsv2", 0),
        ShortField("tx_timestamp", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class PETH(Packet):
    """Reliability probe: asks the receiver to answer on the probed EV."""

    name = "PETH"
    fields_desc = [
        BitField("type", 0, 4),
        BitField("nxt", 0, 5),
        BitField("rsv0", 0, 7),
        ShortField("probe_seq", 0),
        XIntField("entropy", 0),
        ShortField("spdcid", 0),
        ShortField("dpdcid", 0),
        ByteField("rsv1", 0),
        BitField("psn", 0, 24),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


_EP_TYPES = {t.value: t.name for t in EndpointType}


class ERTH(Packet):
    """Endpoint request: EV probe or port status update (bit p of port_status = plane p up)."""

    name = "ERTH"
    fields_desc = [
        ByteEnumField("req_type", 0, _EP_TYPES),
        ByteField("flags", 0),
        ShortField("seq", 0),
        XIntField("entropy", 0),
        ShortField("spdcid", 0),
        ShortField("dpdcid", 0),
        XIntField("port_status", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class EETH(Packet):
    name = "EETH"
    fields_desc = [
        ByteEnumField("resp_type", 0, _EP_TYPES),
        ByteField("status", 0),
        ShortField("seq", 0),
        XIntField("entropy", 0),
        ShortField("spdcid", 0),
        ShortField("dpdcid", 0),
        XIntField("port_status", 0),
        XLongField("req_timestamp", 0),
        XLongField("resp_timestamp", 0),
        XIntField("rsv", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


split_layers(UDP, roce.BTH, dport=ROCE_UDP_PORT)
bind_layers(UDP, BTH, dport=ROCE_UDP_PORT)

__all__ = ["BTH", "METH", "TSETH", "RETH", "ImmDt", "SETH", "CCState", "NETH", "PETH", "ERTH",
           "EETH"]
