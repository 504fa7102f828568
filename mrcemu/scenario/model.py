"""Scenario files: load and validate, before anything is started.

A scenario is pure data, checked against its topology: every host, link and
interface it names must exist there, so a typo fails in milliseconds with the
file, the field and the fix, not minutes into a run.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mrcemu import yamlfile
from mrcemu.errors import ConfigError, MrcemuError
from mrcemu.scenario import patterns
from mrcemu.scenario import programs as exec_programs
from mrcemu.scenario.programs import Program
from mrcemu.topology import Layout, Topology, faults, latency
from mrcemu.topology import load as load_topology
from mrcemu.topology.model import USID_ENGINES
from mrcemu.transport.config import PLANE_SHARES, TransportConfig
from mrcemu.transport.lb import POLICIES
from mrcemu.transport.profiles import MAX_QPS

SCENARIO_DIR = Path(__file__).resolve().parents[1] / "scenarios"
TRANSPORTS = ("mrc", "roce")
FAULT_KINDS = faults.KINDS  # the one list, from the fault model


@dataclass(frozen=True)
class TimedFault:
    at: float  # seconds after the transport's first post
    kind: str
    target: str
    value: float | None = None  # loss: percent lost; degrade: percent of the rate kept
    one_way: bool = False
    duration: float | None = None  # None: until the end of the transport's run
    period: float | None = None  # flap: seconds per down+up cycle
    duty: float | None = None  # flap: the fraction of each period the link is down
    # A fault inside one step of a synchronous job: `at` counts from that step's first
    # write, and without a duration it heals when the step ends (the runner's barrier).
    step: int | None = None


@dataclass(frozen=True)
class Workload:
    kind: str
    size: int  # bytes per message (ring-allreduce: the buffer each host reduces)
    iterations: int
    src: int | None = None  # single
    dst: int | None = None  # single, incast
    senders: tuple[int, ...] = ()  # incast
    # stream (`ib_write_bw`'s analogue): each (src, dst) pair keeps `depth` writes of
    # `size` in flight, posting the next as each completes, for `duration` seconds.
    pairs: tuple[tuple[int, int], ...] = ()
    duration: float = 0.0
    depth: int = 4
    # stream: transport settings of single pairs' connections (`pair_transport`), over
    # the scenario's `transport:`; paper experiment E8 pins one flow to one EV.
    pair_transport: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    # A message-size sweep (`size: [64KiB, 1MiB]`): `iterations` at each size in turn;
    # empty, `size` alone. paper experiment E9/E10 (the paper's Fig. 16/17).
    sweep: tuple[int, ...] = ()
    # RoCE QPs a pair (its QP scaling: each message split over them, as a collective
    # library splits one over its QPs); MRC sprays each pair's one QP whatever this says.
    qps: int = 1
    # exec: real programs on hosts, the server first (scenario/programs.py)
    programs: tuple[Program, ...] = ()
    # permutation: `steps` cross-leaf permutations, each drawn from `draw_seed` (the
    # scenario's seed) over the hosts' leaves (`leaf_of`, from the topology)
    steps: int = 1
    leaf_of: tuple[int, ...] = ()
    draw_seed: int = 1
    # permutation: each drawn permutation runs `repeat` times in a row, so that a step
    # with a fault has a twin without one, its flows hashed the same
    repeat: int = 1

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.sweep or (self.size,)

    def phases(self, hosts: int) -> list[list[tuple[int, int, int]]]:
        """One iteration as phases run one after another; each phase is a set of
        concurrent (src, dst, bytes) writes. A stream has no phases: it is one long
        iteration whose writes the runner posts as earlier ones complete."""
        if self.kind == "stream":
            return [[(a, b, self.size) for a, b in self.pairs]]
        if self.kind == "exec":  # the writes assumed, for the pace: the runner starts programs
            return [exec_programs.pairs(self.programs)]
        if self.kind == "single":
            assert self.src is not None and self.dst is not None
            return [[(self.src, self.dst, self.size)]]
        if self.kind == "all-to-all":
            return [[(a, b, self.size) for a in range(hosts) for b in range(hosts) if a != b]]
        if self.kind == "all-to-all-steps":
            return patterns.shifted_all_to_all(hosts, self.size)
        if self.kind == "permutation":
            return [p for p in patterns.permutation_steps(self.leaf_of, self.size,
                                                          self.steps, self.draw_seed)
                    for _ in range(self.repeat)]
        if self.kind == "incast":
            assert self.dst is not None
            return [[(s, self.dst, self.size) for s in self.senders]]
        # Ring all-reduce: reduce-scatter then all-gather, 2(N-1) steps of size/N each.
        chunk = max(1, self.size // hosts)
        return [[(h, (h + 1) % hosts, chunk) for h in range(hosts)]
                for _ in range(2 * (hosts - 1))]


@dataclass(frozen=True)
class Capture:
    interfaces: tuple[str, ...]
    snaplen: int = 256
    max_mb: float = 50.0  # per interface


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str
    description: str
    topology: Topology
    workload: Workload
    faults: tuple[TimedFault, ...]
    transports: tuple[str, ...]
    seed: int
    capture: Capture
    timeout_s: float
    settle_s: float = 1.0  # after healing, before the next transport starts
    map_interval_ms: float = 0.0  # Clustermapper's probe rounds during the run; 0: off
    slowdown: float = 1.0  # `mrcemu run --slowdown`: how many times slower than written
    # Transport settings the scenario changes (`transport:`), over the fabric's own
    # (TransportConfig.for_topology): EV set, path-health knobs, windows.
    transport: dict[str, Any] = field(default_factory=dict)

    def slowed(self, k: float) -> Scenario:
        """The same experiment k times slower: every link (and with them the transports'
        clocks, `TransportConfig.for_topology`), every fault time, the Clustermapper's
        rounds and the time limits. A host too small for the fabric's packet rate then
        runs it faithfully; the report states k, and gives every time at full speed
        (scenario/fullspeed.py)."""
        faults = tuple(replace(f, at=f.at * k,
                               duration=None if f.duration is None else f.duration * k,
                               period=None if f.period is None else f.period * k)
                       for f in self.faults)
        return replace(self, topology=self.topology.slowed(k), faults=faults,
                       workload=replace(self.workload, duration=self.workload.duration * k),
                       timeout_s=self.timeout_s * k, settle_s=self.settle_s * k,
                       map_interval_ms=self.map_interval_ms * k, slowdown=self.slowdown * k)


    def runs(self) -> list[tuple[str, str, str | None]]:
        """What runs one after the other, each as (name in the report, transport,
        load-balancing policy to set first or None): the transports in order, MRC once
        per policy where `transport: {load_balancing: [...]}` lists several (named
        `mrc-<policy>`)."""
        lbs = self.transport.get("load_balancing")
        out: list[tuple[str, str, str | None]] = []
        for t in self.transports:
            if t == "mrc" and isinstance(lbs, list) and len(lbs) > 1:
                out += [(f"mrc-{lb}", "mrc", lb) for lb in lbs]
            else:
                out.append((t, t, None))
        return out

    def without_latency(self) -> Scenario:
        """The same experiment on its fabric with no fixed latency (`--latency off`)."""
        return replace(self, topology=self.topology.without_latency())

    def as_run(self, slowdown: float = 1.0, latency: bool = True) -> Scenario:
        """The experiment as `run` and `paper` run it: without the fixed latency if asked
        (`--latency off`), then `slowdown` times slower (`--slowdown`)."""
        sc = self if latency else self.without_latency()
        return sc.slowed(slowdown) if slowdown != 1.0 else sc


# Every key a scenario file may hold, with what it does and its default: the one list the
# parser checks against and the scenario page is generated from (scripts/figures.py).
_TOP: dict[str, str] = {
    "description": "a sentence shown atop the report (default: none)",
    "topology": "a built-in topology name (`default`, `small`, `large`, `ecmp`, `rack4`) or a "
                "path; **required**",
    "workload": "what the hosts send (below); **required**",
    "faults": "the fault timeline, a list (below; default: none)",
    "transports": "which transports run, in order: `[mrc, roce]` (default), `[mrc]` or `[roce]`",
    "seed": "the seed of every random choice: EV orders, flow hashes, losses (default: 1)",
    "capture": "what `capture.pcapng` holds (below; default: the first sender's ports)",
    "timeout_s": "the longest one transport's run may take, in seconds (default: 300)",
    "settle_s": "seconds between one transport's run and the next, after healing "
                "(default: 1)",
    "map_interval_ms": "Clustermapper's probe rounds during the run, milliseconds; 0 for none "
                       "(default: 100 with faults, 0 without)",
    "transport": "transport settings the run changes (below; default: none)",
    "usid_engine": "what performs the switches' SRv6 End: `auto`, `kernel` (seg6local) or "
                   "`bpf` (mrcemu's tc program); default: the topology's, `auto` unless set",
}
# What `transport:` may set: the policy, not the clocks (those follow the links, and
# `--slowdown` scales them) nor what the fabric decides (PMTU, seed).
TRANSPORT_SETTINGS: dict[str, str] = {
    "ev_set_per_plane": "active EVs a plane a connection sprays over, its lowest spines; 0 is "
                        "every path, and a retired EV is replaced from a path the set did not use",
    "ev_planes": "the planes a connection sprays over, e.g. `[2]`; empty is every plane",
    "ev_backups_per_path": "EV variants a path holds in the backup set",
    "ev_min_active": "usable EVs a connection keeps whatever the feedback says",
    "ce_skip_rotations": "rotations an echoed ECN mark skips an EV",
    "trim_skip_rotations": "rotations a mid-path trim skips an EV",
    "probes_to_restore": "answered probes that bring a retired EV back",
    "stop_deviations": "an EV stops (takes no new data) when a packet is this many RTT "
                       "deviations late",
    "overdue_deviations": "the packet itself goes again elsewhere this many deviations late",
    "sack_every": "data packets between the receiver's SACKs",
    "init_cwnd": "the congestion window a connection starts with, bytes (at least the host's "
                 "bandwidth-delay product)",
    "max_cwnd": "the largest congestion window, bytes (at least twice that product)",
    "rcv_window": "PSNs the receiver accepts beyond its cumulative acknowledgement",
    "roce_window": "RoCE's go-back-N window, packets, before the port's bandwidth-delay "
                   "product is added",
    "roce_ack_every": "packets between a RoCE responder's ACKs",
    "roce_retry_count": "timeouts a RoCE QP retries before it fails",
    "load_balancing": "the policy that picks each packet's EV: `mrc`, `oblivious`, `reps`, "
                      "`reps_ack` or `bitmap`; a list runs MRC once per policy",
    "ev_per_path": "active EVs a path (its EV variants)",
    "plane_share": "a plane's share of the spraying once it lost a path: `capacity` "
                   "(default), a backup on another of its paths keeps the whole share "
                   "until that path queues; `paths`, one share a usable path; `full`, "
                   "the whole share always (two through one spine)",
}
_WORKLOAD: dict[str, str] = {
    "kind": "one of the workload kinds below; **required**",
    "size": "bytes per message (`512KiB`, `4MiB` or a number); a list, `[64KiB, 1MiB]`, is a "
            "size sweep with `iterations` at each size; **required**, but for `permutation` "
            "and `all-to-all-steps` (default: 8 bandwidth-delay products of a host's line "
            "rate over the base round trip across leaves)",
    "steps": "`permutation`: its steps, each a permutation of its own (default: 1)",
    "repeat": "`permutation`: each permutation runs this many times in a row, as steps of "
              "their own, so that a fault in one has a twin without it (default: 1)",
    "iterations": "times the workload repeats (default: 1; not for a stream)",
    "src": "`single`: the writing host (default: h0)",
    "dst": "`single`, `incast`: the written host (default: the last host)",
    "senders": "`incast`: the writing hosts (default: every other host)",
    "pairs": "`stream`: the SRC-DST directions, e.g. `[h0-h7, h1-h6]` (default: h0 to the "
             "last host)",
    "both_ways": "`stream`: add each pair's reverse direction (default: false)",
    "duration": "`stream`: seconds it runs; **required** for a stream",
    "depth": "`stream`: writes each direction keeps in flight (default: 4)",
    "pair_transport": "`stream`: transport settings of single directions, over `transport`, "
                      "e.g. `{h1-h5: {ev_planes: [2], ev_set_per_plane: 1}}`",
    "qps": "RoCE QPs a pair, each message split over them; MRC sprays its one QP (default: 1)",
    "programs": "`exec`: the programs, in the order they start, each {host, run, ready} "
                "(below); **required** for exec",
}
WORKLOAD_KINDS: dict[str, str] = {
    "single": "one message from `src` to `dst`, each iteration",
    "all-to-all": "every host writes `size` to every other at once (MoE style)",
    "all-to-all-steps": "an all-to-all as a collective library schedules it: hosts - 1 "
                        "steps, in step k every host writes `size` to the host k after it",
    "permutation": "`steps` steps, each a permutation drawn from the scenario's seed in "
                   "which every host writes `size` to one host on another leaf",
    "ring-allreduce": "reduce-scatter then all-gather round a ring of every host, `size` the "
                      "buffer each reduces",
    "incast": "every sender writes `size` to `dst` at once",
    "stream": "`ib_write_bw`'s analogue: each direction keeps `depth` writes of `size` in "
              "flight for `duration` seconds",
    "exec": "real RDMA programs on hosts (`programs`), e.g. perftest's `ib_write_bw`, over "
            "each transport; the report holds what each printed",
}
_FAULT: dict[str, str] = {
    "at": "seconds after the transport's first write; 0 is in place before it; **required**",
    "kind": "one of the fault kinds below; **required**",
    "target": "what it acts on, as its kind names it; **required** unless `targets`",
    "targets": "several targets: a group acting together or, with `every`, a sequence",
    "every": "seconds between one target of `targets` and the next (default: 0, together)",
    "value": "percent lost (`loss`, `path-loss`, `host-loss`) or of the rate kept (`degrade`)",
    "one_way": "`gray`, `loss`: only the direction from the link's first node (default: false)",
    "duration": "seconds until it heals (default: the end of the transport's run, or of "
                "its step)",
    "step": "a synchronous job's step (from 0, counted over iterations) the fault acts in: "
            "`at` counts from the step's first write, and it heals when the step ends "
            "unless `duration` says sooner; none for `stream` or `exec` (default: none)",
    "period": "`flap`: seconds per down and up cycle",
    "duty": "`flap`: the fraction of each period the link is down",
}
_CAPTURE: dict[str, str] = {
    "hosts": "hosts whose every port is captured (default: the first sender)",
    "interfaces": "single ports to capture, e.g. `[p3l0-s1]`",
    "snaplen": "bytes kept of each packet (default: 256)",
    "max_mb": "megabytes at most a port's capture holds (default: 50)",
}
SECTIONS: dict[str, dict[str, str]] = {
    "": _TOP, "workload.": _WORKLOAD, "workload.programs[].": exec_programs.FIELDS,
    "faults[].": _FAULT, "capture.": _CAPTURE,
    "transport.": TRANSPORT_SETTINGS}


def _number(source: str, name: str, value: Any, lo: float, hi: float | None, fix: str,
            whole: bool = False) -> float:
    ok_type = int if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, ok_type):
        raise ConfigError(source, name, value, "must be a " + ("whole number" if whole
                                                                else "number"), fix)
    if value < lo or (hi is not None and value > hi):
        raise ConfigError(source, name, value, f"must be in {lo}..{hi if hi is not None else ''}"
                          .rstrip("."), fix)
    return value


def _host(source: str, name: str, value: Any, topo: Topology) -> int:
    if isinstance(value, str) and value.startswith("h") and value[1:].isdigit():
        h = int(value[1:])
        if h < topo.hosts:
            return h
    raise ConfigError(source, name, value, f"is not a host of topology '{topo.name}'",
                      f"use h0..h{topo.hosts - 1}")


def _size(source: str, name: str, value: Any) -> int:
    from mrcemu.units import parse_size

    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    try:
        return parse_size(str(value))
    except MrcemuError:
        raise ConfigError(source, name, value, "is not a size",
                          "use bytes or a size such as 512KiB, 4MiB") from None


def _workload(source: str, data: Any, topo: Topology) -> Workload:
    data = yamlfile.fields(source, "workload", data, _WORKLOAD,
                           "give kind, size and iterations")
    kind = data.get("kind")
    if kind not in WORKLOAD_KINDS:
        raise ConfigError(source, "workload.kind", kind, "is not a workload",
                          "use one of " + ", ".join(WORKLOAD_KINDS))
    if kind == "exec":
        return _exec(source, data, topo)
    if "programs" in data:
        raise ConfigError(source, "workload.programs", data["programs"],
                          f"does not apply to {kind}", "remove it (it is for kind: exec)")
    if "size" not in data and kind in STEPPED:
        data = {**data, "size": default_step_size(topo)}
    if "size" not in data:
        raise ConfigError(source, "workload.size", None, "is required",
                          "add 'size: 512KiB' (bytes per message)")
    sweep: tuple[int, ...] = ()
    if isinstance(data["size"], list):
        if not data["size"] or kind == "stream":
            raise ConfigError(source, "workload.size", data["size"],
                              "a list of sizes is a sweep of an iterated workload" if
                              data["size"] else "is an empty sweep",
                              "give one size (a stream), or a non-empty list such as "
                              "[64KiB, 1MiB]")
        sweep = tuple(_size(source, f"workload.size[{i}]", v)
                      for i, v in enumerate(data["size"]))
        size = sweep[0]
    else:
        size = _size(source, "workload.size", data["size"])
    qps = int(_number(source, "workload.qps", data.get("qps", 1), 1, MAX_QPS,
                      f"use 1..{MAX_QPS} RoCE QPs a pair", whole=True))
    iterations = int(_number(source, "workload.iterations", data.get("iterations", 1), 1, 10000,
                             "use a whole number of iterations, e.g. 4", whole=True))
    src = dst = None
    senders: tuple[int, ...] = ()
    if kind == "stream":
        return replace(_stream(source, data, topo, size), qps=qps)
    for k in ("pairs", "both_ways", "duration", "depth", "pair_transport"):
        if k in data:
            raise ConfigError(source, f"workload.{k}", data[k], f"does not apply to {kind}",
                              "remove it (it is for kind: stream)")
    if kind == "single":
        src = _host(source, "workload.src", data.get("src", "h0"), topo)
        dst = _host(source, "workload.dst", data.get("dst", f"h{topo.hosts - 1}"), topo)
        if src == dst:
            raise ConfigError(source, "workload.dst", data.get("dst"), "equals workload.src",
                              "write to another host")
    elif kind == "incast":
        dst = _host(source, "workload.dst", data.get("dst", f"h{topo.hosts - 1}"), topo)
        raw = data.get("senders", [f"h{h}" for h in range(topo.hosts) if h != dst])
        if not isinstance(raw, list) or not raw:
            raise ConfigError(source, "workload.senders", raw, "must be a list of hosts",
                              "e.g. senders: [h0, h1, h2]")
        senders = tuple(_host(source, f"workload.senders[{i}]", v, topo)
                        for i, v in enumerate(raw))
        if dst in senders:
            raise ConfigError(source, "workload.senders", raw, f"includes the target h{dst}",
                              "remove it from senders")
    elif topo.hosts < 2:
        raise ConfigError(source, "workload.kind", kind, "needs at least two hosts",
                          "use a topology with more hosts")
    for k in ("src", "dst", "senders"):
        if k in data and ((k == "senders" and kind != "incast")
                          or (k == "src" and kind != "single")
                          or (k == "dst" and kind not in ("single", "incast"))):
            raise ConfigError(source, f"workload.{k}", data[k], f"does not apply to {kind}",
                              "remove it")
    for k in ("steps", "repeat"):
        if k in data and kind != "permutation":
            raise ConfigError(source, f"workload.{k}", data[k], f"does not apply to {kind}",
                              "remove it (it is for kind: permutation)")
    steps = int(_number(source, "workload.steps", data.get("steps", 1), 1, 10000,
                        "use a whole number of steps, e.g. 20", whole=True))
    repeat = int(_number(source, "workload.repeat", data.get("repeat", 1), 1, 100,
                         "how many times each permutation runs, e.g. 2", whole=True))
    leaf_of = tuple(topo.leaf_of(h) for h in range(topo.hosts))
    if kind == "permutation" and topo.hosts_per_leaf * 2 > topo.hosts:
        raise ConfigError(source, "workload.kind", kind,
                          f"needs leaves of at most half the hosts; topology '{topo.name}' "
                          f"has {topo.hosts_per_leaf} of {topo.hosts} on a leaf",
                          "use a topology with two leaves or more")
    return Workload(kind, size, iterations, src, dst, senders, sweep=sweep, qps=qps,
                    steps=steps, leaf_of=leaf_of, repeat=repeat)


# The workloads of steps whose size defaults to a bandwidth-bound one.
STEPPED = ("permutation", "all-to-all-steps")
BDPS_A_STEP = 8  # a step's write, in bandwidth-delay products, by default


def flow_bdp_bytes(topo: Topology) -> float:
    """A host's line rate over the base round trip across leaves (within the one leaf of
    a fabric that has one): the bytes one flow needs in flight to fill its host."""
    return latency.longest_rtt_s(topo) * topo.planes * topo.host_link_mbps * 1e6 / 8


def default_step_size(topo: Topology) -> int:
    """BDPS_A_STEP bandwidth-delay products, in whole KiB (64 KiB at least: a fabric with
    no fixed latency has no product)."""
    return max(64, math.ceil(BDPS_A_STEP * flow_bdp_bytes(topo) / 1024)) * 1024


def _exec(source: str, data: dict, topo: Topology) -> Workload:
    for k in data:
        if k not in ("kind", "programs"):
            raise ConfigError(source, f"workload.{k}", data[k], "does not apply to exec",
                              "remove it: each program's command line says what it sends")
    if "programs" not in data:
        raise ConfigError(source, "workload.programs", None, "is required for exec",
                          "e.g. programs: [{host: h7, run: ib_write_bw}, "
                          "{host: h0, run: ib_write_bw h7}]")
    return Workload("exec", 0, 1, programs=exec_programs.parse(source, data["programs"], topo,
                                                               _host))


def _stream(source: str, data: dict, topo: Topology, size: int) -> Workload:
    for k in ("src", "dst", "senders", "iterations"):
        if k in data:
            raise ConfigError(source, f"workload.{k}", data[k], "does not apply to stream",
                              "remove it: a stream runs for its duration between its pairs")
    raw = data.get("pairs", [f"h0-h{topo.hosts - 1}"])
    if not isinstance(raw, list) or not raw:
        raise ConfigError(source, "workload.pairs", raw, "must be a list of SRC-DST",
                          "e.g. pairs: [h0-h7, h1-h6]")
    pairs: list[tuple[int, int]] = []
    for i, v in enumerate(raw):
        where = f"workload.pairs[{i}]"
        a, _, b = str(v).partition("-")
        if not b:
            raise ConfigError(source, where, v, "is not SRC-DST", "e.g. h0-h7")
        pair = (_host(source, where, a, topo), _host(source, where, b, topo))
        if pair[0] == pair[1]:
            raise ConfigError(source, where, v, "writes to itself", "name two hosts")
        pairs.append(pair)
    both = data.get("both_ways", False)
    if not isinstance(both, bool):
        raise ConfigError(source, "workload.both_ways", both, "must be true or false",
                          "both_ways: true streams each pair in both directions")
    if both:
        pairs += [(b, a) for a, b in pairs]
    if len(set(pairs)) != len(pairs):
        raise ConfigError(source, "workload.pairs", raw, "names a direction twice",
                          "list each SRC-DST once (both_ways adds the reverse)")
    if "duration" not in data:
        raise ConfigError(source, "workload.duration", None, "is required for a stream",
                          "e.g. duration: 3 (seconds)")
    duration = float(_number(source, "workload.duration", data["duration"], 0.1, 3600,
                             "seconds, e.g. 3"))
    depth = int(_number(source, "workload.depth", data.get("depth", 4), 1, 64,
                        "writes in flight per pair, e.g. 4", whole=True))
    raw_pt = data.get("pair_transport", {})
    if not isinstance(raw_pt, dict):
        raise ConfigError(source, "workload.pair_transport", raw_pt, "must be a mapping",
                          "e.g. pair_transport: {h1-h5: {ev_planes: [2], ev_set_per_plane: 1}}")
    pair_transport: dict[tuple[int, int], dict[str, Any]] = {}
    for k, v in raw_pt.items():
        where = f"workload.pair_transport.{k}"
        a, _, b = str(k).partition("-")
        pair = (_host(source, where, a, topo), _host(source, where, b, topo)) if b else None
        if pair not in pairs:
            raise ConfigError(source, where, v, "is not a direction the stream runs",
                              "name one of workload.pairs (SRC-DST)")
        pair_transport[pair] = _transport(source, v, topo, where)
    return Workload("stream", size, 1, pairs=tuple(pairs), duration=duration, depth=depth,
                    pair_transport=pair_transport)


_PARAM_FIX = {"value": "e.g. value: 1 (loss: percent lost; degrade: percent of the rate kept)",
              "period": "e.g. period: 0.5 (with duty: 0.5)",
              "duty": "e.g. duty: 0.5 (with period: 0.5)"}


def _fault(source: str, i: int, data: Any, layout: Layout,
           steps: int | None) -> list[TimedFault]:
    """One entry of `faults`, as the faults it makes (one per target); `steps`: the
    workload's steps a fault may name, None where it has none."""
    where = f"faults[{i}]"
    data = yamlfile.fields(source, where, data, _FAULT,
                           "e.g. {at: 1.0, kind: switch-down, target: p3s1}")
    if "target" in data and "targets" in data:
        raise ConfigError(source, f"{where}.targets", data["targets"], "is given with target",
                          "use target for one, targets for a sequence or a group")
    for k in ("at", "kind"):
        if k not in data:
            raise ConfigError(source, f"{where}.{k}", None, "is required",
                              "each fault needs at, kind and target")
    if "target" not in data and "targets" not in data:
        raise ConfigError(source, f"{where}.target", None, "is required",
                          "each fault needs at, kind and target (or targets)")
    at = _number(source, f"{where}.at", data["at"], 0, None, "seconds after the start, e.g. 1.0")
    if "targets" not in data:
        if "every" in data:
            raise ConfigError(source, f"{where}.every", data["every"], "needs targets",
                              "e.g. targets: [h0-p0, h0-p1], every: 2")
        return [_one_fault(source, where, "target", data, float(at), data["target"], layout,
                           steps)]
    # A sequence (`every` seconds apart, each lasting `duration`) or, with no `every`, a
    # group acting together: one fault per target, each checked as one.
    targets = data["targets"]
    if not isinstance(targets, list) or not targets:
        raise ConfigError(source, f"{where}.targets", targets, "must be a list of targets",
                          "e.g. targets: [h0-p0, h0-p1, h0-p2, h0-p3]")
    if len({str(t) for t in targets}) != len(targets):
        raise ConfigError(source, f"{where}.targets", targets, "names a target twice",
                          "list each target once")
    every = float(_number(source, f"{where}.every", data.get("every", 0), 0, None,
                          "seconds between one target and the next, e.g. 2"))
    return [_one_fault(source, where, f"targets[{j}]", data, float(at) + j * every, t, layout,
                       steps)
            for j, t in enumerate(targets)]


