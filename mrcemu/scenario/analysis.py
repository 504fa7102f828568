"""Turn one transport's raw run record into the numbers a report shows. Pure: no
sockets, no clock; everything is computed from what the daemons recorded."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from mrcemu import fidelity
from mrcemu.nic import ops
from mrcemu.scenario import programs
from mrcemu.scenario.fabric_counts import fabric
from mrcemu.scenario.model import flow_bdp_bytes
from mrcemu.scenario.patterns import step_ideal_s
from mrcemu.topology import Layout, Topology, faults
from mrcemu.topology.paths import path_label

BIN = 0.05  # goodput series resolution, seconds
PRE_FAULT = 0.3  # the goodput level before a fault is its mean over this long (the
# built-in failover kills a spine 0.4 s in: the window must fit after the first ramp-up)
SMOOTH = 2  # bins averaged when judging recovery (0.1 s)
# A fault's cost in round trips sums the goodput short of the level before until a bin is
# back at this share of it: the level is a mean, so half of the bins of an undisturbed
# stream lie below it.
BACK = 0.95
# A fault shows in goodput only once the transport has waited for the packets it lost:
# a dip that has not begun this many round trips after the fault is not the fault's.
HORIZON_RTTS = 10


def percentile(xs: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no data."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, min(len(s) - 1, -(-len(s) * q // 100) - 1))
    return s[int(k)]


def goodput_series(raw: dict, planes: int) -> dict:
    """Received goodput per plane in BIN-wide bins from t0 to the run's end, Mb/s."""
    t0, t_end = raw["t0"], raw["t_end"]
    nbins = max(1, int((t_end - t0) / BIN) + 1)
    per_plane = [[0.0] * nbins for _ in range(planes)]
    for tr in raw["traces"].values():
        width = tr["rx_bin_s"]
        for plane, bins in tr["rx_bins"].items():
            for k, nbytes in bins.items():
                i = int(((int(k) + 0.5) * width - t0) / BIN)  # the 10 ms bin's middle
                if 0 <= i < nbins:
                    per_plane[int(plane)][i] += nbytes * 8 / BIN / 1e6
    total = [sum(col) for col in zip(*per_plane, strict=True)]
    return {"bin_s": BIN, "t": [round(i * BIN, 3) for i in range(nbins)],
            "per_plane_mbps": per_plane, "total_mbps": total}


def recovery_windows(slowdown: float = 1.0) -> tuple[float, int]:
    """(seconds the pre-fault level is averaged over, goodput bins averaged when judging
    recovery). On a run slowed k times (`--slowdown`) both are k times longer: the same
    number of packets, not of seconds."""
    return PRE_FAULT * slowdown, max(1, round(SMOOTH * slowdown))


def goodput_dip(series: dict, at: float, until: float, bin_s: float,
                before_s: float) -> tuple[float | None, float | None]:
    """How far goodput fell after a fault at `at`: (its level, the lowest ratio to it).

    The series is regrouped into bins of `bin_s` counted from the fault's bin. The level
    is the mean of the whole bins in the `before_s` before that bin; the ratio is that of
    the lowest whole bin after the one holding the fault and ending by `until`. None when
    either side has no whole bin."""
    t, g, w = series["t"], series["total_mbps"], series["bin_s"]
    per = max(1, round(bin_s / w))
    first = int(at / w + 1e-9) // per * per  # the fault's bin, in series bins
    bins: dict[int, list[float]] = {}
    for tt, x in zip(t, g, strict=True):
        k = (round(tt / w) - first) // per
        bins.setdefault(k, []).append(x)
    whole = {k: sum(v) / per for k, v in bins.items() if len(v) == per}
    nbefore = max(1, round(before_s / bin_s))
    pre = [whole[k] for k in range(-nbefore, 0) if k in whole]
    after = [x for k, x in whole.items()
             if k >= 1 and (first + (k + 1) * per) * w <= until + 1e-9]
    if not pre or not sum(pre) or not after:
        return None, None
    level = sum(pre) / len(pre)
    return level, min(after) / level


