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
from mrcemu.wire.constants import ROCE_UDP_PORT, Opcode

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
    offsets = lay.offsets()
    for f in lay.fields:
        at, d = offsets[f.name], defaults.get(f.name, f.default)
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
        return _next_layer(self, None)


def _bth_of(pkt: Packet) -> BTH | None:
    while pkt is not None and not isinstance(pkt, BTH):
        pkt = pkt.underlayer
    return pkt


def _next_layer(pkt: Packet, after: layout.Layout | None) -> type[Packet]:
    """The layer after `pkt` (BTH when `after` is None): the next header of its opcode's
    chain in the layout table, so Scapy dissects exactly what the codec parses."""
    bth = _bth_of(pkt)
    if bth is None:
        return Raw
    try:
        chain = layout.headers_for(bth.opcode, bool(bth.ts))
    except KeyError:
        return Raw
    i = 0 if after is None else chain.index(after) + 1 if after in chain else len(chain)
    return _LAYER[chain[i].name] if i < len(chain) else Raw


class _Chained(Packet):
    """A header after BTH, its fields and its successor both from the layout table."""

    LAYOUT: layout.Layout

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return _next_layer(self, self.LAYOUT)


class METH(_Chained):
    LAYOUT = layout.METH
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class TSETH(_Chained):
    LAYOUT = layout.TSETH
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class RETH(_Chained):
    LAYOUT = layout.RETH
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class ImmDt(_Chained):
    LAYOUT = layout.IMMDT
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class AETH(_Chained):
    LAYOUT = layout.AETH
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class SETH(_Chained):
    LAYOUT = layout.SETH
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class CCState(_Chained):
    LAYOUT = layout.CC_STATE
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class NETH(_Chained):
    LAYOUT = layout.NETH
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class PETH(_Chained):
    """Reliability probe: asks the receiver to answer on the probed EV."""

    LAYOUT = layout.PETH
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class ERTH(_Chained):
    """Endpoint request: EV probe or port status update (constants.port_status_mask)."""

    LAYOUT = layout.ERTH
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class EETH(_Chained):
    LAYOUT = layout.EETH
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


class CNP(_Chained):
    """RoCEv2's congestion notification: 16 reserved bytes (DCQCN, the RoCE baseline)."""

    LAYOUT = layout.CNPETH
    name = LAYOUT.name
    fields_desc = from_layout(LAYOUT)


# Each header of the table after BTH, by name: where `_next_layer` finds a layer.
_LAYER: dict[str, type[Packet]] = {c.LAYOUT.name: c for c in (METH, TSETH, RETH, ImmDt, AETH,
                                                            SETH, CCState, NETH, PETH, ERTH,
                                                            EETH, CNP)}


split_layers(UDP, roce.BTH, dport=ROCE_UDP_PORT)
bind_layers(UDP, BTH, dport=ROCE_UDP_PORT)

__all__ = ["BTH", "METH", "TSETH", "RETH", "ImmDt", "AETH", "SETH", "CCState", "NETH", "PETH",
           "ERTH", "EETH", "CNP"]