def _step(source: str, where: str, data: dict, steps: int | None) -> int | None:
    if data.get("step") is None:
        return None
    if steps is None:
        raise ConfigError(source, f"{where}.step", data["step"],
                          "needs a workload of steps (not a stream or programs)",
                          "remove step, and give at in seconds from the start")
    return int(_number(source, f"{where}.step", data["step"], 0, steps - 1,
                       f"a step of the workload's {steps}, from 0, e.g. 1", whole=True))


def _one_fault(source: str, where: str, tfield: str, data: dict, at: float, target: Any,
               layout: Layout, steps: int | None) -> TimedFault:
    if data["kind"] not in FAULT_KINDS:
        close = difflib.get_close_matches(str(data["kind"]), FAULT_KINDS, n=1)
        raise ConfigError(source, f"{where}.kind", data["kind"], "is not a fault kind",
                          (f"did you mean '{close[0]}'? " if close else "")
                          + "kinds: " + ", ".join(FAULT_KINDS))
    kind = data["kind"]
    f = TimedFault(
        at=at, kind=kind, target=str(target),
        value=None if data.get("value") is None else float(_number(
            source, f"{where}.value", data["value"], 0, 100, "a percentage, 0..100")),
        one_way=bool(data.get("one_way", False)),
        duration=None if data.get("duration") is None else float(_number(
            source, f"{where}.duration", data["duration"], 0.001, None, "seconds, e.g. 2.0")),
        period=None if data.get("period") is None else float(_number(
            source, f"{where}.period", data["period"], 0.05, None, "seconds per cycle, e.g. 0.5")),
        duty=None if data.get("duty") is None else float(_number(
            source, f"{where}.duty", data["duty"], 0.01, 0.99, "the down fraction, e.g. 0.5")),
        step=_step(source, where, data, steps))
    live = faults.Fault(kind, f.target, f.value, f.one_way, period=f.period, duty=f.duty)
    try:  # the same check live injection makes: a file that passes cannot fail mid-run
        faults.check(live)
    except faults.FaultParamError as e:
        raise ConfigError(source, f"{where}.{e.field}", e.value, e.problem,
                          _PARAM_FIX[e.field]) from None
    try:
        faults.targets(layout, live)
    except MrcemuError as e:
        raise ConfigError(source, f"{where}.{tfield}", f.target, "is not in the topology",
                          str(e)) from None
    return f


