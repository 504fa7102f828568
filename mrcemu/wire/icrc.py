"""The RoCEv2 invariant CRC over IPv6.

CRC32 over: 8 bytes of 0xff (the pseudo LRH), the IPv6 header with traffic
class, flow label and hop limit set to all ones, the UDP header with its
checksum set to 0xffff, the BTH with byte 4 (FECN, BECN, reserved) set to 0xff,
and everything after up to the ICRC. The result goes on the wire
little-endian. It covers the IPv6 header right before UDP: for MRC the inner one,
addressed to the destination port, which no switch changes. (For the plain RoCEv2
baseline the destination is not masked and the fabric rewrites it, so that packet's
ICRC is computed for its destination *as delivered*: the host port address left
after every uSID is consumed.)
"""

from __future__ import annotations

import zlib

IPV6_LEN, UDP_LEN = 40, 8
# The constant part: the pseudo LRH, then (for IPv6, version 6) TC and flow label masked.
_PREFIX6 = zlib.crc32(b"\xff" * 8 + b"\x6f\xff\xff\xff")
_LRH = zlib.crc32(b"\xff" * 8)
_FF, _FFFF = b"\xff", b"\xff\xff"


def crc(packet: bytes | memoryview, end: int | None = None) -> int:
    """ICRC value over packet[:end] (an IPv6 packet; end defaults to len - 4)."""
    m = memoryview(packet)
    if end is None:
        end = len(m) - 4
    # The version nibble is covered; precomputed for the usual 6.
    c = _PREFIX6 if m[0] >> 4 == 6 else zlib.crc32(bytes([m[0] | 0x0F]) + b"\xff" * 3, _LRH)
    c = zlib.crc32(m[4:7], c)  # payload length, next header
    c = zlib.crc32(_FF, c)  # hop limit
    c = zlib.crc32(m[8:44], c)  # addresses, UDP ports
    c = zlib.crc32(m[44:46], c)  # UDP length
    c = zlib.crc32(_FFFF, c)  # UDP checksum
    c = zlib.crc32(m[48:52], c)  # BTH bytes 0-3
    c = zlib.crc32(_FF, c)  # FECN, BECN, reserved
    return zlib.crc32(m[53:end], c)


def compute(packet: bytes) -> bytes:
    """The 4 ICRC bytes for an IPv6/UDP/BTH packet whose last 4 bytes are the ICRC slot."""
    return crc(packet).to_bytes(4, "little")


def verify(packet: bytes | memoryview) -> bool:
    return len(packet) >= IPV6_LEN + UDP_LEN + 16 and crc(packet).to_bytes(4, "little") == bytes(
        memoryview(packet)[-4:])
