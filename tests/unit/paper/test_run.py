"""`mrcemu paper`'s runner, with the scenario runner replaced: no fabric, no clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mrcemu.paper import run as paper_run
from mrcemu.scenario import job


@pytest.fixture
def jobs(monkeypatch):
    """Each scenario the paper starts, by name; each "ends" as `ending` says: a report
    marked interrupted (Ctrl-C inside the run), or KeyboardInterrupt (a second one)."""
    started: list[str] = []
    ending = {"how": "interrupted"}

    def fake_run(sc, out_root: Path, ui, cluster=None, pace=None) -> Path:
        started.append(sc.name)
        if ending["how"] == "raise":
            raise KeyboardInterrupt
        folder = out_root / sc.name
        folder.mkdir(parents=True)
        (folder / "report.json").write_text(json.dumps(
            {"interrupted": True, "partial": True, "transports": {}, "fidelity": None}))
        return folder

    monkeypatch.setattr(job, "run", fake_run)
    return started, ending


@pytest.mark.parametrize("how", ["interrupted", "raise"])
def test_ctrl_c_in_one_run_stops_the_whole_reproduction_and_still_writes_paper_md(
        jobs, tmp_path, how):
    started, ending = jobs
    ending["how"] = how
    doc = paper_run.run(["E3", "E4", "E9"], tmp_path, True, 4.0, lambda *_: None)
    assert started == ["E3"]  # neither E4 nor E9's sweep began
    assert doc["interrupted"] == "E3" and doc["experiments"] == []
    written = json.loads((tmp_path / "paper.json").read_text())
    assert written["interrupted"] == "E3"
    assert "**Interrupted** during E3" in (tmp_path / "paper.md").read_text()


def test_ctrl_c_in_a_sweep_starts_none_of_its_other_runs(jobs, tmp_path):
    started, _ = jobs
    doc = paper_run.run(["E0", "E3"], tmp_path, True, 4.0, lambda *_: None)
    assert started == ["E0-lat-local"]
    assert doc["interrupted"] == "E0-lat-local" and doc["experiments"] == []
