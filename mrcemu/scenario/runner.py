"""Run a scenario's workload and fault timeline over one transport on a running fabric.

The thin shell between the scenario model and the NIC daemons: it posts writes over
the daemons' control sockets (one batched request per host, hosts in parallel),
applies the timeline's faults from a thread on the daemons' monotonic clock, and
collects the daemons' records for `analysis`. Nothing here computes a result.
"""

from __future__ import annotations

import heapq
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from mrcemu import fidelity
from mrcemu.errors import MrcemuError
from mrcemu.fabric import inject
from mrcemu.fabric.mapper import TIMEOUT_S, WINDOW_S, Mapper
from mrcemu.fabric.servers import Servers, of_running, split_servers
from mrcemu.nic import ops
from mrcemu.nic.client import NicClient, poll_interval
from mrcemu.scenario import program_run
from mrcemu.scenario.analysis import conn_label
from mrcemu.scenario.model import Scenario, TimedFault
from mrcemu.topology import Layout
from mrcemu.topology.faults import Fault

Notify = Callable[[str, dict], None]


@dataclass
class FaultRecord:
    kind: str
    target: str
    at_s: float  # as scheduled
    t_inject: float | None = None  # monotonic, when it took effect
    t_heal: float | None = None
    error: str | None = None
    spec: dict = field(default_factory=dict)
    dropped: int | None = None  # a path loss's drops, read as it was healed
    t_step: float | None = None  # monotonic: its step's first write, for a step's fault


class Timeline(threading.Thread):
    """Applies timed faults relative to t0, and a step's faults relative to that step's
    first write (`step_started`), healing those when the step ends (`step_ended`); heals
    what it injected when stopped."""

    def __init__(self, fault_list: tuple[TimedFault, ...], t0: float, layout: Layout,
                 pids: dict[str, int], notify: Notify) -> None:
        super().__init__(daemon=True, name="timeline")
        self.t0, self.layout, self.pids = t0, layout, pids
        self.notify = notify
        self.records = [FaultRecord(f.kind, f.target, f.at, spec=f.__dict__.copy())
                        for f in fault_list]
        self.faults = fault_list
        self.plan: list[tuple[float, str, int]] = []  # a heap: (when, action, fault)
        for i, f in enumerate(fault_list):
            if f.step is None:
                self._schedule(t0, i)
        self.halt = threading.Event()
        self.lock = threading.Condition()

    def _schedule(self, start: float, i: int) -> None:
        f = self.faults[i]
        heapq.heappush(self.plan, (start + f.at, "inject", i))
        if f.duration is not None:
            heapq.heappush(self.plan, (start + f.at + f.duration, "heal", i))

    def apply_at_start(self) -> None:
        """Apply the faults at t=0 now, before the workload starts (the run's thread then
        begins after them): a fault at 0 is in place from the first packet on, however
        long injecting it takes (host-loss on 8 hosts takes ~1 s of nft calls)."""
        while self.plan and self.plan[0][0] <= self.t0:
            _, action, i = heapq.heappop(self.plan)
            self._apply(action, i)

    def step_started(self, step: int, t: float) -> None:
        """Step `step` (counted over the run) posts its first write at `t`: its faults
        are due from then."""
        with self.lock:
            for i, f in enumerate(self.faults):
                if f.step == step:
                    self.records[i].t_step = t
                    self._schedule(t, i)
            self.lock.notify_all()

    def step_ended(self, step: int) -> None:
        """Step `step` is over (its last write done, or given up): its faults heal now,
        and one not yet due never acts, its record says so."""
        with self.lock:
            mine = {i for i, f in enumerate(self.faults) if f.step == step}
            self.plan = [p for p in self.plan if p[2] not in mine]
            heapq.heapify(self.plan)
            for i in sorted(mine):
                rec = self.records[i]
                if rec.t_inject is None and rec.error is None:
                    rec.error = "not injected: its step ended before it was due"
                else:
                    self._apply("heal", i)
            self.lock.notify_all()

    def run(self) -> None:
        with self.lock:
            while not self.halt.is_set():
                due = self.plan[0][0] - time.monotonic() if self.plan else None
                if due is None or due > 0:
                    self.lock.wait(due)
                    continue
                _, action, i = heapq.heappop(self.plan)
                self._apply(action, i)

    def _apply(self, action: str, i: int) -> None:
        f, rec = self.faults[i], self.records[i]
        try:
            if action == "inject":
                live = inject.inject(self.layout, self.pids, Fault(
                    f.kind, f.target, f.value, f.one_way, period=f.period, duty=f.duty))
                rec.t_inject = live.at
            elif rec.t_inject is not None and rec.t_heal is None:
                (healed,) = inject.heal(self.layout, self.pids, f"{f.kind}:{f.target}")
                rec.t_heal = time.monotonic()
                rec.dropped = healed.dropped
            else:
                return
        except MrcemuError as e:
            rec.error = str(e)
        self.notify("fault", {"action": action, "kind": f.kind, "target": f.target,
                              "t": time.monotonic() - self.t0, "error": rec.error})

    def stop(self) -> None:
        """Stop the timeline and heal whatever it left active."""
        with self.lock:
            self.halt.set()
            self.lock.notify_all()
            for i, rec in enumerate(self.records):
                if rec.t_inject is not None and rec.t_heal is None:
                    self._apply("heal", i)
        self.join(timeout=10)


