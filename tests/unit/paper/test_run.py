"""`mrcemu paper`'s runner, with the scenario runner replaced: no fabric, no clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mrcemu.paper import run as paper_run
from mrcemu.scenario import job
from mrcemu.scenario.pace import RERUNS


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


# ---- reruns at auto: a run not faithful goes again, a step slower --------------------
SCENARIO = {"topology": "default", "workload": {"kind": "single", "iterations": 1,
                                                "size": "64KiB"}, "transports": ["mrc"]}


@pytest.fixture
def paced_runs(monkeypatch):
    """A fake experiment (XA) and sweep (XS, runs a and b); every run is faithful from
    the slowdown `faithful_from[name]` on; auto picks 2. Returns the slowdowns run, by
    scenario name, in order."""
    from mrcemu.paper import experiments as ex

    ran: dict[str, list[float]] = {}
    faithful_from: dict[str, float] = {}

    def fake_run(sc, out_root: Path, ui, cluster=None, pace=None) -> Path:
        ran.setdefault(sc.name, []).append(sc.slowdown)
        folder = out_root / f"{sc.name}-{len(ran[sc.name])}"
        folder.mkdir(parents=True)
        ok = sc.slowdown >= faithful_from.get(sc.name, 0.0)
        (folder / "report.json").write_text(json.dumps(
            {"transports": {"mrc": {}}, "slowdown_pick": pace,
             "fidelity": {"ok": ok, "reasons": [] if ok else ["timers ran late"]}}))
        return folder

    def fake_paced(sc, slowdown, ui):
        k = 2.0 if slowdown == "auto" else float(slowdown)
        return sc.slowed(k), {"how": "auto" if slowdown == "auto" else "given", "slowdown": k}

    xa = ex.Experiment("XA", "0", "nothing", lambda quick: SCENARIO,
                       lambda report, quick: ({"x": 1.0}, True, "fine"))
    xs = ex.Experiment("XS", "0", "nothing", None, None, sweep=ex.Sweep(
        runs=lambda quick: [("a", SCENARIO), ("b", SCENARIO)],
        measure=lambda reports, quick: ({"x": 1.0}, True, "fine"), busbw_figure=False))
    monkeypatch.setattr(job, "run", fake_run)
    monkeypatch.setattr(paper_run, "paced", fake_paced)
    monkeypatch.setattr(paper_run, "BY_ID", {"XA": xa, "XS": xs})
    monkeypatch.setattr(paper_run, "EXPERIMENTS", (xa, xs))
    return ran, faithful_from


def test_at_auto_a_run_not_faithful_goes_again_a_step_slower_until_it_is(paced_runs,
                                                                         tmp_path):
    ran, faithful_from = paced_runs
    faithful_from["XA"] = 3.0
    (row,) = paper_run.run(["XA"], tmp_path, True, "auto", lambda *_: None)["experiments"]
    assert ran["XA"] == [2.0, 3.0]  # the pick, then the ladder's next step
    assert row["slowdown"] == 3.0 and row["faithful"] is True
    assert row["reruns"] == [{"slowdown": 2.0, "why": "timers ran late"}]
    assert "run at 3 after 2 was not faithful" in row["reason"]
    kept = json.loads((tmp_path / "XA" / "report.json").read_text())
    assert kept["slowdown_pick"]["slowdown"] == 3.0  # the report kept is the rerun's
    assert "not faithful (timers ran late)" in kept["slowdown_pick"]["why"]


def test_reruns_stop_after_their_limit_and_the_row_says_not_faithful(paced_runs, tmp_path):
    ran, faithful_from = paced_runs
    faithful_from["XA"] = 100.0
    (row,) = paper_run.run(["XA"], tmp_path, True, "auto", lambda *_: None)["experiments"]
    assert len(ran["XA"]) == 1 + RERUNS
    assert ran["XA"] == sorted(ran["XA"]) and len(set(ran["XA"])) == len(ran["XA"])
    assert row["faithful"] is False and "NOT faithful" in row["reason"]


def test_a_slowdown_given_is_never_changed(paced_runs, tmp_path):
    ran, faithful_from = paced_runs
    faithful_from["XA"] = 3.0
    (row,) = paper_run.run(["XA"], tmp_path, True, 2.0, lambda *_: None)["experiments"]
    assert ran["XA"] == [2.0]
    assert row["faithful"] is False and "reruns" not in row


def test_in_a_sweep_only_the_run_not_faithful_goes_again(paced_runs, tmp_path):
    ran, faithful_from = paced_runs
    faithful_from["XS-b"] = 3.0
    (row,) = paper_run.run(["XS"], tmp_path, True, "auto", lambda *_: None)["experiments"]
    assert ran == {"XS-a": [2.0], "XS-b": [2.0, 3.0]}
    assert row["faithful"] is True
    assert row["reruns"] == {"b": [{"slowdown": 2.0, "why": "timers ran late"},
                                   {"slowdown": 3.0}]}
    assert "b run at 3 after 2 was not faithful" in row["reason"]


def test_a_newer_runs_rows_replace_the_full_runs_and_say_when():
    from mrcemu.errors import MrcemuError
    from mrcemu.paper.run import again_line, with_rows

    doc = {"quick": False, "slowdown": "auto", "scale": {"x": 1}, "experiments": [
        {"id": "E5", "consistent": True, "reason": "old E5"},
        {"id": "E6", "consistent": False, "reason": "old E6"}]}
    newer = {"quick": False, "slowdown": "auto", "scale": {"x": 1}, "started":
             "2026-11-30T10:00:00", "machine": "m", "commit": "abc1234",
             "experiments": [{"id": "E6", "consistent": True, "reason": "new E6"}]}
    out = with_rows(doc, newer)
    assert [r["reason"] for r in out["experiments"]] == ["old E5", "new E6"]
    assert out["experiments"][1]["again"]["commit"] == "abc1234"
    assert "again" not in out["experiments"][0] and doc["experiments"][1]["reason"] == "old E6"
    assert again_line(out) == "E6 measured again 2026-11-30 at `abc1234` on m"  # its sitting
    assert again_line(doc) == ""
    for bad in ({**newer, "quick": True}, {**newer, "interrupted": "E6"},
                {**newer, "scale": {"x": 2}}):
        with pytest.raises(MrcemuError):
            with_rows(doc, bad)
