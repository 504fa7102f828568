"""Helper processes are recorded generically and ended by `stop_all`; nothing we open
is left open."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from mrcemu import rundir
from mrcemu.fabric import children, state


def fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    for name in ("RUN_DIR", "CHILDREN", "LOCK"):
        monkeypatch.setattr(rundir, name, tmp_path / getattr(rundir, name).name)
    monkeypatch.setattr(state, "RUN_DIR", tmp_path)
    monkeypatch.setattr(state, "LOCK", tmp_path / "lock")
    return tmp_path


def test_spawned_children_are_recorded_and_all_stopped_with_their_signal(run_dir):
    before = fds()
    # A child that leaves a word when asked to stop with SIGINT, as dumpcap closes its file.
    code = ("import signal,sys,time\n"
            "def bye(*_):\n"
            f"    open({str(run_dir / 'said')!r}, 'w').write('closed'); sys.exit(0)\n"
            "signal.signal(signal.SIGINT, bye)\n"
            "print('ready', file=sys.stderr, flush=True)\n"
            "time.sleep(60)\n")
    a = children.spawn([sys.executable, "-c", code], "test a", log=run_dir / "a.log",
                       stop_signal=signal.SIGINT)
    b = children.spawn(["sleep", "60"], "test b")
    assert fds() == before  # the log file is the child's; ours is closed
    while "ready" not in (run_dir / "a.log").read_text():
        assert a.poll() is None
    assert set(children.recorded()) == {a.pid, b.pid}
    assert children.recorded()[a.pid]["what"] == "test a"
    assert children.stop_all() == 2
    assert (run_dir / "said").read_text() == "closed"
    assert not children.alive(a.pid) and not children.alive(b.pid)
    assert children.recorded() == {} and not rundir.CHILDREN.exists()


def test_a_recycled_pid_is_not_ours(run_dir):
    p = children.spawn(["sleep", "60"], "test")
    start = children.recorded()[p.pid]["start"]
    assert children.alive(p.pid, start) and not children.alive(p.pid, start + 1)
    children.stop(p.pid)
    assert not children.alive(p.pid)


def test_the_fabric_lock_closes_its_descriptor(run_dir):
    before = fds()
    with state.Lock() as lock:
        assert not lock.held_by_other()
    assert fds() == before