class MapRecorder(threading.Thread):
    """Clustermapper over the run: the links it judges bad, sampled every `every` s."""

    def __init__(self, t0: float, layout: Layout, pids: dict[str, int], interval: float,
                 every: float = 0.1, slowdown: float = 1.0) -> None:
        super().__init__(daemon=True, name="map")
        self.t0, self.every = t0, every * slowdown
        # On a slowed run a probe queues k times longer: the map's clocks slow with it.
        self.mapper = Mapper(layout, pids, interval, window=WINDOW_S * slowdown,
                             timeout=TIMEOUT_S * slowdown, servers=split_servers())
        self.samples: list[tuple[float, list[str]]] = []
        self.halt = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        try:
            last = 0.0
            while not self.halt.is_set():
                now = self.mapper.step()
                if now - last >= self.every:
                    last = now
                    self.samples.append((round(now - self.t0, 4), self.mapper.bad(now)))
        except Exception as e:  # noqa: BLE001 - the map is a witness: it never ends a run
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.mapper.close()

    def stop(self) -> dict:
        self.halt.set()
        self.join(timeout=10)
        return {"interval_ms": round(self.mapper.interval * 1e3, 3),
                "window_s": self.mapper.window, "probes_sent": self.mapper.sent,
                "probes_answered": self.mapper.answered, "error": self.error,
                "samples": self.samples}


class StepPorts:
    """Each step's packets per switch port (by port name; the ports that carried any),
    from the switch programs' counters read at the barriers, outside any step's time."""

    def __init__(self, layout: Layout) -> None:
        self.name = {i.mac: i.name for ifs in layout.interfaces.values() for i in ifs}
        self.steps: list[dict] = []

    def read(self) -> dict[str, int] | None:
        from mrcemu.fabric import state

        st = state.load_state()
        try:
            got = (of_running(st) if st else Servers()).counters()["state"]
        except (MrcemuError, OSError) as e:
            print(f"runner: a step's port counters not read: {e}", file=sys.stderr)
            return None
        return {self.name[m]: int(c.get("packets", 0)) for m, c in got.items()
                if m in self.name}

    def add(self, step: int, before: dict[str, int] | None) -> None:
        after = self.read()
        if before is None or after is None:
            self.steps.append({"step": step, "packets": None})
            return
        self.steps.append({"step": step, "packets": {
            k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}})


def _with_slowdown(notify: Notify, k: float) -> Notify:
    return lambda event, d: notify(event, {**d, "slowdown": k})


def fabric_counters(pids: dict[str, int]) -> dict | None:
    """Every switch port's counters now (its program's: packets, marks, trims, buffer
    drops, by port MAC) and the kernel's drops at every interface (by port name): taken
    before and after a run, whose report holds the difference. None if they cannot be
    read (a server gone): the run's report is never lost to them, and has no fabric."""
    from mrcemu.fabric import state

    st = state.load_state()
    servers = of_running(st) if st else Servers()
    try:
        return {"switch": servers.counters()["state"], "kernel": servers.kernel_drops(pids)}
    except (MrcemuError, OSError) as e:
        print(f"runner: fabric counters not read: {e}", file=sys.stderr)
        return None