def fault_cost_rtts(series: dict, at: float, until: float, level: float | None,
                    rtt: float | None) -> float | None:
    """What a fault at `at` cost, in round trips at the level before (docs/paper.md):
    the goodput short of `level` in each bin from the fault's on, summed until a bin is
    back at BACK of the level after one below it (or, with none below it within
    HORIZON_RTTS round trips, then; or `until`), over `level` times `rtt` (the
    connections' smoothed RTT, the same clock as the series). None without a level, an
    RTT or a whole bin."""
    if not level or not rtt:
        return None
    t, g, w = series["t"], series["total_mbps"], series["bin_s"]
    short, any_bin, dipped = 0.0, False, False
    for tt, x in zip(t, g, strict=True):
        if tt + w <= at + 1e-9:
            continue
        if tt + w > until + 1e-9:
            break
        any_bin = True
        low = x < BACK * level
        if not low and (dipped or tt >= at + HORIZON_RTTS * rtt):
            break  # back after the dip, or no dip where a fault's would show
        dipped |= low
        # the fault's own bin counts from the fault on
        short += max(0.0, level - x) * (w - max(0.0, at - tt))
    return round(short / (level * rtt), 2) if any_bin else None


def recovery(series: dict, at: float, until: float,
              slowdown: float = 1.0) -> tuple[float | None, float | None]:
    """(pre-fault goodput, seconds from the fault until goodput is back at 90 % of it).

    0.0 when it never fell below 90 %; None when it had not recovered by `until`. The
    averaging windows are `recovery_windows(slowdown)`: a series at full speed
    (fullspeed.py) has its pre-fault level from `slowdown` 1."""
    t, g, w = series["t"], series["total_mbps"], series["bin_s"]
    before, n = recovery_windows(slowdown)
    pre = [x for tt, x in zip(t, g, strict=True) if at - before <= tt < at]
    if not pre or not sum(pre):
        return None, None
    level = sum(pre) / len(pre)
    smooth = [sum(g[max(0, i - n + 1):i + 1]) / min(n, i + 1) for i in range(len(g))]
    dipped = False
    for tt, x in zip(t, smooth, strict=True):
        if tt < at:
            continue
        if tt + w > until + 1e-9:  # only whole bins before the heal or the end
            break
        if x < 0.9 * level:
            dipped = True
        elif dipped:
            return level, round(tt + w - at, 3)
    return level, (0.0 if not dipped else None)


def conn_label(c: dict) -> str:
    """A daemon trace's connection as the runner's counters before the run key it:
    `peer:transport`, and `:qp` for a pair's QPs after the first."""
    return f"{c['peer']}:{c['transport']}" + (f":{c['qp']}" if c.get("qp") else "")


def _conns(raw: dict) -> list[tuple[int, dict]]:
    return [(int(h), c) for h, tr in raw["traces"].items() for c in tr["conns"]
            if c["transport"] == raw["transport"]]


PathKey = tuple[int, int, int]  # source host, destination host, EV


def fault_metrics(raw: dict, layout: Layout, series: dict, window_packets: int) -> list[dict]:
    out = []
    conns = _conns(raw)

    def broken_by(rec: dict) -> set[str]:
        return faults.links_of(layout, _fault(rec))

    for rec in raw["faults"]:
        entry: dict = {"kind": rec["kind"], "target": rec["target"], "scheduled_s": rec["at_s"],
                       "at_s": None, "healed_s": None, "last_packet_on_failed_path_s": None,
                       "recovered_90pct_s": None, "error": rec.get("error")}
        out.append(entry)
        if rec["t_inject"] is None:
            continue
        # A figure that cannot be computed leaves what was, and says why: the run's
        # report is never lost to one of its figures (its raw record is beside it).
        try:
            _fault_entry(entry, rec, raw, layout, conns, series, window_packets)
            others = {k for r in raw["faults"] if r is not rec for k in broken_by(r)}
            t0, span = raw["t0"], _span(rec, raw)
            entry.update(map_after(raw.get("map"), span[0] - t0, span[1] - t0,
                                   broken_by(rec), others))
        except Exception as e:  # noqa: BLE001 - any defect here must not cost the report
            entry["not_computed"] = f"{type(e).__name__}: {e}"
    return out


