"""Whether a run can be trusted: the emulated links, not this host, set its pace.

Each NIC daemon measures itself (`mrcemu.nic.meter`); this judges the measurements
against thresholds (docs/fidelity.md, after Mininet-HiFi). A run that fails them
still completes and reports its numbers, marked unfaithful with the reasons. The
thresholds are in docs/fidelity.md, with the measurements they were chosen from.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace

from mrcemu.transport.config import clock_scale


@dataclass(frozen=True)
class Thresholds:
    # The time limits are for 20 Mb/s host links; `for_links` scales them with the
    # transport's clocks on other rates.
    # Timers late by more than 2.5 ms at p99 (a packet's wire time is 1.7 ms): the host,
    # not the path, sets when losses are found and SACKs go. (One flow on an idle fabric:
    # max 1.2 ms.)
    timer_p99_s: float = 0.0025
    # A single stall this long is half the minimum RTO: a false timeout is likely.
    timer_max_s: float = 0.050
    # Paced sends later than the pacer's bucket (two 9,014-byte frames: 7.4 ms at 97 % of
    # 20 Mb/s) at p99 cost the port rate it cannot make up: the NIC, not the link, set
    # the pace. (One flow on an idle fabric: p50 0.6 ms, p99 4.1 ms, max 5.4 ms.)
    send_p99_s: float = 0.007
    # A port with frames waiting must carry at least this share of its paced rate...
    min_achieved: float = 0.90
    # ...judged only on ports that waited long enough for the ratio to mean something.
    min_backlogged_s: float = 0.2
    # The daemons together may use at most this share of the machine's CPUs.
    max_cpu_share: float = 0.90


THRESHOLDS = Thresholds()


def for_links(host_link_mbps: float) -> Thresholds:
    """The thresholds on a fabric with these host links. Its transport clocks are scaled
    to the links (`TransportConfig.for_topology`): on links k times slower the reorder
    window, the RTO and the pacer's bucket time are k times longer, and so is the
    lateness they tolerate. The shares (rate achieved, CPU) do not scale."""
    k = clock_scale(host_link_mbps)
    return replace(THRESHOLDS, timer_p99_s=THRESHOLDS.timer_p99_s * k,
                   timer_max_s=THRESHOLDS.timer_max_s * k,
                   send_p99_s=THRESHOLDS.send_p99_s * k)


def cpus() -> int:
    """The CPUs this process (and the NICs it started) may run on."""
    return len(os.sched_getaffinity(0))


def judge(hosts: dict[str, dict], cpus: int, th: Thresholds = THRESHOLDS) -> dict:
    """The verdict on one transport's run from each daemon's `fidelity` record (keyed by
    host name): `ok`, the `reasons` it is not, and the figures the reasons come from."""
    reasons: list[str] = []
    drops = {f"{h}.p{p}": port["socket_drops"] for h, m in hosts.items()
             for p, port in m["ports"].items() if port["socket_drops"]}
    if drops:
        worst = max(drops, key=drops.get)
        reasons.append(f"the kernel dropped {sum(drops.values())} frames the NICs did not "
                       f"read in time (most at {worst}: {drops[worst]})")
    # The delay line's releases are timers too: one released late lengthens that
    # packet's fixed latency, so they are held to the timers' limit.
    for key, p99_max, what in (("timer_late", th.timer_p99_s, "timers"),
                               ("send_late", th.send_p99_s, "paced sends"),
                               ("release_late", th.timer_p99_s, "delay-line releases")):
        late = {h: m[key] for h, m in hosts.items() if m[key]["n"]}
        bad = {h: v for h, v in late.items() if v["p99_s"] > p99_max}
        if bad:
            h = max(bad, key=lambda x: bad[x]["p99_s"])
            reasons.append(f"{what} ran late on {len(bad)} NICs: p99 {_ms(bad[h]['p99_s'])} "
                           f"at {h} (limit {_ms(p99_max)})")
    for key, what in (("timer_late", "a timer"), ("release_late", "a delay-line release")):
        stalls = {h: m[key]["max_s"] for h, m in hosts.items()
                  if m[key]["max_s"] > th.timer_max_s}
        if stalls:
            h = max(stalls, key=stalls.get)
            reasons.append(f"{what} ran {_ms(stalls[h])} late at {h} "
                           f"(limit {_ms(th.timer_max_s)})")
    held = {h: m["delay_dropped"] for h, m in hosts.items() if m["delay_dropped"]}
    if held:
        h = max(held, key=held.get)
        reasons.append(f"the delay line dropped {sum(held.values())} frames it had no room "
                       f"for (most at {h}: {held[h]}): its bound, not the network, lost them")
    slow = {f"{h}.p{p}": port["achieved"] for h, m in hosts.items()
            for p, port in m["ports"].items()
            if port["backlogged_s"] >= th.min_backlogged_s and port["achieved"] is not None
            and port["achieved"] < th.min_achieved}
    if slow:
        worst = min(slow, key=slow.get)
        reasons.append(f"{len(slow)} ports with frames waiting ran below "
                       f"{th.min_achieved:.0%} of their paced rate (lowest {worst}: "
                       f"{slow[worst]:.0%})")
    wall = max((m["wall_s"] for m in hosts.values()), default=0.0)
    cpu = sum(m["cpu_s"] for m in hosts.values())
    share = cpu / wall / cpus if wall and cpus else None
    if share is not None and share > th.max_cpu_share:
        reasons.append(f"the NICs used {share:.0%} of {cpus} CPUs (limit "
                       f"{th.max_cpu_share:.0%})")
    return {"ok": not reasons, "reasons": reasons, "socket_drops": sum(drops.values()),
            "timer_late_p99_s": max((m["timer_late"]["p99_s"] for m in hosts.values()),
                                    default=0.0),
            "timer_late_max_s": max((m["timer_late"]["max_s"] for m in hosts.values()),
                                    default=0.0),
            "send_late_p99_s": max((m["send_late"]["p99_s"] for m in hosts.values()),
                                   default=0.0),
            "release_late_p99_s": max((m["release_late"]["p99_s"] for m in hosts.values()),
                                      default=0.0),
            "release_late_max_s": max((m["release_late"]["max_s"] for m in hosts.values()),
                                      default=0.0),
            "delay_dropped": sum(m["delay_dropped"] for m in hosts.values()),
            "achieved_min": min((p["achieved"] for m in hosts.values()
                                 for p in m["ports"].values()
                                 if p["achieved"] is not None
                                 and p["backlogged_s"] >= th.min_backlogged_s), default=None),
            "nic_cpu_s": round(cpu, 3),
            # of which the harness's (buffers filled and hashed, regions allocated): what
            # per-packet costs leave out
            "harness_cpu_s": round(sum(m.get("harness_cpu_s", 0.0) for m in hosts.values()), 3),
            "nic_cpu_share": round(share, 4) if share else None,
            "cpus": cpus, "thresholds": asdict(th), "hosts": hosts}


def combine(per_transport: dict[str, dict]) -> dict:
    """The run's verdict: faithful only if every transport's part was."""
    reasons = [f"{t}: {r}" for t, v in per_transport.items() for r in v["reasons"]]
    return {"ok": bool(per_transport) and not reasons, "reasons": reasons,
            "transports": {t: v["ok"] for t, v in per_transport.items()}}


def line(verdict: dict | None) -> str:
    """report.md's one line."""
    if not verdict:
        return "Fidelity: not measured."
    if verdict["ok"]:
        return ("Fidelity: **faithful**: no socket drops, timers, paced sends and delay-line "
                "releases on time, "
                "ports at their paced rate (thresholds in docs/fidelity.md).")
    return "Fidelity: **NOT faithful**: " + "; ".join(verdict["reasons"]) + "."


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms"