def run_transport(sc: Scenario, transport: str, layout: Layout, pids: dict[str, int],
                  notify: Notify, stop: threading.Event) -> dict:
    """One transport's run: the workload's iterations with the fault timeline.

    Returns the raw record; `stop` (set on Ctrl-C) ends it early and the record says
    how far it got."""
    hosts = range(sc.topology.hosts)
    # Every progress event says the run's slowdown, so what shows it live can give the
    # fabric's own time at full speed, as the report does (its `t` is the host's clock).
    notify = _with_slowdown(notify, sc.slowdown)
    raw: dict = {"transport": transport, "iterations": [], "completed": False,
                 "interrupted": False, "timed_out": False, "failed": False,
                 "failed_flows": [], "cpus": fidelity.cpus(), "slowdown": sc.slowdown}
    with NicClient(hosts, split_servers()) as client:
        client.ask_each(ops.TraceReset())
        before = client.ask_each(ops.Trace())
        raw["stats_before"] = {
            str(h): {conn_label(c): c["stats"] for c in r["conns"]}
            for h, r in zip(hosts, before, strict=True)}
        # The NICs' own drops (malformed, or for no QP of theirs) count from the NIC's
        # start, and a NIC outlives a transport's run: where they stood, to subtract.
        raw["nic_drops_before"] = {str(h): r.get("malformed", {})
                                   for h, r in zip(hosts, before, strict=True)}
        raw["fabric_before"] = fabric_counters(pids)
        t0 = time.monotonic()
        raw["t0"] = t0
        timeline = Timeline(sc.faults, t0, layout, pids, notify)
        mapper = (MapRecorder(t0, layout, pids, sc.map_interval_ms / 1e3,
                              slowdown=sc.slowdown)
                  if sc.map_interval_ms else None)
        if mapper is not None:
            mapper.start()
        timeline.apply_at_start()
        timeline.start()
        # Where a fault acts inside a step, each step's packets per switch port say
        # which links its flows crossed (a hashed flow's spine is the kernel's choice).
        counted = StepPorts(layout) if any(f.step is not None for f in sc.faults) else None
        # A sweep runs its iterations at each size in turn; its iterations are numbered
        # on across sizes, and each record says its size.
        runs = [(size, replace(sc.workload, size=size).phases(sc.topology.hosts))
                for size in sc.workload.sizes]
        todo = [(size, phases) for size, phases in runs
                for _ in range(sc.workload.iterations)]
        try:
            for it, (size, phases) in enumerate(todo):
                rec: dict = {"index": it, "flows": [], "complete": False, "size": size}
                raw["iterations"].append(rec)
                if sc.workload.kind == "stream":
                    rec["complete"] = _run_stream(client, sc, transport, rec, t0, stop)
                elif sc.workload.kind == "exec":
                    rec["complete"] = _run_programs(sc, transport, rec, t0, stop)
                else:
                    for ph, flows in enumerate(phases):
                        step = it * len(phases) + ph
                        before = counted.read() if counted else None
                        timeline.step_started(step, time.monotonic())
                        done = _run_phase(client, sc, transport, it, ph, flows, rec, t0,
                                          stop)
                        timeline.step_ended(step)
                        if counted:
                            counted.add(step, before)
                        if not done:
                            break
                    else:
                        rec["complete"] = True
                posted = [f["posted_at"] for f in rec["flows"] if f.get("posted_at")]
                ends = [f["done_at"] for f in rec["flows"] if f.get("done_at")]
                if rec["complete"] and posted and ends:
                    rec["start"], rec["end"] = min(posted), max(ends)
                notify("iteration", {"transport": transport, "index": it,
                                     "of": len(todo), "record": rec,
                                     "t": time.monotonic() - t0})
                if not rec["complete"]:
                    # Why it stopped: Ctrl-C, a connection that gave up (a RoCE QP past
                    # its retry count), or the scenario's time limit.
                    failed = [f"h{f['src']}->h{f['dst']}" for f in rec["flows"]
                              if f.get("failed") and not f.get("done_at")] + [
                        f"{p['host']}: {p['command']} (exit {p['exit']})"
                        for p in rec.get("programs", []) if p["exit"] and not p["ended_by"]]
                    raw["interrupted"] = stop.is_set()
                    raw["failed"] = bool(failed) and not stop.is_set()
                    raw["failed_flows"] = failed
                    raw["timed_out"] = not stop.is_set() and not failed
                    break
            else:
                raw["completed"] = True
        finally:
            raw["t_end"] = time.monotonic()
            timeline.stop()
            raw["faults"] = [r.__dict__ for r in timeline.records]
            if counted:
                raw["step_ports"] = counted.steps
            raw["fabric_after"] = fabric_counters(pids)
            if mapper is not None:
                raw["map"] = mapper.stop()
            traces = client.ask_each(ops.Trace())
            raw["traces"] = {str(h): r for h, r in zip(hosts, traces, strict=True)}
    return raw


