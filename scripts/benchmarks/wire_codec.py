"""`make bench`, section "Wire codec: fast struct path against Scapy"."""

from __future__ import annotations

import time
from collections.abc import Callable

TITLE = 'Wire codec: fast struct path against Scapy'


def wire_codec() -> str:
    from scapy.all import raw
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw

    from mrcemu import datapath
    from mrcemu.wire import codec, layers

    src, dst = bytes(range(16)), bytes(range(16, 32))
    payload = bytes(1024)

    def framed_by(wire: object) -> Callable[[int], None]:
        """Encode then decode n packets with `wire` (the codec, or the compiled path)."""
        def loop(n: int) -> None:
            for i in range(n):
                pkt = wire.encode_data(src, dst, sport=0xC001, flow_label=i & 0xFFFF, dscp=4,
                                       ecn=0, opcode=0xC7, dqpn=1, psn=i, msn=1,
                                       va=0x10000 + i * 1024, rkey=7, dmalen=1 << 26,
                                       payload=payload)
                wire.decode(pkt)
        return loop

    def scapy(n: int) -> None:
        for i in range(n):
            pkt = raw(IPv6(src="0001:0203:0405:0607:0809:0a0b:0c0d:0e0f",
                           dst="1011:1213:1415:1617:1819:1a1b:1c1d:1e1f", tc=16, fl=i & 0xFFFF)
                      / UDP(sport=0xC001, dport=4791) / layers.BTH(opcode=0xC7, dqpn=1, psn=i)
                      / layers.METH(msn=1) / layers.RETH(va=0x10000 + i * 1024, rkey=7,
                                                         dmalen=1 << 26) / Raw(payload))
            IPv6(pkt)

    def rate(fn: Callable[[int], None], seconds: float = 3.0) -> float:
        fn(50)  # warm up
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            fn(200)
            n += 200
        return n / (time.perf_counter() - t0)

    c, f, s = rate(framed_by(datapath)), rate(framed_by(codec)), rate(scapy)
    return ("What it runs: One MRC WRITE_MIDDLE with "
            "1 KiB payload: encode (headers, ICRC, UDP checksum) then decode (ICRC verified), "
            "in one process, the three measured back to back in this run.\n\n"
            "| path | packets/s (encode + decode) |\n|---|---|\n"
            f"| compiled data path (`mrcemu.datapath`, C) | {c:,.0f} |\n"
            f"| Python `struct` codec (the reference) | {f:,.0f} |\n"
            f"| Scapy build + dissect | {s:,.0f} |\n"
            f"| **compiled / Python codec** | **{c / f:.1f}** |\n"
            f"| **Python codec / Scapy** | **{f / s:.1f}** |\n")


run = wire_codec
