"""The NIC daemon's control surface, typed: each request is a frozen dataclass, each
reply a TypedDict, and the EV and path changes a trace holds are named rows. The
daemon (`nic/daemon.py`) dispatches on these, the client (`nic/client.py`) builds them,
and the report (`scenario/analysis.py`) reads the rows: one definition for all three.

On the wire a request is one JSON object, `{"op": NAME, field: value, ...}`. `parse`
turns it into its Op or refuses it with one line naming what is wrong (`OpError`): an
unknown op, a missing or unknown field, a value of the wrong type. Pure: no sockets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, TypedDict

from mrcemu.errors import MrcemuError

TRANSPORTS = ("mrc", "roce")
# The longest the daemon holds a `wait` before answering: a client checks in (Ctrl-C, its
# own time limit) at least this often.
MAX_HOLD_S = 10.0
JSON_INT_MAX = (1 << 64) - 1  # a field wider than this is no NIC's (R_Keys, VAs: 64 bits)


class OpError(MrcemuError):
    """A request the daemon refuses before acting on it: one line naming the field."""


class _Bad(Exception):
    """A value of the wrong kind; what the field takes, for the message."""


def _uint(v: object) -> int:
    if type(v) is not int or not 0 <= v <= JSON_INT_MAX:
        raise _Bad("a non-negative integer")
    return v


def _kind(t: type, what: str) -> Callable[[object], Any]:
    """A check that the value is exactly of type `t` (a bool is no int here)."""
    def check(v: object) -> Any:
        if type(v) is not t:
            raise _Bad(what)
        return v
    return check


def _or_null(check: Callable[[object], Any]) -> Callable[[object], Any]:
    """`check`, or None."""
    def either(v: object) -> Any:
        if v is None:
            return None
        try:
            return check(v)
        except _Bad as e:
            raise _Bad(f"{e} or null") from None
    return either


_bool = _kind(bool, "true or false")
_obj = _kind(dict, "a JSON object")
_objs = _kind(list, "a list of requests")


def _seconds(v: object) -> float:
    """A hold, in seconds: a number from 0 to MAX_HOLD_S (a bool is no number here)."""
    if type(v) not in (int, float) or not 0 <= v <= MAX_HOLD_S:  # NaN fails too
        raise _Bad(f"a number of seconds from 0 to {MAX_HOLD_S:g}")
    return float(v)


def _transport(v: object) -> str:
    if v not in TRANSPORTS:
        raise _Bad(" or ".join(repr(t) for t in TRANSPORTS))
    return str(v)


def _ev(v: object) -> int:
    """An EV as a number or its hex string ("0x00010002"), as reports print it."""
    if type(v) is str:
        try:
            v = int(v, 0)
        except ValueError:
            raise _Bad("an EV: an integer or a string such as '0x00010002'") from None
    try:
        return _uint(v)
    except _Bad:
        raise _Bad("an EV: an integer or a string such as '0x00010002'") from None


MAX_EVS = 4096  # an explicit profile's EVs at most: a connection has far fewer


def _evs(v: object) -> list[int]:
    """An explicit profile's EVs: a non-empty list, each as `_ev` takes it."""
    what = f"a list of 1 to {MAX_EVS} EVs, each an integer or a string such as '0x00010002'"
    if type(v) is not list or not 0 < len(v) <= MAX_EVS:
        raise _Bad(what)
    try:
        return [_ev(x) for x in v]
    except _Bad:
        raise _Bad(what) from None


# What each field annotation accepts (the annotations are strings: see the import of
# annotations above). A field typed otherwise is a defect: test_ops checks every op.
CHECKS: dict[str, Callable[[object], Any]] = {
    "int": _uint, "int | None": _or_null(_uint), "bool": _bool, "dict": _obj,
    "dict | None": _or_null(_obj), "list": _objs, "Transport": _transport, "EvId": _ev,
    "Seconds": _seconds, "EvIds | None": _or_null(_evs),
}
EvId = int  # an EV's number: parsed from an integer or a hex string
EvIds = list  # EVs, each an EvId
Transport = str  # "mrc" or "roce"
Seconds = float  # a hold: from 0 to MAX_HOLD_S


@dataclass(frozen=True)
class Op:
    """A control request. `OP` is its name on the wire; the fields are its arguments,
    those with defaults optional."""

    OP: ClassVar[str] = ""

    def to_json(self) -> dict[str, object]:
        """The request as sent: the optional fields left at their defaults left out."""
        out: dict[str, object] = {"op": self.OP}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.default is dataclasses.MISSING or v != f.default:
                out[f.name] = v
        return out


@dataclass(frozen=True)
class Ping(Op):
    OP = "ping"


@dataclass(frozen=True)
class Register(Op):
    """Register a memory region of `size` bytes (zeroed) for writes to land in."""
    OP = "register"
    size: int


