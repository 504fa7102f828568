"""How fast a scenario runs: `--slowdown` as given, or `auto`'s pick, from the
calibration of what a packet costs this machine (scenario/calibrate.py) and, for real
programs, from what they cost the NICs while they ran (scenario/program_pace.py)."""

from __future__ import annotations

import dataclasses

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
