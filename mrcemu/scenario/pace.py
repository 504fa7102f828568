"""How fast a scenario runs: `--slowdown` as given, or `auto`'s pick, from the
calibration of what a packet costs this machine (scenario/calibrate.py) and, for real
programs, from what they cost the NICs while they ran (scenario/program_pace.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from mrcemu import slowdown as auto
from mrcemu.scenario.calibrate import Ui, choose
from mrcemu.scenario.model import Scenario
from mrcemu.scenario.program_pace import probe


def choose_for(sc: Scenario, ui: Ui, fresh: bool = False) -> auto.Pick:
    """`auto`'s pick for scenario `sc` (at full speed): from the packets its workload asks;
    for real programs, then from how late the NICs ran while they ran (`probe`)."""
    p = choose(sc.topology, sc.workload.phases(sc.topology.hosts), ui)
    if sc.workload.kind != "exec":
        return p
    got = probe(sc, p.slowdown, ui, fresh)
    return dataclasses.replace(p, slowdown=auto.settle(p.slowdown, got.share), probe=got)


def paced(sc: Scenario, slowdown: float | str, ui: Ui) -> tuple[Scenario, dict]:
    """`sc` (at full speed) slowed as asked: by the number given, or by the pick of
    `auto`; and how its slowdown was chosen, for the report (`slowdown_pick`)."""
    if slowdown == "auto":
        p = choose_for(sc, ui)
        k, how = p.slowdown, p.to_json()
        ui("stage", {"text": p.describe()})
    else:
        k = float(slowdown)
        how = {"how": "given", "slowdown": k, "why": f"--slowdown {k:g}, as given"}
    return (sc.slowed(k) if k != 1.0 else sc), how


# At `auto`, a run the fidelity monitor does not trust is run again, at the ladder's next
# slowdown each time, this many times at most: an unattended set of runs (`paper`, a
# study) hands back figures it can stand behind where a step or two slower gets them (a
# step costs at most a third more time), and says which runs needed it.
RERUNS = 2


def faithful(report: dict) -> bool:
    return bool((report.get("fidelity") or {}).get("ok"))


def why_not(report: dict) -> str:
    return "; ".join((report.get("fidelity") or {}).get("reasons", [])[:2]) or "no verdict"


def tried_text(tried: list[dict]) -> str:
    return ", ".join(f"{t['slowdown']:g}" for t in tried) + " was not faithful"


def until_faithful(name: str, k: float, auto_: bool, ui: Ui,
                   job_at: Callable[[float, dict | None], tuple[Path, dict]]
                   ) -> tuple[Path, dict, float, list[dict]]:
    """`job_at(k, pace)` run at slowdown `k`, and, at `auto`, again at the ladder's next
    step while it is not faithful (RERUNS at most): the last run's folder, report and
    slowdown, and the runs before it (their slowdown and why they were not trusted)."""
    folder, report = job_at(k, None)
    tried: list[dict] = []
    while auto_ and not faithful(report) and len(tried) < RERUNS:
        tried.append({"slowdown": k, "why": why_not(report)})
        k = auto.next_slowdown(k)
        ui("stage", {"text": f"{name} was not faithful at {tried[-1]['slowdown']:g} "
                             f"({tried[-1]['why']}): running it again at {k:g}"})
        folder, report = job_at(k, {
            "how": "auto", "slowdown": k, "reruns": tried,
            "why": f"run again at {k:g}, the ladder's next step, after "
                   + "; ".join(f"the run at {t['slowdown']:g} was not faithful ({t['why']})"
                               for t in tried)})
    return folder, report, k, tried
