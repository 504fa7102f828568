"""What the NIC daemon does for each control request: one handler per op (`HANDLERS`),
each taking the Nic and its typed request (`nic/ops.py`) and returning the reply.

A handler refuses with `Refused` (or any MrcemuError): the reply is then
`{"ok": false, "error": "<one line>"}`, and the daemon goes on. `dispatch` parses the
request first, so no handler sees a missing field or a value of the wrong type. One
handler (`wait`) may hold its reply (`control.Held`) until its messages are done.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any, Protocol

from mrcemu import datapath
from mrcemu.errors import MrcemuError
from mrcemu.nic import ops
from mrcemu.nic.control import Held
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.memory import BudgetExceeded
from mrcemu.transport.profiles import MAX_QPS


class Nic(Protocol):
    """What of the NIC daemon (nic/daemon.py) the handlers read and change."""

    name: str
    host: int
    topo: Any
    cfg: TransportConfig
    epoch: int
    running: bool
    memory: Any  # transport.memory.MemoryTable
    meter: Any  # nic.meter.Meter
    tx_ports: Any  # datapath.Ports
    wake: Any  # nic.wakeups.Wakeups
    ports: dict[int, Any]
    conns: dict[tuple[int, str, int], Any]
    conn_settings: dict[tuple[int, str, int], dict]
    conn_gen: dict[tuple[int, str, int], int]
    history: dict[tuple[int, str, int], Any]
    rx_bins: dict[int, dict[int, int]]
    rx_bin_s: float
    malformed: dict[str, int]
    delay_bytes: int

    def now(self) -> float: ...
    def log(self, event: str, **data: object) -> None: ...
    def held_bytes(self) -> int: ...
    def conn(self, peer: int, transport: str, settings: dict | None = None, qp: int = 0,
             gen: int | None = None) -> Any: ...
    def remake(self, key: tuple[int, str, int], settings: dict | None, gen: int
               ) -> str | None: ...
    def flush(self, c: Any) -> None: ...
    def drain_events(self, c: Any) -> None: ...
    def busy(self, c: Any) -> bool: ...


class Refused(MrcemuError):
    """The request is well formed but cannot be done: the reason, one line."""


def _key(r: Any) -> tuple[int, str, int]:
    return r.peer, r.transport, r.qp


def ping(nic: Nic, r: ops.Ping) -> dict:
    return {"ok": True, "host": nic.name, "pid": os.getpid(),
            "malformed": nic.malformed, "transport": nic.cfg.to_json(),
            "memory_used": nic.memory.used + nic.held_bytes(),
            "memory_budget": nic.memory.budget,
            "delay_line_bytes": nic.delay_bytes,
            "delay_line": nic.tx_ports.delay_counters()}


def register(nic: Nic, r: ops.Register) -> ops.RegisterReply:
    try:
        with nic.meter.harness():  # allocating (zeroing) the region
            mr = nic.memory.register(r.size, also_held=nic.held_bytes())
    except BudgetExceeded as e:
        raise Refused(str(e)) from None
    nic.log("register", rkey=mr.rkey, size=len(mr.buf))
    return {"ok": True, "rkey": mr.rkey, "va": mr.base}


def free(nic: Nic, r: ops.Free) -> dict:
    nic.memory.free(r.rkey)
    return {"ok": True}


def hash_region(nic: Nic, r: ops.Hash) -> ops.HashReply:
    mr = nic.memory.regions.get(r.rkey)
    if mr is None:
        raise Refused(f"no memory region with R_Key {r.rkey}")
    with nic.meter.harness():
        digest = mr.sha256()
    return {"ok": True, "sha256": digest}


def write(nic: Nic, r: ops.Write) -> ops.WriteReply:
    if r.peer >= nic.topo.hosts or r.peer == nic.host:
        raise Refused(f"no peer h{r.peer}")
    most = MAX_QPS if r.transport == "roce" else 1
    if r.qp >= most:
        raise Refused(f"no {r.transport} QP {r.qp}: a pair has {most} at most")
    try:
        nic.memory.check_budget(r.size, also_held=nic.held_bytes())
    except BudgetExceeded as e:
        raise Refused(str(e)) from None
    with nic.meter.harness():
        data = bytearray(r.size)
        datapath.fill(data, r.seed)
        digest = hashlib.sha256(data).hexdigest()  # before posting: it takes a while
    c = nic.conn(r.peer, r.transport, r.settings, r.qp)
    msn = c.post_write(data, r.va, r.rkey, nic.now(), imm=r.imm)
    nic.log("post", peer=r.peer, transport=r.transport, qp=r.qp, msn=msn, size=r.size)
    nic.flush(c)
    return {"ok": True, "msn": msn, "sha256": digest}


def stats(nic: Nic, r: ops.Stats) -> dict:
    key = _key(r)
    c = nic.conns.get(key)
    if c is None:
        if r.missing_ok:
            return {"ok": True, "stats": None}
        raise Refused(f"no {r.transport} connection to h{r.peer}")
    nic.drain_events(c)
    h = nic.history[key]
    return {"ok": True, "stats": c.stats.to_json(),
            "unfinished": [h.message(c, m.msn) for m in c.unfinished()],
            "ev_states": c.profile.states(), "failed": c.failed,
            "ev_changes": h.ev_change_rows(), "path_changes": h.path_change_rows(),
            "planes_down": sorted(c.profile.planes_down), "cwnd": c.cwnd,
            "cc": c.cc_state(), "settings": nic.conn_settings.get(key, {}),
            "load_balancing": c.profile.policy.name,
            "srtt": c.srtt, "history_dropped": h.dropped,
            "gen": nic.conn_gen.get(key, 0),
            "malformed": nic.malformed}


def msg(nic: Nic, r: ops.Msg) -> ops.MsgReply:
    key = _key(r)
    c = nic.conns.get(key)
    if c is None:
        raise Refused(f"no {r.transport} connection to h{r.peer}")
    nic.drain_events(c)
    m = nic.history[key].message(c, r.msn)
    if m is None:
        raise Refused(f"no message {r.msn} (unknown, or completed too long ago to be "
                      "remembered)")
    h = nic.history[key]
    refused = h.refused.get(r.msn)
    why = (refused.why if refused is not None
           else h.failed.why if h.failed is not None and m["done_at"] is None else None)
    return {"ok": True, **m, "failed": c.failed or refused is not None, "why": why}


def _msg_or_error(nic: Nic, r: ops.Msg) -> dict:
    try:
        return dict(msg(nic, r))
    except MrcemuError as e:
        return {"ok": False, "error": str(e)}


def _settled(reply: dict) -> bool:
    """Nothing more will happen to this message: done, its connection failed, or not
    one the NIC knows."""
    return not reply["ok"] or reply["done_at"] is not None or reply["failed"]


def wait(nic: Nic, r: ops.Wait) -> ops.WaitReply | Held:
    # Held rather than polled: a client asking every few milliseconds cost the NICs
    # a request each time, and itself a core's fifth at full speed.
    msgs = r.requests()

    def answer() -> ops.WaitReply:
        return {"ok": True, "replies": [_msg_or_error(nic, m) for m in msgs]}

    now = answer()
    if r.timeout == 0 or all(_settled(x) for x in now["replies"]):
        return now
    return Held(deadline=nic.now() + r.timeout,
                settled=lambda: all(_settled(x) for x in answer()["replies"]),
                answer=answer)


def reconnect(nic: Nic, r: ops.Reconnect) -> dict:
    # Both ends at one generation, which only the caller, asking both, can give: an end
    # made again alone would hear nothing from its peer.
    err = nic.remake(_key(r), r.settings, r.gen)
    if err:
        raise Refused(err)
    return {"ok": True}


def configure(nic: Nic, r: ops.Configure) -> dict:
    # The NIC's own transport settings (`transport:` in a scenario) changed between
    # runs: every connection is made again over them, keeping its own settings.
    cfg = TransportConfig.from_json({**nic.cfg.to_json(), **r.transport})
    busy = [k for k, c in nic.conns.items() if nic.busy(c)]
    if busy:
        raise Refused(f"h{nic.host} has connections busy: "
                      + ", ".join(f"{t} to h{p}" for p, t, _q in busy))
    nic.cfg = cfg
    # Every connection, and every pair made from now on, at the generation the client
    # gave every NIC alike: past any either end of a pair has had.
    nic.epoch = nic.epoch + 1 if r.gen is None else r.gen
    for key in list(nic.conns):
        nic.remake(key, None, nic.epoch)
    return {"ok": True}


def generation(nic: Nic, r: ops.Generation) -> ops.GenerationReply:
    return {"ok": True, "gen": max([nic.epoch, *nic.conn_gen.values()])}


def deny_or_allow(nic: Nic, r: ops.Deny | ops.Allow) -> dict:
    if r.peer >= nic.topo.hosts or r.peer == nic.host:
        raise Refused(f"no peer h{r.peer}")
    c = nic.conn(r.peer, "mrc")
    if r.ev not in c.profile.evs:
        raise Refused(f"no EV 0x{r.ev:08x} toward h{r.peer}")
    (c.profile.deny if isinstance(r, ops.Deny) else c.profile.allow)(r.ev, nic.now())
    nic.flush(c)  # a denied EV is probed back: timers to run
    return {"ok": True}


def batch(nic: Nic, r: ops.Batch) -> dict:
    # Each request on its own: one refused, the others still answered. No batch inside
    # a batch: a request's size stays bounded by its line. Nothing in a batch is held:
    # a `wait` there is answered at once.
    return {"ok": True, "replies": [
        {"ok": False, "error": "a batch cannot hold a batch"}
        if type(q) is dict and q.get("op") == ops.Batch.OP else _now(dispatch(nic, q))
        for q in r.requests]}


def _now(reply: dict | Held) -> dict:
    return reply.answer() if isinstance(reply, Held) else reply


def internals(nic: Nic, r: ops.Internals) -> dict:
    now = nic.now()
    out = [{"peer": peer, "transport": transport, "qp": qp, **c.snapshot(now)}
           for (peer, transport, qp), c in nic.conns.items() if c.busy]
    return {"ok": True, "conns": out, "backlog": nic.tx_ports.backlog(),
            "ports": nic.tx_ports.counters(),
            "connections": len(nic.conns), "active": len(nic.wake)}


def trace_reset(nic: Nic, r: ops.TraceReset) -> dict:
    for c in nic.conns.values():
        c.tx_trace.clear()
    nic.rx_bins = {p: {} for p in nic.ports}
    nic.meter.reset(nic.now())
    return {"ok": True, "t": nic.now()}


def trace(nic: Nic, r: ops.Trace) -> ops.TraceReply:
    conns: list[ops.ConnTrace] = []
    for key, c in nic.conns.items():
        nic.drain_events(c)
        h = nic.history[key]
        conns.append({
            "peer": key[0], "transport": key[1], "qp": key[2],
            "stats": c.stats.to_json(),
            "tx": c.tx_trace.to_json(), "ev_changes": h.ev_change_rows(),
            "path_changes": h.path_change_rows(), "rto": c.rto, "srtt": c.srtt,
            "cwnd": c.cwnd, "cc": c.cc_state(),
            "pmtu": nic.cfg.pmtu, "history_dropped": h.dropped})
    return {"ok": True, "host": nic.host, "conns": conns, "rx_bin_s": nic.rx_bin_s,
            "rx_bins": {str(p): {str(k): v for k, v in b.items()}
                        for p, b in nic.rx_bins.items()},
            "malformed": nic.malformed, "fidelity": nic.meter.to_json(nic.now())}


def fidelity(nic: Nic, r: ops.Fidelity) -> dict:
    if r.reset:
        nic.meter.reset(nic.now())
        return {"ok": True}
    return {"ok": True, "fidelity": nic.meter.to_json(nic.now())}


def events(nic: Nic, r: ops.Events) -> ops.EventsReply:
    key = _key(r)
    c = nic.conns.get(key)
    if c is None:  # no connection yet: nothing happened to it
        return {"ok": True, "events": [], "next": r.since, "dropped": 0}
    nic.drain_events(c)
    rows, nxt, dropped = nic.history[key].ev_changes_since(r.since)
    return {"ok": True, "events": rows, "next": nxt, "dropped": dropped}


def _mrc_toward(nic: Nic, peer: int) -> Any:
    if peer >= nic.topo.hosts or peer == nic.host:
        raise Refused(f"no peer h{peer}")
    return nic.conn(peer, "mrc")


def ev_profile(nic: Nic, r: ops.EvProfile) -> ops.EvProfileReply:
    c = _mrc_toward(nic, r.peer)
    prof = c.profile
    if r.min_active is not None:
        if not 1 <= r.min_active <= len(prof.evs):
            raise Refused(f"min_active must be 1 to {len(prof.evs)} (the EVs toward "
                          f"h{r.peer})")
        prof.min_active = r.min_active
    if r.evs is not None:
        try:
            prof.use_only(set(r.evs), nic.now())
        except ValueError as e:
            raise Refused(f"{e} toward h{r.peer}") from None
        nic.flush(c)  # denied EVs stop, allowed ones are probed: timers to run
    return {"ok": True, "min_active": prof.min_active,
            "evs": [ops.EvRow(e.ev, e.state.value, e.active, e.path.plane, e.path.spine)
                    for e in prof.evs.values()]}


def probe(nic: Nic, r: ops.Probe) -> ops.ProbeReply:
    c = _mrc_toward(nic, r.peer)
    if r.ev not in c.profile.evs:
        raise Refused(f"no EV 0x{r.ev:08x} toward h{r.peer}")
    probe_id = c.probe(r.ev, nic.now())
    nic.flush(c)
    return {"ok": True, "probe_id": probe_id}


def shutdown(nic: Nic, r: ops.Shutdown) -> dict:
    nic.running = False
    return {"ok": True}


HANDLERS: dict[type[ops.Op], Callable[[Nic, Any], dict | Held]] = {
    ops.Ping: ping, ops.Register: register, ops.Free: free, ops.Hash: hash_region,
    ops.Write: write, ops.Stats: stats, ops.Msg: msg, ops.Wait: wait,
    ops.Reconnect: reconnect, ops.Configure: configure, ops.Generation: generation,
    ops.Deny: deny_or_allow,
    ops.Allow: deny_or_allow, ops.Batch: batch, ops.Internals: internals,
    ops.TraceReset: trace_reset, ops.Trace: trace, ops.Fidelity: fidelity,
    ops.Events: events, ops.EvProfile: ev_profile, ops.Probe: probe,
    ops.Shutdown: shutdown,
}


def dispatch(nic: Nic, req: object) -> dict | Held:
    """The reply to one decoded request, or its hold (`wait`): never an exception,
    whatever it holds."""
    try:
        r = ops.parse(req)
        return HANDLERS[type(r)](nic, r)
    except MrcemuError as e:
        return {"ok": False, "error": str(e)}
    except Exception as e:  # noqa: BLE001 - a bad request never kills the NIC
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