def _capture(source: str, data: Any, layout: Layout, wl: Workload) -> Capture:
    if data is None:
        data = {}
    data = yamlfile.fields(source, "capture", data, _CAPTURE,
                           "e.g. capture: {hosts: [h0], snaplen: 256, max_mb: 50}")
    names = {i.name for ifs in layout.interfaces.values() for i in ifs}
    ifaces: list[str] = []
    for i, n in enumerate(data.get("interfaces", []) or []):
        if n not in names:
            close = difflib.get_close_matches(str(n), sorted(names), n=1)
            raise ConfigError(source, f"capture.interfaces[{i}]", n, "is not an interface",
                              f"did you mean '{close[0]}'?" if close else
                              "use names such as h0-p3 or p3l0-s1 ('mrcemu status')")
        ifaces.append(n)
    hosts = data.get("hosts")
    if hosts is None and not ifaces:
        # By default the host that sends first: its ports see its data, probes and NACKs.
        hosts = [f"h{wl.src if wl.src is not None else (wl.senders or (0,))[0]}"]
    for i, h in enumerate(hosts or []):
        idx = _host(source, f"capture.hosts[{i}]", h, layout.topo)
        ifaces += [x.name for x in layout.interfaces[f"h{idx}"] if x.name not in ifaces]
    snaplen = int(_number(source, "capture.snaplen", data.get("snaplen", 256), 64, 65535,
                          "bytes kept per packet, e.g. 256", whole=True))
    max_mb = float(_number(source, "capture.max_mb", data.get("max_mb", 50), 0.1, 10000,
                           "megabytes per interface, e.g. 50"))
    return Capture(tuple(ifaces), snaplen, max_mb)


