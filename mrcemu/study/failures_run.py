"""The failure study run: at each size, each transport's trials (failures.mapping) as one
ordinary job on its fabric at a pace this host keeps, their figures read by
failures.py. A run that is not faithful after its reruns is kept, and says so."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from mrcemu.study import failures, paced_run

Ui = paced_run.Ui


def _one(hosts: int, transport: str, n: int, seed: int, slowdown: float | str,
         runs_dir: Path, ui: Ui) -> dict:
    name = f"{hosts} hosts {transport} failures"
    folder, report, k, tried = paced_run.run(
        failures.mapping(hosts, transport, n, seed), name,
        f"study-{hosts}h-{transport}-failures", slowdown, runs_dir, ui)
    got = report["transports"].get(transport, {})
    fid = report.get("fidelity") or {}
    rows = failures.trial_rows(got, hosts, transport)
    return {"transport": transport, "topology": failures.topology_of(hosts, transport),
            "slowdown": k, "reruns": tried, "faithful": bool(fid.get("ok")),
            "why_not": fid.get("reasons", [])[:2], "completed": bool(got.get("completed")),
            "intact": got.get("integrity_ok"), "wall_s": report.get("wall_clock_s"),
            "folder": folder.name, "retransmits": got.get("retransmits"),
            "rtos": got.get("rtos"), "write_bdps": (got.get("steps") or {}).get("write_bdps"),
            "trials": rows, "summary": failures.summarize(rows, hosts, transport)}


def run(hosts: list[int], n: int, seed: int, slowdown: float | str, runs_dir: Path, ui: Ui,
        done: Callable[[list[dict]], None]) -> list[dict]:
    """Every size, smallest first, each transport in turn; `done(sizes)` after each run,
    a size holding the runs done so far, so that a long study stopped keeps them."""
    out: list[dict] = []
    for h in sorted(set(hosts)):
        t0 = time.monotonic()
        size: dict = {"hosts": h, "trials": n, "runs": []}
        out.append(size)
        for transport in failures.TRANSPORTS:
            ui("stage", {"text": f"{h} hosts: {transport}, {n} trials on "
                                 f"{failures.topology_of(h, transport)}"})
            size["runs"].append(_one(h, transport, n, seed, slowdown, runs_dir, ui))
            size.update(faithful=all(r["faithful"] for r in size["runs"]),
                        seconds=round(time.monotonic() - t0, 1))
            done(out)
    return out
