"""One RDMA WRITE between two NIC daemons, driven over their control sockets."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable

from mrcemu.errors import MrcemuError
from mrcemu.nic.control import request
from mrcemu.topology import Topology
from mrcemu.topology.paths import ev_fields

UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 10**6, "mb": 10**6,
         "mib": 1 << 20, "g": 10**9, "gb": 10**9, "gib": 1 << 30}


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in UNITS:
        raise MrcemuError(f"size {text!r} is not a size: use e.g. 64MiB, 8MiB, 512KiB or bytes")
    n = int(float(m.group(1)) * UNITS[m.group(2).lower()])
    if n <= 0:
        raise MrcemuError(f"size {text!r} must be positive")
    return n


COUNTERS = ("retransmits", "trims_nacked", "nacks_rx", "rtos")


def start(src: int, dst: int, size: int, transport: str, seed: int = 1) -> dict:
    # Connections outlive transfers: remember where the counters stood.
    try:
        before = request(f"h{src}", "stats", peer=dst, transport=transport)["stats"]
    except MrcemuError:
        before = {}
    base = {k: before.get(k, 0) for k in COUNTERS}
    base["per_ev"] = before.get("per_ev", {})
    mr = request(f"h{dst}", "register", size=size)
    w = request(f"h{src}", "write", peer=dst, transport=transport, size=size, seed=seed,
                va=mr["va"], rkey=mr["rkey"], timeout=60)
    return {"src": src, "dst": dst, "size": size, "transport": transport, "rkey": mr["rkey"],
            "msn": w["msn"], "sha_src": w["sha256"], "before": base}


def poll(job: dict) -> dict:
    s = request(f"h{job['src']}", "stats", peer=job["dst"], transport=job["transport"])
    msg = next(m for m in s["messages"] if m["msn"] == job["msn"])
    return {"stats": s, "msg": msg}


def finish(job: dict, topo: Topology, st: dict) -> dict:
    s, msg = st["stats"], st["msg"]
    sha_dst = request(f"h{job['dst']}", "hash", rkey=job["rkey"], timeout=60)["sha256"]
    request(f"h{job['dst']}", "free", rkey=job["rkey"])
    base = job.get("before", {})
    per_ev = {int(k, 16): v - base.get("per_ev", {}).get(k, 0)
              for k, v in s["stats"]["per_ev"].items()}
    delta = {k: s["stats"][k] - base.get(k, 0) for k in COUNTERS}
    per_path: Counter = Counter()
    for ev, n in per_ev.items():
        per_path[ev_fields(ev)] += n
    per_plane: Counter = Counter()
    per_spine: Counter = Counter()
    for (plane, spine), n in list(per_path.items()):
        if not n:
            del per_path[(plane, spine)]
            continue
        per_plane[plane] += n
        per_spine[f"p{plane}s{spine}" if spine is not None else f"p{plane}"] += n
    dt = (msg["done_at"] - msg["posted_at"]) if msg["done_at"] else None
    capacity = topo.planes * topo.host_link_mbps
    return {
        "src": f"h{job['src']}", "dst": f"h{job['dst']}", "transport": job["transport"],
        "size": job["size"], "completed": dt is not None, "failed": bool(s.get("failed")),
        "completion_s": dt, "posted_at": msg["posted_at"], "done_at": msg["done_at"],
        "goodput_mbps": job["size"] * 8 / dt / 1e6 if dt else None,
        "capacity_mbps": capacity,
        "sha256_src": job["sha_src"], "sha256_dst": sha_dst,
        "integrity_ok": dt is not None and sha_dst == job["sha_src"],
        "packets_per_plane": {str(k): v for k, v in sorted(per_plane.items())},
        "packets_per_path": {k: v for k, v in sorted(per_spine.items())},
        "paths_used": sum(1 for v in per_path.values() if v),
        "retransmits": delta["retransmits"], "trims": delta["trims_nacked"],
        "nacks": delta["nacks_rx"], "rtos": delta["rtos"],
        "ev_changes": [c for c in s["ev_changes"] if c[0] >= msg["posted_at"]],
        "ev_states": s["ev_states"],
        "path_changes": s.get("path_changes", []),
    }


def run(topo: Topology, src: int, dst: int, size: int, transport: str, seed: int = 1,
        progress: Callable[[int, int], None] | None = None, timeout: float | None = None
        ) -> dict:
    job = start(src, dst, size, transport, seed)
    # Generous: 20x the time at line rate on one plane, plus start-up.
    limit = timeout or 30 + 20 * size * 8 / (topo.host_link_mbps * 1e6)
    t0 = time.monotonic()
    while True:
        st = poll(job)
        msg = st["msg"]
        if progress:
            progress(msg["acked_pkts"], msg["npkts"])
        if msg["done_at"] or st["stats"].get("failed") or time.monotonic() - t0 > limit:
            break
        time.sleep(0.1)
    return finish(job, topo, st)


def run_many(topo: Topology, specs: list[tuple[int, int, int, str, int]],
             timeout: float = 300.0, interval: float = 0.1) -> tuple[list[dict], float]:
    """Start every (src, dst, size, transport, seed) at once; wait for all of them.

    Returns the results in completion order and the seconds from the first post to the
    last completion, as the polling saw it."""
    t0 = time.monotonic()
    pending = [start(*spec) for spec in specs]
    results: list[dict] = []
    while pending and time.monotonic() - t0 < timeout:
        still = []
        for job in pending:
            st = poll(job)
            if st["msg"]["done_at"] or st["stats"].get("failed"):
                results.append(finish(job, topo, st))
            else:
                still.append(job)
        pending = still
        if pending:
            time.sleep(interval)
    if pending:
        raise MrcemuError(f"{len(pending)} of {len(specs)} transfers did not complete in "
                          f"{timeout:.0f} s")
    return results, time.monotonic() - t0