def _fault(rec: dict) -> faults.Fault:
    return faults.Fault(rec["kind"], rec["target"], one_way=rec["spec"].get("one_way", False))


def _span(rec: dict, raw: dict) -> tuple[float, float]:
    """A fault's time in the NICs' clock: from its injection to its heal or the run's end."""
    return rec["t_inject"], rec["t_heal"] if rec["t_heal"] is not None else raw["t_end"]


def _fault_entry(entry: dict, rec: dict, raw: dict, layout: Layout,
                 conns: list[tuple[int, dict]], series: dict, window_packets: int) -> None:
    """One fault's figures, written into `entry` as each group is computed."""
    t0 = raw["t0"]
    t_f, end = _span(rec, raw)
    entry["at_s"] = round(t_f - t0, 4)
    entry["healed_s"] = None if rec["t_heal"] is None else round(rec["t_heal"] - t0, 4)
    hit = faults.affects(layout, _fault(rec))
    use = PathUse.of(conns, hit, t_f, end)
    entry.update(use.figures(), window_packets=window_packets)
    entry.update(_goodput_figures(series, conns, t_f - t0, end - t0, raw.get("slowdown", 1.0)))
    v = Verdicts()
    for src, c in conns:
        v.add(src, c, use, hit, t_f, end)
    entry.update(v.figures(use))


@dataclass
class PathUse:
    """The paths a fault hit that the connections sent on after it: when each was first
    used, the send times on it (from the fault), the last send on any, and the new
    (not resent) packets sent onto them."""
    used: dict[PathKey, float] = field(default_factory=dict)
    sends: dict[PathKey, list[float]] = field(default_factory=lambda: defaultdict(list))
    last: float | None = None
    t_f: float = 0.0
    evs_hit: int = 0
    new_total: int = 0
    new_max: int = 0

    @classmethod
    def of(cls, conns: list[tuple[int, dict]], hit: Callable[[int, int, int], bool],
           t_f: float, end: float) -> PathUse:
        u = cls(t_f=t_f)
        for src, c in conns:
            evs = {ev for ev in set(c["tx"]["ev"]) if hit(src, c["peer"], ev)}
            u.evs_hit += len(evs)
            n_new = 0
            for t, ev, rtx in zip(c["tx"]["t"], c["tx"]["ev"], c["tx"]["rtx"], strict=True):
                if ev in evs and t_f <= t < end:
                    u.last = t if u.last is None else max(u.last, t)
                    u.used.setdefault((src, c["peer"], ev), t)
                    u.sends[(src, c["peer"], ev)].append(round(t - t_f, 4))
                    n_new += not rtx
            u.new_total += n_new
            u.new_max = max(u.new_max, n_new)
        return u

    def figures(self) -> dict:
        return {"last_packet_on_failed_path_s": round(self.last - self.t_f, 4) if self.last
                else 0.0,
                "failed_path_evs": self.evs_hit,
                "new_packets_on_failed_path": self.new_total,
                "new_packets_on_failed_path_max_per_connection": self.new_max}


def _goodput_figures(series: dict, conns: list[tuple[int, dict]], at: float, until: float,
                     slowdown: float) -> dict:
    """The level before a fault, how long goodput took to come back, and the fault's
    cost in round trips (`at`, `until`: seconds from t0)."""
    level, rec_s = recovery(series, at, until, slowdown)
    rtt = _r(percentile([c["srtt"] for _, c in conns if c.get("srtt")], 50))
    return {"goodput_before_mbps": None if level is None else round(level, 2),
            "recovered_90pct_s": rec_s, "rtt_s": rtt,
            "cost_rtts": fault_cost_rtts(series, at, until, level, rtt)}