def from_mapping(data: Any, source: str, name: str) -> Scenario:
    if not isinstance(data, dict):
        raise ConfigError(source, "<document>", type(data).__name__,
                          "the file must be a YAML mapping of field: value",
                          f"start from {SCENARIO_DIR / 'failover.yaml'}")
    yamlfile.refuse_unknown(source, "", data, _TOP)
    for key in ("topology", "workload"):
        if key not in data:
            raise ConfigError(source, key, None, "is required",
                              "add it (see mrcemu/scenarios/failover.yaml)")
    if not isinstance(data["topology"], str):
        raise ConfigError(source, "topology", data["topology"], "must be a name or a path",
                          "e.g. topology: default")
    try:
        topo = load_topology(data["topology"])
    except ConfigError as e:
        raise ConfigError(source, "topology", data["topology"],
                          f"cannot be loaded ({e.problem})", e.fix) from None
    if "usid_engine" in data:
        if data["usid_engine"] not in USID_ENGINES:
            raise ConfigError(source, "usid_engine", data["usid_engine"],
                              f"must be one of {', '.join(USID_ENGINES)}",
                              "remove it (the topology's engine, auto unless set), or set "
                              "kernel or bpf")
        topo = replace(topo, usid_engine=data["usid_engine"])
    layout = Layout(topo)
    wl = _workload(source, data["workload"], topo)
    raw_faults = data.get("faults") or []
    if not isinstance(raw_faults, list):
        raise ConfigError(source, "faults", raw_faults, "must be a list",
                          "e.g. faults: [{at: 1.0, kind: switch-down, target: p3s1}]")
    steps = (None if wl.kind in ("stream", "exec")
             else len(wl.phases(topo.hosts)) * wl.iterations * len(wl.sizes))
    faults = tuple(f for i, d in enumerate(raw_faults)
                   for f in _fault(source, i, d, layout, steps))
    transports = data.get("transports", list(TRANSPORTS))
    if (not isinstance(transports, list) or not transports
            or any(t not in TRANSPORTS for t in transports) or len(set(transports)) != len(
                transports)):
        raise ConfigError(source, "transports", transports, "must list transports once each",
                          "use [mrc, roce], [mrc] or [roce]")
    seed = int(_number(source, "seed", data.get("seed", 1), 0, 2**31, "e.g. seed: 1", whole=True))
    timeout = float(_number(source, "timeout_s", data.get("timeout_s", 300), 1, 86400,
                            "seconds for one transport's run, e.g. 120"))
    settle = float(_number(source, "settle_s", data.get("settle_s", 1.0), 0, 60,
                           "seconds between transports, e.g. 1.0"))
    # With faults, Clustermapper watches by default (every 100 ms: a round costs each host
    # one probe per plane and spine, so the map stays a small share of the CPU).
    map_ms = float(_number(source, "map_interval_ms",
                           data.get("map_interval_ms", 100 if faults else 0), 0, 10000,
                           "milliseconds between Clustermapper probe rounds, 0 for none"))
    if 0 < map_ms < 10:
        raise ConfigError(source, "map_interval_ms", map_ms, "must be 0 (off) or at least 10",
                          "e.g. map_interval_ms: 100")
    transport = _transport(source, data.get("transport"), topo)
    if not isinstance(data.get("description", ""), str):
        raise ConfigError(source, "description", data["description"], "must be text",
                          "write description: followed by a sentence")
    return Scenario(name=name, source=source, description=str(data.get("description", "")),
                    topology=topo, workload=replace(wl, draw_seed=seed), faults=faults,
                    transports=tuple(transports),
                    seed=seed, capture=_capture(source, data.get("capture"), layout, wl),
                    timeout_s=timeout, settle_s=settle, map_interval_ms=map_ms,
                    transport=transport)