def qps_of(sc: Scenario, transport: str) -> int:
    """The QPs a pair uses: the workload's `qps` for RoCE; MRC sprays one QP a pair."""
    return sc.workload.qps if transport == "roce" else 1


def split_over_qps(flows: list[tuple[int, int, int]], qps: int
                   ) -> list[tuple[int, int, int, int]]:
    """Each (src, dst, bytes) message as (src, dst, bytes, qp) writes: split over `qps`
    QPs in equal parts (the first ones a byte more where it does not divide), none
    empty, as a collective library splits a message over a pair's QPs."""
    out = []
    for s, d, n in flows:
        k = min(qps, n)
        out += [(s, d, n // k + (1 if q < n % k else 0), q) for q in range(k)]
    return out


def _run_phase(client: NicClient, sc: Scenario, transport: str, it: int, ph: int,
               flows: list[tuple[int, int, int]], rec: dict, t0: float,
               stop: threading.Event) -> bool:
    """Post one phase's writes at once and wait for all; then check every message's
    SHA-256 at the destination. False if it did not finish."""
    writes = [{"src": s, "dst": d, "size": n, "transport": transport, "phase": ph,
               "seed": (sc.seed * 1_000_003 + it * 10_007 + ph * 101 + k) & 0x7FFFFFFF,
               **({"qp": q} if q else {})}
              for k, (s, d, n, q) in enumerate(split_over_qps(flows, qps_of(sc, transport)))]
    client.post(writes)
    rec["flows"].extend(writes)
    client.wait(writes, lambda: stop.is_set() or time.monotonic() - t0 > sc.timeout_s,
                every=poll_interval(sc.topology.host_link_mbps))
    if not all(w.get("done_at") or w.get("failed") for w in writes):
        client.free(writes)  # given up: the regions must not hold the NICs' budgets
        return False
    client.verify(writes)
    return all(w["done_at"] for w in writes)


def _run_programs(sc: Scenario, transport: str, rec: dict, t0: float,
                  stop: threading.Event) -> bool:
    """An exec workload: its programs, started in turn, to their end. False if one failed
    or did not end in time."""
    ok, rec["programs"], rec["problem"] = program_run.run(
        sc.workload.programs, transport, t0 + sc.timeout_s, stop)
    if ok:
        rec["start"] = min(p["started_at"] for p in rec["programs"])
        rec["end"] = max(p["ended_at"] for p in rec["programs"])
    return ok


def _run_stream(client: NicClient, sc: Scenario, transport: str, rec: dict, t0: float,
                stop: threading.Event) -> bool:
    """A stream: each pair keeps `depth` writes in flight, posting the next as each one
    completes, until the workload's duration is up; then the last ones finish. Each
    write's SHA-256 is checked at its destination once it completes (its regions freed,
    so a long stream holds only `depth` a pair). False if it did not finish."""
    wl = sc.workload
    made = 0

    def new(a: int, b: int) -> dict:
        nonlocal made
        made += 1
        w = {"src": a, "dst": b, "size": wl.size, "transport": transport, "phase": 0,
             "seed": (sc.seed * 1_000_003 + made * 101) & 0x7FFFFFFF}
        if (q := made % qps_of(sc, transport)):  # a pair's writes take its QPs in turn
            w["qp"] = q
        if (a, b) in wl.pair_transport:
            w["settings"] = wl.pair_transport[(a, b)]
        return w

    def post(ws: list[dict]) -> list[dict]:
        client.post(ws)
        rec["flows"].extend(ws)
        return ws

    pending = post([new(a, b) for a, b in wl.pairs for _ in range(wl.depth)])
    every = poll_interval(sc.topology.host_link_mbps)
    while pending:
        if stop.is_set() or time.monotonic() - t0 > sc.timeout_s:
            client.free(pending)
            return False
        time.sleep(every)
        client.poll(pending)
        done = [w for w in pending if w["done_at"] or w["failed"]]
        if not done:
            continue
        pending = [w for w in pending if not (w["done_at"] or w["failed"])]
        client.verify(done)
        if any(w["failed"] for w in done):  # a QP gave up: the stream cannot go on
            client.free(pending)
            return False
        if time.monotonic() - t0 < wl.duration:
            pending += post([new(w["src"], w["dst"]) for w in done])
    return True