def _first_changes(c: dict, t_f: float) -> tuple[dict[int, float], dict[int, float],
                                                  dict[int, tuple[float, float]]]:
    """A connection's first verdicts on each EV after the fault at `t_f`: (retired
    (ASSUMED_BAD or DENIED) at, the lost packet's send time that retired it, and the
    stop still in effect when it was retired: (stopped at, lost packet's send time)).

    MRC stops using a path before it retires it (docs/transport.md, loss recovery). The
    stop that counts is the one still in effect when the path was retired (or at the
    end), with the send time of the late packet that caused it: a stop cleared since
    (its packet arrived after all: a queue, not the fault) was no verdict on the
    failure. A retirement with no stop before it is its own stop."""
    first_bad: dict[int, float] = {}
    first_loss: dict[int, float] = {}
    first_stop: dict[int, tuple[float, float]] = {}
    for ch in ops.ev_changes(c):
        k = ch.ev & 0xFFFFFFFF
        if ch.t < t_f or k in first_bad:
            continue
        if ch.new == "STOPPED" and ch.lost_sent is not None:
            first_stop.setdefault(k, (ch.t, ch.lost_sent))
        elif ch.new in ("ASSUMED_BAD", "DENIED"):
            first_bad[k] = ch.t
            if ch.lost_sent is not None:
                first_loss[k] = ch.lost_sent
                first_stop.setdefault(k, (ch.t, ch.lost_sent))
        elif ch.new in ("GOOD", "SKIP"):
            first_stop.pop(k, None)  # back in use: that stop was cleared
    return first_bad, first_loss, first_stop


def _count_on(c: dict, ev: int, after: float, before: float) -> int:
    """Data packets (new or resent) the connection sent on `ev` strictly between."""
    return sum(1 for t, e in zip(c["tx"]["t"], c["tx"]["ev"], strict=True)
               if e == ev and after < t < before)


@dataclass
class Verdicts:
    """How fast the transport stopped trusting each failed path it used after the
    fault: from the fault, from the path's first use after it, and from the loss that
    retired it (the lost packet's send time), in seconds and in smoothed RTTs."""
    detect: list[float] = field(default_factory=list)
    since_use: list[float] = field(default_factory=list)
    since_loss: list[float] = field(default_factory=list)
    since_loss_rtts: list[float] = field(default_factory=list)
    within_2rto: int = 0
    within_2rtt: int = 0
    undetected: int = 0
    rtos: list[float] = field(default_factory=list)
    bad_at: dict[PathKey, float] = field(default_factory=dict)
    loss_at: dict[PathKey, float] = field(default_factory=dict)
    rtts_of: dict[PathKey, float] = field(default_factory=dict)
    stop_rtts_of: dict[PathKey, float] = field(default_factory=dict)
    stop_at: dict[PathKey, float] = field(default_factory=dict)
    while_stopped: dict[PathKey, int] = field(default_factory=dict)  # stopped to retired
    after_retire: dict[PathKey, int] = field(default_factory=dict)

    def add(self, src: int, c: dict, use: PathUse, hit: Callable[[int, int, int], bool],
            t_f: float, end: float) -> None:
        """One connection's verdicts on the failed paths it used."""
        self.rtos.append(c["rto"])
        srtt = c.get("srtt")
        first_bad, first_loss, first_stop = _first_changes(c, t_f)
        for ch in ops.path_changes(c):
            if ch.t >= t_f and hit(src, c["peer"], ch.old_ev):
                first_bad.setdefault(ch.old_ev & 0xFFFFFFFF, ch.t)
        for key, t_use in use.used.items():
            s, peer, ev = key
            if s != src or peer != c["peer"]:
                continue
            if ev in first_stop and first_stop[ev][0] < end:
                t_stop, lost = first_stop[ev]
                self.stop_at[key] = t_stop - t_f
                if srtt:
                    self.stop_rtts_of[key] = (t_stop - lost) / srtt
                if ev in first_bad:
                    self.while_stopped[key] = _count_on(c, ev, t_stop, first_bad[ev])
            if ev in first_bad and first_bad[ev] < end:
                self._retired(key, c, first_bad[ev], first_loss.get(ev), t_use, t_f, end)
            else:
                self.undetected += 1

    def _retired(self, key: PathKey, c: dict, t_bad: float, lost: float | None,
                 t_use: float, t_f: float, end: float) -> None:
        self.detect.append(t_bad - t_f)
        self.bad_at[key] = t_bad - t_f
        self.since_use.append(t_bad - t_use)
        self.within_2rto += t_bad - t_use <= 2 * c["rto"]
        self.after_retire[key] = _count_on(c, key[2], t_bad, end)  # data onto it once retired
        if lost is None:
            return
        self.loss_at[key] = lost - t_f
        self.since_loss.append(t_bad - lost)
        if c.get("srtt"):
            self.rtts_of[key] = (t_bad - lost) / c["srtt"]
            self.since_loss_rtts.append(self.rtts_of[key])
            self.within_2rtt += self.rtts_of[key] <= 2

    def rows(self, use: PathUse) -> list[dict]:
        return [{"src": f"h{s}", "dst": f"h{d}", "ev": f"0x{ev:08x}",
                 "sends_after_fault_s": use.sends[(s, d, ev)][:20],
                 "first_loss_s": _r(self.loss_at.get((s, d, ev))),
                 "bad_s": _r(self.bad_at.get((s, d, ev))),
                 "retire_rtts": _r(self.rtts_of.get((s, d, ev)), 2),
                 "stop_s": _r(self.stop_at.get((s, d, ev))),
                 "stop_rtts": _r(self.stop_rtts_of.get((s, d, ev)), 2),
                 "data_while_stopped": self.while_stopped.get((s, d, ev)),
                 "data_after_retire": self.after_retire.get((s, d, ev))}
                for (s, d, ev) in sorted(use.used)][:200]

    def figures(self, use: PathUse) -> dict:
        stops = list(self.stop_rtts_of.values())
        return {
            "failed_paths": self.rows(use),
            "paths_used_after_fault": len(use.used),
            "paths_detected": len(self.detect),
            "paths_not_detected": self.undetected,
            "detect_s_p50": _r(percentile(self.detect, 50)),
            "detect_s_max": _r(max(self.detect, default=None)),
            "detect_after_first_use_s_p50": _r(percentile(self.since_use, 50)),
            "detect_after_first_use_s_max": _r(max(self.since_use, default=None)),
            "paths_detected_within_2_rto_of_first_use": self.within_2rto,
            "retire_after_loss_s_p50": _r(percentile(self.since_loss, 50)),
            "retire_after_loss_s_max": _r(max(self.since_loss, default=None)),
            "retire_after_loss_rtts_max": _r(max(self.since_loss_rtts, default=None), 2),
            "paths_retired_within_2_rtts_of_loss": self.within_2rtt,
            "stop_after_loss_rtts_max": _r(max(stops, default=None), 2),
            "paths_stopped_within_2_rtts_of_loss": sum(x <= 2 for x in stops),
            "data_packets_after_retire": sum(self.after_retire.values()),
            "rto_s_max": _r(max(self.rtos, default=None)),
        }


