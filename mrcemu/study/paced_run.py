"""One of a study's runs as an ordinary job at a pace this host keeps: `auto`'s pick,
then the ladder's next step while the fidelity monitor does not trust it. A run that is
not faithful after its reruns is kept, and says so."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

Ui = Callable[[str, dict], None]


class Interrupted(Exception):
    """A run was stopped (Ctrl-C, SIGTERM): nothing after it starts."""


def run(mapping: dict, name: str, slug: str, slowdown: float | str, runs_dir: Path,
        ui: Ui) -> tuple[Path, dict, float, list[dict]]:
    """The scenario `mapping` run to its report: its folder, report, slowdown, and the
    runs before it that were not trusted (`pace.until_faithful`)."""
    from mrcemu.scenario.job import run as run_job
    from mrcemu.scenario.model import from_mapping
    from mrcemu.scenario.pace import paced, until_faithful

    full = from_mapping(mapping, f"<study {name}>", slug)
    first, pick = paced(full, slowdown, ui)

    def job_at(k: float, rerun: dict | None) -> tuple[Path, dict]:
        folder = run_job(full.as_run(k), runs_dir, ui, pace=rerun or pick)
        report = json.loads((folder / "report.json").read_text())
        if report.get("interrupted"):
            raise Interrupted(name)
        return folder, report

    return until_faithful(name, first.slowdown, slowdown == "auto", ui, job_at)