@dataclass(frozen=True)
class Free(Op):
    OP = "free"
    rkey: int


@dataclass(frozen=True)
class Hash(Op):
    """The SHA-256 of a region's bytes."""
    OP = "hash"
    rkey: int


@dataclass(frozen=True)
class Write(Op):
    """Post an RDMA WRITE of `size` bytes (filled from `seed`) to `peer`'s region."""
    OP = "write"
    peer: int
    size: int
    va: int
    rkey: int
    transport: Transport = "mrc"
    qp: int = 0
    seed: int = 1
    imm: int | None = None
    settings: dict | None = None  # transport settings of this connection alone


@dataclass(frozen=True)
class Stats(Op):
    """A connection's counters and state; `missing_ok`: None for one not made yet."""
    OP = "stats"
    peer: int
    transport: Transport = "mrc"
    qp: int = 0
    missing_ok: bool = False


@dataclass(frozen=True)
class Msg(Op):
    """A message's progress: in flight, or completed recently."""
    OP = "msg"
    peer: int
    msn: int
    transport: Transport = "mrc"
    qp: int = 0


@dataclass(frozen=True)
class Wait(Op):
    """Each of `msgs` (`msg` requests without their op: peer, msn, transport, qp) as `msg`
    answers it, once every one has completed or failed, or `timeout` seconds have
    passed: the daemon holds the reply meanwhile, and its loop runs on. Inside a batch
    it is answered at once."""
    OP = "wait"
    msgs: list
    timeout: Seconds = 0.0

    def requests(self) -> list[Msg]:
        """The messages waited for, each parsed as a `msg` request (OpError naming the
        first that is not one)."""
        out = []
        for i, m in enumerate(self.msgs):
            if type(m) is not dict:
                raise OpError(f"op 'wait': msgs[{i}] must be a JSON object (peer, msn, "
                              f"transport, qp), not {type(m).__name__}")
            try:
                q = parse({**m, "op": Msg.OP})
            except OpError as e:
                raise OpError(f"op 'wait': msgs[{i}]: {e}") from None
            assert isinstance(q, Msg)
            out.append(q)
        return out


@dataclass(frozen=True)
class Reconnect(Op):
    """Make a connection again at generation `gen` (the same at both ends); `settings`
    None keeps the ones it had."""
    OP = "reconnect"
    peer: int
    gen: int
    transport: Transport = "mrc"
    qp: int = 0
    settings: dict | None = None


@dataclass(frozen=True)
class Configure(Op):
    """The NIC's own transport settings changed: every connection made again over them,
    at generation `gen` (None: the next)."""
    OP = "configure"
    transport: dict
    gen: int | None = None


@dataclass(frozen=True)
class Generation(Op):
    """The highest generation this NIC's connections have had."""
    OP = "generation"


@dataclass(frozen=True)
class Deny(Op):
    """Take an EV toward `peer` out of use (an administrator's deny)."""
    OP = "deny"
    peer: int
    ev: EvId


@dataclass(frozen=True)
class Allow(Op):
    OP = "allow"
    peer: int
    ev: EvId


@dataclass(frozen=True)
class Batch(Op):
    """Several requests, answered in order in one reply; each is parsed on its own."""
    OP = "batch"
    requests: list


@dataclass(frozen=True)
class Internals(Op):
    """A snapshot of each busy connection and the ports, for diagnosis."""
    OP = "internals"


@dataclass(frozen=True)
class TraceReset(Op):
    OP = "trace_reset"


@dataclass(frozen=True)
class Trace(Op):
    """Every connection's send trace, EV and path changes, and the received goodput."""
    OP = "trace"


@dataclass(frozen=True)
class Fidelity(Op):
    """The NIC's self-measurements; `reset`: start them anew."""
    OP = "fidelity"
    reset: bool = False


@dataclass(frozen=True)
class Events(Op):
    """A connection's EV state changes after the `since`-th it ever had (libmrc's event
    queue, polled): the rows, the count to ask from next, and how many were dropped
    (let go at the history's limit before they were asked for)."""
    OP = "events"
    peer: int
    transport: Transport = "mrc"
    qp: int = 0
    since: int = 0


@dataclass(frozen=True)
class EvProfile(Op):
    """The EV profile of the MRC connection toward `peer` (libmrc's): with `evs`, those
    EVs alone (each other one denied; a denied one listed comes back through probes);
    with `min_active`, the fewest usable EVs the policy keeps in use. Answers the
    profile as it then is."""
    OP = "ev_profile"
    peer: int
    evs: EvIds | None = None
    min_active: int | None = None


@dataclass(frozen=True)
class Probe(Op):
    """A probe now on EV `ev` of the MRC connection toward `peer` (libmrc's EV probe):
    what its answer changes shows in the connection's `events`."""
    OP = "probe"
    peer: int
    ev: EvId