def map_after(m: dict | None, at: float, until: float, broken: set[str],
              others: frozenset[str] | set[str] = frozenset()) -> dict:
    """What Clustermapper said about a fault at `at` (seconds from t0) that breaks the
    links `broken`, until `until`: which of them it named bad and when the last of them
    was named (None unless all were), and which links no fault of the run (`others`:
    the other faults' links) broke it newly named meanwhile: false alarms."""
    if not m or not m.get("samples"):
        return {}
    before: set[str] = set()
    first: dict[str, float] = {}
    for t, bad in m["samples"]:
        if t <= at:
            before = set(bad)
        elif t <= until:
            for link in bad:
                first.setdefault(link, t)
    named = {k: t for k, t in first.items() if k in broken}
    return {"map_bad": sorted(named),
            # a fault that breaks no link (a path's loss) has nothing for it to name
            "map_bad_after_s": (_r(max(named.values()) - at) if named and set(named) == broken
                                else None),
            "map_missed": sorted(broken - set(named)),
            "map_also": sorted(k for k in first
                               if k not in broken and k not in others and k not in before)}


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def ev_state_timeline(raw: dict) -> dict:
    """Every EV state change of this transport's connections, relative to t0."""
    out = []
    for src, c in _conns(raw):
        for e in ops.ev_changes(c):
            if e.t >= raw["t0"]:
                out.append([round(e.t - raw["t0"], 4), f"h{src}", f"h{c['peer']}",
                            f"0x{e.ev & 0xFFFFFFFF:08x}", e.old, e.new, e.why])
        for p in ops.path_changes(c):
            if p.t >= raw["t0"]:
                out.append([round(p.t - raw["t0"], 4), f"h{src}", f"h{c['peer']}",
                            f"0x{p.old_ev & 0xFFFFFFFF:08x}", "PATH", "REHASHED",
                            f"to 0x{p.new_ev & 0xFFFFFFFF:08x}"])
    out.sort()
    return {"changes": out, "evs_total": sum(len(c["stats"]["per_ev"]) for _, c in _conns(raw))}


