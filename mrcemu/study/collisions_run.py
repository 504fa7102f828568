"""The collision study run: each size's runs (collisions.plan) as ordinary jobs, each on
a fabric of its own at a pace this host keeps (`auto`: the pick, then the ladder's next
step while the fidelity monitor does not trust a run), their figures gathered by
collisions.py. A run that is not faithful after its reruns is kept, and says so."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from mrcemu.study import collisions
from mrcemu.study.collisions import Run

Ui = Callable[[str, dict], None]


class Interrupted(Exception):
    """A run was stopped (Ctrl-C, SIGTERM): nothing after it starts."""


def _one(r: Run, steps: int, seed: int, slowdown: float | str, runs_dir: Path,
         ui: Ui) -> dict:
    """One run to its report, `auto` rerun slower while not faithful; its figures."""
    from mrcemu.scenario.job import run as run_job
    from mrcemu.scenario.model import from_mapping
    from mrcemu.scenario.pace import paced, until_faithful

    full = from_mapping(r.mapping(steps, seed), f"<study {r.hosts} hosts {r.label}>",
                        f"study-{r.hosts}h-{r.label}")
    first, pick = paced(full, slowdown, ui)

    def job_at(k: float, rerun: dict | None) -> tuple[Path, dict]:
        folder = run_job(full.as_run(k), runs_dir, ui, pace=rerun or pick)
        report = json.loads((folder / "report.json").read_text())
        if report.get("interrupted"):
            raise Interrupted(r.label)
        return folder, report

    folder, report, k, tried = until_faithful(f"{r.hosts} hosts {r.label}", first.slowdown,
                                              slowdown == "auto", ui, job_at)
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
