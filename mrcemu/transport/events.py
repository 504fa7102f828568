"""What a connection reports, as typed events the I/O shell drains (aioquic's style).

A core never keeps a growing history of its own: it queues events, and whoever drives
it (the NIC daemon, a test, the simulated network) takes them with `next_event()` and
keeps what it needs, as much as it can afford.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MessageCompleted:
    """A posted WRITE was acknowledged in full (requester side)."""

    msn: int
    size: int
    npkts: int
    posted_at: float
    done_at: float


@dataclass(frozen=True)
class MessageFailed:
    """The peer refused a posted WRITE (requester side): `status` REMOTE_ACCESS. It will
    not complete; the connection goes on (an MRC connection carries other QPs' writes)."""

    t: float
    msn: int
    status: str
    why: str


@dataclass(frozen=True)
class MessageReceived:
    """A WRITE was placed in full, in MSN order (responder side)."""

    msn: int
    imm: int | None
    at: float


@dataclass(frozen=True)
class EvStateChanged:
    """An EV changed state, or a plane went out of the rotation (`ev` is -1 then and
    `old` names the plane). `lost_sent`: for an EV retired by a loss, when the lost
    packet was sent (its first loss, as far as the sender can date it)."""

    t: float
    ev: int
    old: str
    new: str
    why: str
    lost_sent: float | None = None


@dataclass(frozen=True)
class PathRehashed:
    """The RoCE baseline's ECMP hash moved the QP from one path to another."""

    t: float
    old_ev: int
    new_ev: int


# Why a QP failed, as a work completion says it (ConnectionFailed.status).
RETRY_EXCEEDED = "retry_exceeded"  # nothing acknowledged within the retry limit
REMOTE_ACCESS = "remote_access"  # the peer refused a request: a bad key or address


def refused_why(msn: int, psn: int) -> str:
    """What a remote access NAK for message `msn`, at `psn`, tells the requester."""
    return (f"the peer refused message {msn} (PSN {psn}): a remote access error, its key "
            "unknown there or its address outside the region")


@dataclass(frozen=True)
class ConnectionFailed:
    """The QP is in error; nothing more of it will complete. `status`: RETRY_EXCEEDED,
    or REMOTE_ACCESS for the request `msn` the peer refused (what follows it is
    flushed)."""

    t: float
    why: str
    status: str = RETRY_EXCEEDED
    msn: int | None = None


Event = (MessageCompleted | MessageFailed | MessageReceived | EvStateChanged | PathRehashed
         | ConnectionFailed)