def per_flow(flows: list[dict]) -> dict[str, dict]:
    """Per direction (`h0-h7`): messages, bytes delivered intact, and goodput over the
    time it had a message in flight (the union of its messages' post-to-done intervals:
    a stream's overlapping writes count once, an incast's barriers not at all)."""
    by: dict[str, list[dict]] = {}
    for f in flows:
        by.setdefault(f"h{f['src']}-h{f['dst']}", []).append(f)
    out = {}
    for key, fs in sorted(by.items()):
        spans = sorted((f["posted_at"], f["done_at"]) for f in fs
                       if f.get("posted_at") and f.get("done_at"))
        active, end = 0.0, float("-inf")
        for a, b in spans:
            if b > end:
                active += b - max(a, end)
                end = b
        good = sum(f["size"] for f in fs if f.get("ok"))
        out[key] = {"messages": len(fs), "bytes": good, "active_s": _r(active),
                    "goodput_mbps": _r(good * 8 / active / 1e6, 2) if active else None}
    return out


# A flow's data packets per path are reported for flows that sprayed over at most this
# many paths: a restricted EV set (paper experiment E7, E8). An unrestricted flow uses 32 or more
# on the built-in fabrics, and its per-path bins would bloat every report.
FLOW_PATHS_MAX = 8


def flow_paths(raw: dict) -> dict:
    """Per direction (`h0-h4`) that used few paths: its data packets (retransmissions
    included) per path (`p2s0`; `p2` for the same-leaf path) in BIN-wide bins from t0."""
    t0, t_end = raw["t0"], raw["t_end"]
    nbins = max(1, int((t_end - t0) / BIN) + 1)
    out: dict[str, dict[str, list[int]]] = {}
    for src, c in _conns(raw):
        per: dict[str, list[int]] = {}
        for t, ev in zip(c["tx"]["t"], c["tx"]["ev"], strict=True):
            i = int((t - t0) / BIN)
            if not 0 <= i < nbins:
                continue
            name = path_label(ev)
            if name not in per:
                if len(per) == FLOW_PATHS_MAX:
                    break
                per[name] = [0] * nbins
            per[name][i] += 1
        else:
            if per:
                out[f"h{src}-h{c['peer']}"] = dict(sorted(per.items()))
    return {"bin_s": BIN, "flows": dict(sorted(out.items()))}


def phases(it: dict) -> dict[int, list[dict]]:
    """An iteration's writes by phase (a synchronous job's step), in phase order."""
    out: dict[int, list[dict]] = defaultdict(list)
    for f in it["flows"]:
        out[f.get("phase", 0)].append(f)
    return dict(sorted(out.items()))


def span(fs: list[dict]) -> float:
    """A phase's time: from its first write posted to its last completed."""
    return max(f["done_at"] for f in fs) - min(f["posted_at"] for f in fs)


def transport_time(it: dict) -> float:
    """An iteration's time in the NICs' own clock: each phase from its first write posted
    to its last completed, summed. The gaps between phases are the harness's (it learns
    of completions by polling, more often on faster links), not the transport's, and
    would otherwise favour whichever fabric has the faster ports."""
    return sum(span(fs) for fs in phases(it).values())


