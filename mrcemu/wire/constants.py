"""Opcodes, enums and DSCP classes of MRC over RoCEv2 (docs/wire.md)."""

from __future__ import annotations

import enum

ROCE_UDP_PORT = 4791
# Three transcriptions print MRC's port as 4971, most likely 4791 transposed (docs/wire.md,
# low confidence): we send 4791 and accept both.
MRC_UDP_PORT_TRANSPOSED = 4971
ACCEPTED_UDP_PORTS = frozenset({ROCE_UDP_PORT, MRC_UDP_PORT_TRANSPOSED})
ICRC_LEN = 4
# MRC packets travel IPv6-in-IPv6 (the white paper, 2.2): the outer header's next header.
IPPROTO_IPV6 = 41

# --- Choices where the public transcriptions of OCP-MRC-1.0 disagree (docs/wire.md) ---
# The EV is striped over the UDP source port and the flow label's low 16 bits. MCL puts
# the EV's high half in the source port, one behaviour description the low half.
EV_HIGH_HALF_IN_SPORT = True
# Bit numbering of ERTH's port_status_mask: the API says bit N = port N, 1-based
# (medium); a set bit means the port is up. Our plane p is port p + 1.
PORT_STATUS_FIRST_BIT = 1
# Connectionless endpoint requests go to this DQPN; the request id rides in BTH PSN[15:0].
ENDPOINT_DQPN = 0x000002
# TSETH/PETH/ERTH timestamps: 16 bits of 128 ns when tsr = 0; the word's ftype is 1.
TIMESTAMP_UNIT = 128e-9
TIMESTAMP_FTYPE = 1
# CC_STATE.rcvd_bytes counts 256-byte units (medium), rounded up.
RCVD_BYTES_UNIT = 256
# PSNs are 24 bits on the wire; the transports keep them unwrapped and mask on framing.
PSN_MASK = 0xFFFFFF


class Wake(enum.IntFlag):
    """Why the NIC's compiled loop (datapath/loop.c) hands a QP back to the policy."""

    TOUCHED = 1  # it received what the loop did not take whole
    TIMER = 2  # the policy's own timer for it is due


# How long (seconds, this machine's clock) the NIC's timers may wait while frames are
# left unread: they judge silence, which those frames may answer, but an input flood
# must not starve SACKs and RTOs. A bound in time, not in loop rounds: a compiled round
# reads hundreds of frames, so a count of rounds let a flood hold timers for tens of
# milliseconds. Under half the tightest lateness the fidelity monitor allows (2.5 ms at
# p99). The compiled loop and the policy's loop both keep to it.
MAX_TIMER_DEFER_S = 0.001


class LossKind(enum.IntEnum):
    """How the compiled sender found a packet lost (never by a trim: the network said
    where it went), or its EV overdue; the policy core reads them from its queue."""

    HOLE = 0  # per-EV order: a later packet on its EV arrived, it did not
    RTO = 1  # the retransmission timeout
    # Not a verdict: a packet overdue against its EV's own round trips goes again
    # elsewhere and its EV is stopped (one entry per EV stopped, its oldest packet's).
    OVERDUE = 2


class Opcode(enum.IntEnum):
    # Plain RoCEv2 RC, for the baseline: RETH only on FIRST and ONLY.
    RC_WRITE_FIRST = 0x06
    RC_WRITE_MIDDLE = 0x07
    RC_WRITE_LAST = 0x08
    RC_WRITE_LAST_IMM = 0x09
    RC_WRITE_ONLY = 0x0A
    RC_ACK = 0x11
    # RoCEv2's Congestion Notification Packet (IBTA RoCEv2 annex A17): a responder that
    # received CE-marked data tells the requester's QP; DCQCN's sender lowers its rate.
    CNP = 0x81
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


class Syndrome(enum.IntEnum):
    """AETH syndromes, as IBTA defines them (ACK, NAK and its code in the low bits)."""
    ACK = 0x00
    ACK_NO_CREDIT = 0x1F  # an ACK without a credit count: MRC's ACKNOWLEDGE
    NAK_PSN = 0x60  # PSN sequence error: go back
    NAK_REMOTE_ACCESS = 0x62  # a key the responder does not know, or an address outside


class SackMark(enum.IntEnum):
    NONE = 0
    SKIP_ONCE = 1  # the forward path was ECN-marked
    ALWAYS_SKIP = 2


class EndpointOp(enum.IntEnum):
    """ERTH/EETH op as it is on the wire (the API's enum numbers them the other way)."""

    PORT_STATUS_UPDATE = 0
    EV_PROBE = 1


class Dscp(enum.IntEnum):
    NO_TRIM = 0
    TRIMMABLE = 4
    TRIMMABLE_RETX = 8
    TRIMMED = 12
    TRIMMED_LASTHOP = 16
    CONTROL = 46


TRIMMED_DSCPS = frozenset({Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP})
# Reliability probes travel in the data class, so that they test the path data takes
# and meet the queues data meets (docs/wire.md, medium confidence); SACK/NACK/ACK are CONTROL.
PROBE_DSCP = Dscp.TRIMMABLE


def ev_split(ev: int) -> tuple[int, int]:
    """(UDP source port, flow label) carrying the 32-bit EV."""
    hi, lo = (ev >> 16) & 0xFFFF, ev & 0xFFFF
    return (hi, lo) if EV_HIGH_HALF_IN_SPORT else (lo, hi)


def ev_join(sport: int, flow_label: int) -> int:
    """The EV a packet carries in its UDP source port and flow label."""
    lo = flow_label & 0xFFFF
    return (sport << 16) | lo if EV_HIGH_HALF_IN_SPORT else (lo << 16) | sport


def port_status_mask(planes_up: set[int]) -> int:
    return sum(1 << (p + PORT_STATUS_FIRST_BIT) for p in planes_up)


def planes_in_mask(mask: int, planes: range | list[int]) -> set[int]:
    return {p for p in planes if mask >> (p + PORT_STATUS_FIRST_BIT) & 1}
