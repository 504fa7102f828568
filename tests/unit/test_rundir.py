"""The run directory's logs: a new fabric's start empty, the last fabric's are kept."""

from __future__ import annotations

import pytest

from mrcemu import rundir


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(rundir, "LOGS", tmp_path / "logs")
    monkeypatch.setattr(rundir, "MANAGER_LOG", tmp_path / "manager.log")
    return tmp_path


def fabric_writes(run_dir, text: str) -> None:
    (run_dir / "logs").mkdir(exist_ok=True)
    (run_dir / "logs" / "nic-h0.jsonl").write_text(text)
    (run_dir / "manager.log").write_text(text)


def test_each_bring_up_keeps_the_last_fabrics_logs_and_drops_the_one_before(run_dir):
    rundir.rotate_logs()  # the first fabric since boot: nothing to keep
    assert not (run_dir / "logs.prev").exists() and not (run_dir / "logs").exists()
    fabric_writes(run_dir, "first\n")
    rundir.rotate_logs()
    fabric_writes(run_dir, "second\n")
    assert (run_dir / "logs.prev" / "nic-h0.jsonl").read_text() == "first\n"
    assert (run_dir / "manager.log.prev").read_text() == "first\n"
    rundir.rotate_logs()
    # the second fabric's logs are the previous ones now; the first's are gone
    assert sorted(p.name for p in run_dir.iterdir()) == ["logs.prev", "manager.log.prev"]
    assert (run_dir / "logs.prev" / "nic-h0.jsonl").read_text() == "second\n"
    assert (run_dir / "manager.log.prev").read_text() == "second\n"