def per_size(raw: dict) -> dict[str, dict]:
    """Per message size (a sweep's, or the one size), over the iterations that completed:
    their median time in the NICs' clock (`transport_time`) and bus bandwidth, the bytes
    each host sent in an iteration over that time (NCCL's busbw: a ring all-reduce's
    2(n-1)/n of the size, an all-to-all's n-1 messages); the p99, and the median wall
    time (with the harness's gaps). A stream has no iterations to time (empty)."""
    out: dict[str, dict] = {}
    for size in dict.fromkeys(it.get("size") for it in raw["iterations"]):
        its = [it for it in raw["iterations"] if it.get("size") == size and "end" in it]
        if size is None or not its:
            continue
        times = [transport_time(it) for it in its]
        senders = {f["src"] for f in its[0]["flows"]}
        per_host = sum(f["size"] for f in its[0]["flows"]) / max(1, len(senders))
        p50 = percentile(times, 50)
        out[str(size)] = {"iterations": len(its), "transport_s_p50": _r(p50),
                          "transport_s_p99": _r(percentile(times, 99)),
                          "wall_s_p50": _r(percentile([it["end"] - it["start"]
                                                       for it in its], 50)),
                          "host_bytes": int(per_host),
                          "busbw_mbps": _r(per_host * 8 / p50 / 1e6, 2) if p50 else None}
    return out


def steps(raw: dict, topo: Topology) -> dict | None:
    """A synchronous job's steps (each iteration's phases: a step ends when its last write
    completes, and the next starts then), over the steps that completed: each one's time
    in the NICs' clock, the least it could take (its busiest host's bytes at the host's
    line rate), their ratio (the step's efficiency), and each flow's share of its host's
    line rate over its own time; the writes' size in bandwidth-delay products. None for
    a workload without phases (a stream, programs)."""
    port = topo.planes * topo.host_link_mbps * 1e6 / 8
    each = []
    for it in raw["iterations"]:
        for ph, fs in phases(it).items():
            if not all(f.get("done_at") for f in fs):
                continue
            pair: dict[tuple[int, int], list[float]] = {}
            for f in fs:  # a pair's writes over several QPs are one flow
                p = pair.setdefault((f["src"], f["dst"]), [f["posted_at"], f["done_at"], 0])
                p[0], p[1] = min(p[0], f["posted_at"]), max(p[1], f["done_at"])
                p[2] += f["size"]
            t = span(fs)
            ideal = step_ideal_s([(a, b, n) for (a, b), (_p, _d, n) in pair.items()], port)
            each.append({"iteration": it["index"], "step": ph, "time_s": _r(t),
                         "ideal_s": _r(ideal), "efficiency": _r(ideal / t) if t else None,
                         "flow_share": [_r(n / (d - p0) / port, 3) if d > p0 else None
                                        for p0, d, n in pair.values()]})
    if not each:
        return None
    effs = [e["efficiency"] for e in each if e["efficiency"] is not None]
    sizes = {f["size"] for it in raw["iterations"] for f in it["flows"]}
    bdp = flow_bdp_bytes(topo)
    return {"count": len(each), "efficiency_p50": _r(percentile(effs, 50)),
            "efficiency_min": _r(min(effs, default=None)),
            "efficiency_mean": _r(sum(effs) / len(effs)) if effs else None,
            "write_bdps": _r(max(sizes) / bdp, 2) if bdp and sizes else None,
            "each": each}


def step_faults(raw: dict, layout: Layout) -> list[dict]:
    """Each fault set inside a step: its times from that step's first write (injected,
    healed), why it did not act if it did not, and the packets the switches sent over its
    links in its step and in the step before (each step's counters, read at the barriers:
    whether a flow of the step crossed them)."""
    ports = {s["step"]: s["packets"] for s in raw.get("step_ports", [])}
    out = []
    for rec in raw["faults"]:
        step, t_step = rec["spec"].get("step"), rec.get("t_step")
        if step is None:
            continue
        names = {n for k in faults.links_of(layout, _fault(rec))
                 for n in (layout.links_by_name[k].a.name, layout.links_by_name[k].b.name)}

        def over(s: int, names: set[str] = names) -> int | None:
            p = ports.get(s)
            return None if p is None else sum(p.get(n, 0) for n in names)

        def since(t: float | None, t_step: float | None = t_step) -> float | None:
            return None if t is None or t_step is None else round(t - t_step, 6)

        out.append({"step": step, "kind": rec["kind"], "target": rec["target"],
                    "scheduled_s": rec["at_s"], "at_s": since(rec["t_inject"]),
                    "healed_s": since(rec["t_heal"]), "error": rec.get("error"),
                    "link_packets": over(step), "link_packets_step_before": over(step - 1)})
    return out


