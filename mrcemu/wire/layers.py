"""Scapy layers: the readable definition of every MRC header.

Used by tests, `mrcemu decode`, `mrcemu check` and failure tests that craft odd
packets. Never on the per-packet path: `codec` is, and a property test proves
the two byte-identical. Importing this module rebinds UDP port 4791 from
Scapy's contrib BTH to ours (which names the MRC flag bits).
"""

from __future__ import annotations

from scapy import fields as sf
from scapy.contrib import roce
from scapy.fields import FCSField
from scapy.layers.inet import UDP
from scapy.packet import Packet, Raw, bind_layers, split_layers

from mrcemu.wire import icrc, layout
from mrcemu.wire.constants import (
    ROCE_UDP_PORT,
    WITH_IMM,
    Opcode,
)

OPCODE_NAMES = {op.value: op.name for op in Opcode}

# A byte-aligned field of a whole struct width gets its natural Scapy type; any other
# width is a BitField (Scapy packs consecutive BitFields big-endian, as the codec does).
_PLAIN = {8: (sf.ByteField, sf.XByteField, sf.SignedByteField),
          16: (sf.ShortField, sf.XShortField, sf.SignedShortField),
          32: (sf.IntField, sf.XIntField, sf.SignedIntField),
          64: (sf.LongField, sf.XLongField, sf.SignedLongField)}


def from_layout(lay: layout.Layout, **defaults: int) -> list[sf.Field]:
    """Scapy fields for a header of the layout table, in wire order."""
    out: list[sf.Field] = []
    for f in lay.fields:
        at, d = lay.offsets()[f.name], defaults.get(f.name, 0)
        names = {e.value: e.name for e in f.enum} if f.enum else None
        if names is not None and at % 8 == 0 and f.bits == 8:
            out.append(sf.ByteEnumField(f.name, d, names))
        elif names is None and at % 8 == 0 and f.bits in _PLAIN:
            plain, hexed, signed = _PLAIN[f.bits]
            out.append((signed if f.signed else hexed if f.hex else plain)(f.name, d))
        elif names is not None:
            out.append(sf.BitEnumField(f.name, d, f.bits, names))
        else:
            out.append((sf.XBitField if f.hex else sf.BitField)(f.name, d, f.bits))
    return out


class BTH(roce.BTH):
    """RoCEv2 BTH with MRC's byte 8: A | r | rtx | ts | reserved(4)."""

    name = "BTH"
    fields_desc = from_layout(layout.BTH, pkey=0xFFFF) + [FCSField("icrc", None, fmt="!I")]

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
        return {Opcode.RC_ACK: AETH, Opcode.ACKNOWLEDGE: AETH,
                Opcode.RELIABILITY_SACK: SETH, Opcode.RELIABILITY_NACK: NETH,
                Opcode.RELIABILITY_PROBE_REQ: PETH, Opcode.ENDPOINT_REQUEST: ERTH,
                Opcode.ENDPOINT_RESPONSE: EETH}.get(op, Raw)


def _bth_of(pkt: Packet) -> BTH | None:
    while pkt is not None and not isinstance(pkt, BTH):
        pkt = pkt.underlayer
    return pkt


class METH(Packet):
    name = "METH"
    fields_desc = from_layout(layout.METH)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        bth = _bth_of(self)
        return TSETH if bth is not None and bth.ts else RETH


class TSETH(Packet):
    name = "TSETH"
    fields_desc = from_layout(layout.TSETH)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return RETH


class RETH(Packet):
    name = "RETH"
    fields_desc = from_layout(layout.RETH)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        bth = _bth_of(self)
        return ImmDt if bth is not None and bth.opcode in WITH_IMM else Raw


class ImmDt(Packet):
    name = "ImmDt"
    fields_desc = from_layout(layout.IMMDT)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class AETH(Packet):
    name = "AETH"
    fields_desc = from_layout(layout.AETH)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class SETH(Packet):
    name = "SETH"
    fields_desc = from_layout(layout.SETH)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return CCState


class CCState(Packet):
    name = "CC_STATE"
    fields_desc = from_layout(layout.CC_STATE)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class NETH(Packet):
    name = "NETH"
    fields_desc = from_layout(layout.NETH)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class PETH(Packet):
    """Reliability probe: asks the receiver to answer on the probed EV."""

    name = "PETH"
    fields_desc = from_layout(layout.PETH)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw




class ERTH(Packet):
    """Endpoint request: EV probe or port status update (bit p of port_status = plane p up)."""

    name = "ERTH"
    fields_desc = from_layout(layout.ERTH)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


class EETH(Packet):
    name = "EETH"
    fields_desc = from_layout(layout.EETH)

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Raw


split_layers(UDP, roce.BTH, dport=ROCE_UDP_PORT)
bind_layers(UDP, BTH, dport=ROCE_UDP_PORT)

__all__ = ["BTH", "METH", "TSETH", "RETH", "ImmDt", "AETH", "SETH", "CCState", "NETH", "PETH",
           "ERTH", "EETH"]
