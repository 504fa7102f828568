"""The collision study run: each size's runs (collisions.plan) as ordinary jobs, each on
a fabric of its own at a pace this host keeps (`auto`: the pick, then the ladder's next
step while the fidelity monitor does not trust a run), their figures gathered by
collisions.py. A run that is not faithful after its reruns is kept, and says so."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from mrcemu.study import collisions, paced_run
from mrcemu.study.collisions import Run

Ui = paced_run.Ui
Interrupted = paced_run.Interrupted


def _one(r: Run, steps: int, seed: int, slowdown: float | str, runs_dir: Path,
         ui: Ui) -> dict:
    """One run to its report, `auto` rerun slower while not faithful; its figures."""
    folder, report, k, tried = paced_run.run(r.mapping(steps, seed), f"{r.hosts} hosts {r.label}",
                                             f"study-{r.hosts}h-{r.label}", slowdown,
                                             runs_dir, ui)
    got = report["transports"].get(r.transport, {})
    fid = report.get("fidelity") or {}
    return {"label": r.label, "transport": r.transport, "qps": r.qps, "alone": r.alone,
            "topology": r.topology, "slowdown": k, "reruns": tried,
            "faithful": bool(fid.get("ok")), "why_not": fid.get("reasons", [])[:2],
            "completed": bool(got.get("completed")), "intact": got.get("integrity_ok"),
            "wall_s": report.get("wall_clock_s"), "folder": folder.name,
            # why a transport gets less than its share: what it lost and how it recovered
            "fabric_drops": sum((got.get("fabric") or {}).get("dropped", {}).values()),
            "retransmits": got.get("retransmits"), "rtos": got.get("rtos"),
            "steps": got.get("steps")}


def size(hosts: int, steps: int, qps: list[int], seed: int, slowdown: float | str,
         runs_dir: Path, ui: Ui) -> dict:
    """One size's runs and their figures: each transport's row, and each run's record."""
    t0 = time.monotonic()
    done: dict[str, dict] = {}
    for r in collisions.plan(hosts, qps):
        ui("stage", {"text": f"{hosts} hosts: {r.label} on {r.topology}"})
        done[r.label] = _one(r, steps, seed, slowdown, runs_dir, ui)
    rows = {}
    for r in collisions.plan(hosts, qps):
        if not r.alone:
            alone, stepped = collisions.row_runs(r.row, qps)
            rows[r.row] = collisions.transport_row(done[stepped]["steps"],
                                                   done[alone]["steps"])
            if r.row == "roce-1qp" and rows[r.row].get("buckets"):
                rows[r.row]["expected"] = collisions.bucket_expectation(rows[r.row], hosts,
                                                                        seed)
    return {"hosts": hosts, "steps_asked": steps, "qps": qps,
            "transports": rows, "runs": list(done.values()),
            "faithful": all(d["faithful"] for d in done.values()),
            "seconds": round(time.monotonic() - t0, 1)}


def run(hosts: list[int], steps: int, qps: list[int], seed: int, slowdown: float | str,
        runs_dir: Path, ui: Ui, done: Callable[[dict], None]) -> list[dict]:
    """Every size, smallest first; `done(size)` as each finishes, so that a long study
    keeps what it measured when a later size is stopped."""
    out = []
    for h in sorted(set(hosts)):
        out.append(size(h, steps, qps, seed, slowdown, runs_dir, ui))
        done(out[-1])
    return out