def nic_drops(raw: dict) -> dict[str, int]:
    """What the NICs dropped over the run before any connection saw it (a packet that
    does not decode, or for a QP or address not theirs: nic/daemon.py), per reason,
    summed over the hosts; only the reasons that occurred."""
    before = raw.get("nic_drops_before", {})
    out: dict[str, int] = defaultdict(int)
    for h, tr in raw.get("traces", {}).items():
        for reason, n in tr.get("malformed", {}).items():
            out[reason] += n - before.get(h, {}).get(reason, 0)
    return {k: v for k, v in sorted(out.items()) if v}


def summarize(raw: dict, layout: Layout, window_packets: int) -> dict:
    flows = [f for it in raw["iterations"] for f in it["flows"]]
    progs = [p for it in raw["iterations"] for p in it.get("programs", [])]
    posted = [f["posted_at"] for f in flows if f.get("posted_at")] + [
        p["started_at"] for p in progs]
    done = [f["done_at"] for f in flows if f.get("done_at")] + [p["ended_at"] for p in progs]
    complete = raw["completed"] and bool(flows or progs)
    jct = (max(done) - min(posted)) if complete and posted and done else None
    delivered = sum(f["size"] for f in flows if f.get("ok"))
    iters = [it["end"] - it["start"] for it in raw["iterations"] if "end" in it]
    before = raw.get("stats_before", {})
    totals: dict[str, int] = defaultdict(int)
    counters: dict[str, int] = defaultdict(int)  # every connection counter, summed
    for src, c in _conns(raw):
        b = before.get(str(src), {}).get(conn_label(c), {})
        for k, v in c["stats"].items():
            if isinstance(v, int):
                counters[k] += v - b.get(k, 0)
        for k, v in c["stats"].get("lb", {}).items():  # a policy's own (REPS: recycled)
            counters[f"lb_{k}"] += v - b.get("lb", {}).get(k, 0)
        for k, name in (("retransmits", "retransmits"), ("trims_nacked", "trims"),
                        ("nacks_rx", "nacks"), ("rtos", "rtos"), ("probes_tx", "probes")):
            totals[name] += c["stats"][k] - b.get(k, 0)
    series = goodput_series(raw, layout.topo.planes)
    span = (max(done) - min(posted)) if flows and posted and done else None
    return {
        "completed": complete,
        "interrupted": raw["interrupted"],
        "timed_out": raw["timed_out"],
        "failed": raw.get("failed", False),  # a connection gave up (RoCE: QP in error)
        "failed_flows": raw.get("failed_flows", []),
        "job_completion_s": _r(jct),
        "iterations_done": len(iters),
        "iteration_s": [round(x, 4) for x in iters],
        "iteration_s_p50": _r(percentile(iters, 50)),
        "iteration_s_p99": _r(percentile(iters, 99)),
        "goodput_mbps": _r(delivered * 8 / span / 1e6, 2) if span else None,
        "bytes_delivered": delivered,
        "messages": len(flows),
        "messages_ok": sum(1 for f in flows if f.get("ok")),
        # a program checks its own data, or does not: mrcemu has no hash of it
        "integrity_ok": None if progs else complete and all(f.get("ok") for f in flows),
        **({"programs": programs.results(progs, raw["t0"])} if progs else {}),
        "per_flow": per_flow(flows),
        "per_size": per_size(raw),
        "steps": steps(raw, layout.topo),
        "flow_paths": flow_paths(raw),
        **{k: totals[k] for k in ("retransmits", "trims", "nacks", "rtos", "probes")},
        "counters": dict(sorted(counters.items())),
        "nic_drops": nic_drops(raw),
        "fabric": fabric(raw, layout),
        "faults": fault_metrics(raw, layout, series, window_packets),
        "step_faults": step_faults(raw, layout),
        "goodput_series": series,
        "ev_states": ev_state_timeline(raw),
        "fidelity": fidelity.judge({f"h{h}": tr["fidelity"] for h, tr in raw["traces"].items()
                                    if "fidelity" in tr}, raw.get("cpus") or 1,
                                   fidelity.for_links(layout.topo.host_link_mbps)),
    }
