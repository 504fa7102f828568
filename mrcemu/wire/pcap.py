"""Reading captures into decoded MRC rows, for `mrcemu decode`. Not the hot path."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from ipaddress import IPv6Address
from pathlib import Path

from scapy.error import Scapy_Exception
from scapy.layers.inet6 import IPv6
from scapy.utils import PcapNgReader, PcapReader

from mrcemu.errors import MrcemuError
from mrcemu.topology.addressing import container, container_usids
from mrcemu.wire import layout
from mrcemu.wire.codec import Decoded, DecodeError, decode
from mrcemu.wire.constants import Dscp, EndpointOp, NackReason, Opcode, SackMark


@dataclass
class Row:
    n: int
    time: float
    iface: str | None
    src: str
    dst: str
    ev: str
    dscp: str
    ecn: int
    opcode: str
    psn: int | None
    info: str
    trimmed: bool = False
    error: str | None = None
    snapped: bool = False  # the capture's snap length cut it: headers only, partial payload
    # Every header's fields by name, BTH first (`--json` shows them; the table shows `info`).
    headers: dict[str, dict[str, int]] = field(default_factory=dict)
    # The outer DA (the uSID path as it arrived) of an IPv6-in-IPv6 packet; None: plain.
    via: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def _name(enum: type, value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return f"0x{value:02x}" if enum is Opcode else str(value)


def info_of(d: Decoded) -> str:
    h = d.headers
    if "RETH" in h:
        parts = [f"va=0x{h['RETH']['va']:x} len={len(d.payload)}",
                 f"rkey=0x{h['RETH']['rkey']:x}"]
        if "METH" in h:
            parts.append(f"msn={h['METH']['msn']}")
        if "ImmDt" in h:
            parts.append(f"imm=0x{h['ImmDt']['imm']:x}")
        if d.bth["rtx"]:
            parts.append("rtx")
        if d.trimmed:
            parts.append("TRIMMED")
        if d.snapped:
            parts[0] = f"va=0x{h['RETH']['va']:x} SNAPPED ({len(d.payload)} payload bytes kept)"
        return " ".join(parts)
    if "SETH" in h:
        s = h["SETH"]
        probe = f" probe_id={layout.probe_id_of(s)}" if s["pr"] else ""
        return (f"cack_psn={s['cack_psn']} bitmap=0x{s['sack_bitmap']:016x} "
                f"m={_name(SackMark, s['m'])} ev=0x{s['entropy']:08x}{probe}")
    if "NETH" in h:
        s = h["NETH"]
        return (f"reason={_name(NackReason, s['nack_reason'])} nack_psn={s['nack_psn']} "
                f"ev=0x{s['entropy']:08x}")
    if "PETH" in h:
        return f"probe_id={h['PETH']['probe_id']} ev=0x{d.ev:08x}"
    if "ERTH" in h:
        r = h["ERTH"]
        return (f"op={_name(EndpointOp, r['op'])} request_id={d.psn & 0xFFFF} "
                f"port_status=0x{r['port_status_mask']:x}")
    if "EETH" in h:
        return f"op={_name(EndpointOp, h['EETH']['op'])} request_id={d.psn & 0xFFFF}"
    if "AETH" in h:
        return f"syndrome=0x{h['AETH']['syndrome']:02x} msn={h['AETH']['msn']}"
    return f"len={len(d.payload)}"


def _decode_as_delivered(wire: bytes, wire_len: int | None) -> Decoded:
    """Decode; a plain RoCEv2 packet caught before its last hop (DA still a container of
    uSIDs) has its ICRC checked for the address it will be delivered to, as it was
    computed. MRC's ICRC covers the inner header, which needs no such care."""
    try:
        return decode(wire, wire_len=wire_len)
    except DecodeError as e:
        if e.reason != "bad_icrc" or wire[6] != 17:
            raise
        usids = container_usids(IPv6Address(wire[layout.IPV6_DST]))
        if len(usids) < 2:
            raise
        b = bytearray(wire)
        b[layout.IPV6_DST] = container(usids[-1]).packed
        d = decode(bytes(b), wire_len=wire_len)
        d.dst = bytes(wire[layout.IPV6_DST])
        return d


def read(path: str | Path) -> Iterator[Row]:
    p = Path(path)
    try:
        with p.open("rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise MrcemuError(f"{path}: cannot be read ({e.strerror})") from None
    reader_cls = PcapNgReader if magic == b"\x0a\x0d\x0d\x0a" else PcapReader
    try:
        reader = reader_cls(str(p))
    except (Scapy_Exception, OSError, ValueError) as e:
        raise MrcemuError(f"{path}: not a pcap or pcapng file ({e})") from None
    with reader:
        for n, pkt in enumerate(reader, 1):
            ip = pkt.getlayer(IPv6)
            if ip is None:
                continue
            wire = bytes(ip)
            iface = getattr(pkt, "sniffed_on", None)
            t = float(pkt.time)
            # The length on the wire, when the snap length kept less (Ethernet: 14 more).
            cut = (pkt.wirelen or 0) - len(bytes(pkt))
            wire_len = len(wire) + cut if cut > 0 else None
            error = None
            try:
                d = _decode_as_delivered(wire, wire_len=wire_len)
            except DecodeError as e:
                if e.reason == "not_roce":
                    continue
                if e.reason != "bad_icrc":
                    yield Row(n, t, iface, ip.src, ip.dst, "-", "-", 0, "-", None, "",
                              error=str(e))
                    continue
                # As Wireshark does: every header dissected, the checksum flagged. Only
                # the ICRC failed, so the headers themselves parse.
                d, error = decode(wire, verify_icrc=False, wire_len=wire_len), e.reason
            info = info_of(d)
            yield Row(n, t, iface, socket.inet_ntop(socket.AF_INET6, d.src),
                      socket.inet_ntop(socket.AF_INET6, d.dst), f"0x{d.ev:08x}",
                      _name(Dscp, d.dscp), d.ecn, _name(Opcode, d.opcode), d.psn,
                      info if error is None else f"{info} ICRC BAD",
                      trimmed=d.trimmed, snapped=d.snapped, error=error,
                      headers={"BTH": d.bth, **d.headers},
                      via=None if d.via is None else socket.inet_ntop(socket.AF_INET6, d.via))
