"""Hypothesis strategies: random field values for every packet type, built both ways."""

from __future__ import annotations

from functools import cache

from hypothesis import strategies as st
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from mrcemu.wire import codec, layers
from mrcemu.wire.constants import MRC_DATA, ROCE_DATA, Opcode

SCAPY = {"METH": layers.METH, "TSETH": layers.TSETH, "RETH": layers.RETH,
         "ImmDt": layers.ImmDt, "AETH": layers.AETH, "SETH": layers.SETH,
         "CC_STATE": layers.CCState, "NETH": layers.NETH, "PETH": layers.PETH,
         "ERTH": layers.ERTH, "EETH": layers.EETH, "CNP": layers.CNP}

SIGNED = {"ack_psn_offset", "sack_offset"}


@cache
def values_for(h: codec.Header) -> st.SearchStrategy[dict[str, int]]:
    """One header's fields, each over its whole range; built once a header (making the
    strategies anew for every example was most of an example's time)."""
    fields = {}
    for _code, fs in h.groups:
        for name, bits in fs:
            if name in SIGNED:
                fields[name] = st.integers(-(1 << 15), (1 << 15) - 1)
            else:
                fields[name] = st.integers(0, (1 << bits) - 1)
    return st.fixed_dictionaries(fields)


ALL_OPCODES = sorted(set(MRC_DATA) | set(ROCE_DATA) | set(codec.CONTROL))


@st.composite
def packets(draw, opcodes=ALL_OPCODES):
    op = draw(st.sampled_from(opcodes))
    bth = draw(values_for(codec.BTH))
    bth["opcode"] = int(op)
    if op not in MRC_DATA:
        bth["ts"] = 0
    hdrs = {h.name: draw(values_for(h)) for h in codec.headers_for(op, bool(bth["ts"]))}
    payload = draw(st.binary(max_size=300)) if op in MRC_DATA or op in ROCE_DATA else b""
    return {
        "src": draw(st.binary(min_size=16, max_size=16)),
        "dst": draw(st.binary(min_size=16, max_size=16)),
        "sport": draw(st.integers(0, 0xFFFF)), "flow_label": draw(st.integers(0, 0xFFFFF)),
        "dscp": draw(st.integers(0, 63)), "ecn": draw(st.integers(0, 3)),
        "hlim": draw(st.integers(0, 255)), "bth": bth, "headers": hdrs, "payload": payload,
    }


def scapy_packet(p: dict):
    import socket

    pkt = (IPv6(src=socket.inet_ntop(socket.AF_INET6, p["src"]),
                dst=socket.inet_ntop(socket.AF_INET6, p["dst"]),
                tc=(p["dscp"] << 2) | p["ecn"], fl=p["flow_label"], hlim=p["hlim"])
           / UDP(sport=p["sport"], dport=4791) / layers.BTH(**p["bth"]))
    for h in codec.headers_for(p["bth"]["opcode"], bool(p["bth"]["ts"])):
        pkt = pkt / SCAPY[h.name](**p["headers"][h.name])
    if p["payload"]:
        pkt = pkt / Raw(p["payload"])
    return pkt


def fast_packet(p: dict) -> bytes:
    return codec.encode(p["src"], p["dst"], sport=p["sport"], flow_label=p["flow_label"],
                        dscp=p["dscp"], ecn=p["ecn"], bth=p["bth"], headers=p["headers"],
                        payload=p["payload"], hlim=p["hlim"])


__all__ = ["packets", "scapy_packet", "fast_packet", "Opcode"]