def _transport(source: str, data: Any, topo: Topology,
               where: str = "transport") -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(source, where, data, "must be a mapping",
                          f"e.g. {where}: {{ev_set_per_plane: 2}}")
    for k, v in data.items():
        if k not in TRANSPORT_SETTINGS:
            close = difflib.get_close_matches(str(k), list(TRANSPORT_SETTINGS), n=1)
            raise ConfigError(source, f"{where}.{k}", v, "is not a setting a scenario may "
                              "change", (f"did you mean '{close[0]}'? " if close else "")
                              + "settable: " + ", ".join(TRANSPORT_SETTINGS))
        if k == "load_balancing":
            names = v if isinstance(v, list) and where == "transport" else [v]
            if (not names or len(set(map(str, names))) != len(names)
                    or any(not isinstance(n, str) or n not in POLICIES for n in names)):
                raise ConfigError(source, f"{where}.{k}", v, "must name a load-balancing "
                                  "policy" + (", or list several to run one after the other"
                                              if where == "transport" else ""),
                                  "one of " + ", ".join(POLICIES) + (", e.g. "
                                  f"{k}: [mrc, reps]" if where == "transport" else ""))
            continue
        if k == "plane_share":
            if v not in PLANE_SHARES:
                raise ConfigError(source, f"{where}.{k}", v, "must be one of "
                                  + ", ".join(PLANE_SHARES), f"e.g. {k}: capacity")
            continue
        if k == "ev_planes":
            if (not isinstance(v, list) or len(set(map(str, v))) != len(v)
                    or not all(isinstance(x, int) and not isinstance(x, bool)
                               and 0 <= x < topo.planes for x in v)):
                raise ConfigError(source, f"{where}.{k}", v, "must be a list of distinct "
                                  f"planes of {topo.name} (0-{topo.planes - 1})",
                                  f"e.g. {k}: [2]")
        elif k in ("stop_deviations", "overdue_deviations"):
            # the range, and the one under the other, are the config's checks below
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ConfigError(source, f"{where}.{k}", v, "must be a number",
                                  f"e.g. {k}: {getattr(TransportConfig(), k):g}")
        elif isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(source, f"{where}.{k}", v, "must be a whole number >= 0",
                              f"e.g. {k}: 2")
    try:  # the config's own checks, on the defaults with these changes
        TransportConfig.from_json({**TransportConfig().to_json(), **single_policy(data)})
    except MrcemuError as e:
        raise ConfigError(source, where, data, str(e), "see docs/transport.md "
                          "for each setting") from None
    return dict(data)


def single_policy(settings: dict[str, Any]) -> dict[str, Any]:
    """Transport settings as one config holds them: of a list of load-balancing
    policies, the first (the NIC daemons start with it; Scenario.runs says the rest)."""
    lb = settings.get("load_balancing")
    return {**settings, "load_balancing": lb[0]} if isinstance(lb, list) else settings


def builtin() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def load(path: str | Path) -> Scenario:
    """Load a scenario file; a bare name such as 'failover' is a built-in one."""
    data, source, stem = yamlfile.read(path, SCENARIO_DIR, "scenario")
    return from_mapping(data, source, stem)
