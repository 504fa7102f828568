"""Workloads of independent RDMA WRITEs with a per-write report: `mrcemu send` (one
write), the Python API's `send`, and the multi-write helpers of tests and benchmarks.

Everything goes through `NicClient`; this adds the report: completion time, goodput,
integrity, and the connection's counters and per-path packets during the write.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from mrcemu import fidelity
from mrcemu.errors import MrcemuError
from mrcemu.nic import ops
from mrcemu.nic.client import NicClient, poll_interval
from mrcemu.nic.control import Relay
from mrcemu.topology import Topology, latency
from mrcemu.topology.paths import ev_fields, path_label

COUNTERS = ("retransmits", "trims_nacked", "nacks_rx", "rtos")

Spec = tuple[int, int, int, str, int]  # src, dst, size, transport, seed


def _stats(client: NicClient, writes: list[dict]) -> list[dict]:
    """Each write's connection's stats reply (empty before its first use)."""
    return client.ask([(w["src"], ops.Stats(peer=w["dst"], transport=w["transport"],
                                            missing_ok=True, qp=w.get("qp", 0)))
                       for w in writes])


def run_writes(client: NicClient, topo: Topology, specs: list[Spec], timeout: float,
               progress: Callable[[int, int], None] | None = None,
               settings: dict | None = None) -> tuple[list[dict], float]:
    """Post every write at once and wait for all (or `timeout` seconds); verify each.
    `settings`: transport settings of these writes' connections (`load_balancing`,
    say); a connection made with others is made again first.

    Returns one report per write, in the order of `specs`, and the seconds from the
    first post to the last completion as the polling saw it."""
    writes = [{"src": s, "dst": d, "size": n, "transport": tr, "seed": seed,
               **({"settings": settings} if settings else {})}
              for s, d, n, tr, seed in specs]
    before = _stats(client, writes)  # connections outlive writes: where counters stood
    if client.match_settings(writes, before):  # some made again: their counters restart
        before = _stats(client, writes)
    nics = sorted({h for w in writes for h in (w["src"], w["dst"])})
    client.ask([(h, ops.Fidelity(reset=True)) for h in nics])
    t0 = time.monotonic()
    client.post(writes)

    def show(ws: list[dict]) -> None:
        if progress:
            progress(sum(w["acked_pkts"] or 0 for w in ws), sum(w["npkts"] or 0 for w in ws))

    client.wait(writes, lambda: time.monotonic() - t0 > timeout, show,
                every=poll_interval(topo.host_link_mbps))
    elapsed = time.monotonic() - t0
    after = _stats(client, writes)
    measured = client.ask([(h, ops.Fidelity()) for h in nics])
    verdict = fidelity.judge({f"h{h}": r["fidelity"] for h, r in zip(nics, measured,
                                                                      strict=True)},
                             fidelity.cpus(), fidelity.for_links(topo.host_link_mbps))
    client.verify(writes)
    return [{**_report(topo, w, b, a), "fidelity": verdict}
            for w, b, a in zip(writes, before, after, strict=True)], elapsed


def send(client: NicClient, topo: Topology, src: int, dst: int, size: int,
         transport: str = "mrc", seed: int = 1,
         progress: Callable[[int, int], None] | None = None,
         timeout: float | None = None, settings: dict | None = None) -> dict:
    """One write: a one-flow workload. Generous default limit: 20x the time at one
    plane's line rate, plus start-up."""
    limit = timeout or 30 + 20 * size * 8 / (topo.host_link_mbps * 1e6)
    return run_writes(client, topo, [(src, dst, size, transport, seed)], limit, progress,
                      settings)[0][0]


def run_many(topo: Topology, specs: list[Spec], timeout: float = 300.0,
             relay: Relay | None = None) -> tuple[list[dict], float]:
    """Every write at once, on a client of its own (`relay`: to daemons on other
    servers); an error if any did not complete."""
    with NicClient(range(topo.hosts), relay) as client:
        results, elapsed = run_writes(client, topo, specs, timeout)
    late = [r for r in results if not r["completed"]]
    if late:
        raise MrcemuError(f"{len(late)} of {len(specs)} transfers did not complete in "
                          f"{timeout:.0f} s")
    return results, elapsed


def _cc_delta(before: dict, after: dict, state: dict) -> dict:
    """NSCC's reactions over the write (differences of the stats' counters) and where
    its window and delays ended (`state`, the connection's `cc_state`); none for a
    transport without it (RoCE: an empty state)."""
    if not state:
        return {}
    return {"quick_adapts": after["cc_quick_adapts"] - before.get("cc_quick_adapts", 0),
            "decreases": after["cc_decreases"] - before.get("cc_decreases", 0), **state}


def _report(topo: Topology, w: dict, before: dict, after: dict) -> dict:
    b = before.get("stats") or {}
    s = after["stats"]
    per_ev = {int(k, 16): v - b.get("per_ev", {}).get(k, 0) for k, v in s["per_ev"].items()}
    delta = {k: s[k] - b.get(k, 0) for k in COUNTERS}
    per_plane: Counter = Counter()
    per_path: Counter = Counter()
    for ev, n in per_ev.items():
        if n:
            plane, _spine = ev_fields(ev)
            per_plane[plane] += n
            per_path[path_label(ev)] += n
    dt = (w["done_at"] - w["posted_at"]) if w.get("done_at") else None
    return {
        "src": f"h{w['src']}", "dst": f"h{w['dst']}", "transport": w["transport"],
        # the policy that chose each packet's EV (MRC's; RoCE's QP takes one path)
        **({"load_balancing": after.get("load_balancing")} if w["transport"] == "mrc"
           else {}),
        "size": w["size"], "completed": dt is not None, "failed": bool(w.get("failed")),
        "failed_why": w.get("why"),
        "completion_s": dt, "posted_at": w.get("posted_at"), "done_at": w.get("done_at"),
        # the fixed part of this pair's round trip, and the factor to the paper's times
        "base_rtt_s": round(latency.base_rtt_s(topo, w["src"], w["dst"]), 6),
        "scale": latency.describe(topo),
        "goodput_mbps": w["size"] * 8 / dt / 1e6 if dt else None,
        "capacity_mbps": topo.planes * topo.host_link_mbps,
        "sha256_src": w["sha_src"], "sha256_dst": w["sha_dst"], "integrity_ok": w["ok"],
        "packets_per_plane": {str(k): v for k, v in sorted(per_plane.items())},
        "packets_per_path": dict(sorted(per_path.items())),
        "paths_used": len(per_path),
        "retransmits": delta["retransmits"], "trims": delta["trims_nacked"],
        "nacks": delta["nacks_rx"], "rtos": delta["rtos"],
        # the congestion control's reactions during the write (MRC's NSCC; none for RoCE)
        "cc": _cc_delta(b, s, after.get("cc") or {}),
        "ev_changes": [c for c in after["ev_changes"] if c[0] >= (w.get("posted_at") or 0)],
        "ev_states": after["ev_states"],
        "path_changes": after["path_changes"],
    }