@dataclass(frozen=True)
class Shutdown(Op):
    OP = "shutdown"


OPS: dict[str, type[Op]] = {c.OP: c for c in (
    Ping, Register, Free, Hash, Write, Stats, Msg, Wait, Reconnect, Configure, Generation,
    Deny, Allow, Batch, Internals, TraceReset, Trace, Fidelity, Events, EvProfile, Probe,
    Shutdown)}


def parse(req: object) -> Op:
    """The request `req` (a decoded JSON value) as its Op, or OpError."""
    if type(req) is not dict:
        raise OpError(f"a request is a JSON object with an 'op' field, not {type(req).__name__}")
    name = req.get("op")
    cls = OPS.get(name) if type(name) is str else None
    if cls is None:
        what = "missing field 'op'" if name is None else f"unknown op {name!r}"
        raise OpError(f"{what}: one of {', '.join(OPS)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    extra = sorted(set(req) - set(fields) - {"op"})
    if extra:
        raise OpError(f"op {name!r}: unknown field {extra[0]!r} (it takes: "
                      f"{', '.join(fields) or 'nothing'})")
    args = {}
    for f in fields.values():
        if f.name not in req:
            if f.default is dataclasses.MISSING:
                raise OpError(f"op {name!r}: missing field {f.name!r}")
            continue
        try:
            args[f.name] = CHECKS[str(f.type)](req[f.name])
        except _Bad as e:
            v = req[f.name]
            raise OpError(f"op {name!r}: field {f.name!r} must be {e}, not "
                          f"{type(v).__name__} {_short(v)}") from None
    return cls(**args)


def _short(v: object) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


# ---- replies (the `ok: true` ones; a refusal is {"ok": false, "error": "one line"}) ----

class RegisterReply(TypedDict):
    ok: bool
    rkey: int
    va: int


class WriteReply(TypedDict):
    ok: bool
    msn: int
    sha256: str  # of the source, taken before posting


class EventsReply(TypedDict):
    ok: bool
    events: list[EvChange]
    next: int
    dropped: int


class EvRow(NamedTuple):
    """One EV of a profile: its state (GOOD, ASSUMED_BAD, DENIED...), whether it is one
    of the active ones data is sprayed over, and the path it names."""
    ev: int
    state: str
    active: bool
    plane: int
    spine: int | None


class EvProfileReply(TypedDict):
    ok: bool
    min_active: int
    evs: list[EvRow]


class ProbeReply(TypedDict):
    ok: bool
    probe_id: int


class HashReply(TypedDict):
    ok: bool
    sha256: str


class MessageState(TypedDict):
    """A message as the sender knows it (`msg`; `done_at` None while in flight)."""
    msn: int
    size: int
    acked_pkts: int
    npkts: int
    posted_at: float
    done_at: float | None


class MsgReply(MessageState):
    ok: bool
    failed: bool
    why: str | None  # why its QP failed, if it did before the message completed


class WaitReply(TypedDict):
    ok: bool
    replies: list[dict]  # each a MsgReply, or {"ok": false, "error": ...}


class GenerationReply(TypedDict):
    ok: bool
    gen: int


class EvChange(NamedTuple):
    """An EV's state change, as a trace row: at `t` (the NIC's clock), EV `ev` went
    from `old` to `new` for `why`; `lost_sent`, the send time of the packet whose loss
    caused it (None: no loss did)."""
    t: float
    ev: int
    old: str
    new: str
    why: str
    lost_sent: float | None = None


class PathChange(NamedTuple):
    """A path given up for another (`old_ev` rehashed to `new_ev`) at `t`."""
    t: float
    old_ev: int
    new_ev: int


class ConnTrace(TypedDict):
    """One connection in a `trace` reply; the change rows as lists (JSON): read them
    with `ev_changes` and `path_changes`."""
    peer: int
    transport: str
    qp: int
    stats: dict
    tx: dict  # the send trace: parallel lists t, ev, rtx (transport/trace.py)
    ev_changes: list[list]
    path_changes: list[list]
    rto: float
    srtt: float | None
    cwnd: float
    cc: dict
    pmtu: int
    history_dropped: int


class TraceReply(TypedDict):
    ok: bool
    host: int
    conns: list[ConnTrace]
    rx_bin_s: float
    rx_bins: dict[str, dict[str, int]]  # plane -> bin index -> bytes
    malformed: dict[str, int]
    fidelity: dict


def ev_changes(c: ConnTrace | dict) -> list[EvChange]:
    """A traced connection's EV changes as typed rows (older records' rows lack
    `lost_sent`)."""
    return [EvChange(*row) for row in c["ev_changes"]]


def path_changes(c: ConnTrace | dict) -> list[PathChange]:
    return [PathChange(*row) for row in c["path_changes"]]
