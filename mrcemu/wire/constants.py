"""Opcodes, enums and DSCP classes of MRC over RoCEv2 (DESIGN.md section 4)."""

from __future__ import annotations

import enum

ROCE_UDP_PORT = 4791
ICRC_LEN = 4


class Opcode(enum.IntEnum):
    # Plain RoCEv2 RC, for the baseline: RETH only on FIRST and ONLY.
    RC_WRITE_FIRST = 0x06
    RC_WRITE_MIDDLE = 0x07
    RC_WRITE_LAST = 0x08
    RC_WRITE_LAST_IMM = 0x09
    RC_WRITE_ONLY = 0x0A
    RC_ACK = 0x11
    # MRC: RETH in every data packet.
    WRITE_FIRST = 0xC6
    WRITE_MIDDLE = 0xC7
    WRITE_LAST = 0xC8
    WRITE_LAST_IMM = 0xC9
    WRITE_ONLY = 0xCA
    WRITE_ONLY_IMM = 0xCB
    ACKNOWLEDGE = 0xD1
    ENDPOINT_REQUEST = 0xD8
    ENDPOINT_RESPONSE = 0xD9
    RELIABILITY_SACK = 0xDC
    RELIABILITY_NACK = 0xDD
    RELIABILITY_PROBE_REQ = 0xDE


MRC_DATA = frozenset({Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST,
                      Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM})
WITH_IMM = frozenset({Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM, Opcode.RC_WRITE_LAST_IMM})
ROCE_WITH_RETH = frozenset({Opcode.RC_WRITE_FIRST, Opcode.RC_WRITE_ONLY})
ROCE_DATA = frozenset({Opcode.RC_WRITE_FIRST, Opcode.RC_WRITE_MIDDLE, Opcode.RC_WRITE_LAST,
                       Opcode.RC_WRITE_LAST_IMM, Opcode.RC_WRITE_ONLY})


class NackReason(enum.IntEnum):
    TRIMMED = 0x01
    TRIMMED_LASTHOP = 0x02
    NO_BITMAP = 0x06
    NO_PKT_BUFFER = 0x07
    NO_RESOURCE = 0x0A
    PSN_OOR_WINDOW = 0x0B
    UNEXP_EVENT = 0x19


class SackMark(enum.IntEnum):
    NONE = 0
    SKIP_ONCE = 1  # the forward path was ECN-marked
    ALWAYS_SKIP = 2


class EndpointType(enum.IntEnum):
    EV_PROBE = 1
    PORT_STATUS_UPDATE = 2


class Dscp(enum.IntEnum):
    NO_TRIM = 0
    TRIMMABLE = 4
    TRIMMABLE_RETX = 8
    TRIMMED = 12
    TRIMMED_LASTHOP = 16
    CONTROL = 46


TRIMMED_DSCPS = frozenset({Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP})
