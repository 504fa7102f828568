"""Root integration tests: real namespaces, torn down even when a test fails."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mrcemu.fabric import idlegroup, state
from mrcemu.fabric.clean import clean
from mrcemu.fabric.sweep import IFNAME, our_processes

pytestmark = pytest.mark.root


def pytest_collection_modifyitems(items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="needs root: integration tests build real network "
                                       "namespaces (run 'sudo make test')")
        for item in items:
            if "integration" in str(item.fspath):
                item.add_marker(skip)


def mrcemu(*args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mrcemu", *args], capture_output=True,
                          text=True, timeout=timeout, check=check)


def wait_for(cond: Callable[[], bool], limit: float = 30.0) -> None:
    """Wait until `cond()` holds, polling: tests wait for events, not for a number of
    seconds (the limit only ends a broken run; the caller's assertion then fails)."""
    deadline = time.monotonic() + limit
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)


def proc_state(pid: int) -> str:
    """The process's state letter from /proc (R, S, T, Z...); "?" if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that may never reap it."""
    return proc_state(pid) not in ("Z", "?")


def leftovers() -> dict[str, object]:
    veths = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True,
                           text=True).stdout.splitlines()
    ours = [v for v in veths if IFNAME.match(v.split(":")[1].strip().split("@")[0])]
    return {"processes": our_processes(), "veths": ours, "state": state.STATE.exists(),
            "idle_group": idlegroup.exists()}


def assert_clean() -> None:
    left = leftovers()
    assert left == {"processes": [], "veths": [], "state": False, "idle_group": False}, left


@pytest.fixture
def tidy() -> Iterator[None]:
    """No fabric before, and nothing of ours left after (for tests that make their own)."""
    clean()
    yield
    clean()
    assert_clean()


def up(topo: str) -> None:
    """A fabric of `topo` brought up from clean: the one bring-up every fixture shares."""
    clean()
    r = mrcemu("up", topo)
    assert r.returncode == 0, r.stderr + r.stdout


def down() -> None:
    """The fabric taken down, and anything it left cleaned."""
    mrcemu("down")
    clean()


@contextmanager
def running(topo: str) -> Iterator[str]:
    """A fabric of `topo` brought up from clean, and down and cleaned after, whatever
    the test did."""
    up(topo)
    try:
        yield topo
    finally:
        down()


FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Remember a failed test, for the shared fabric below."""
    rep = yield
    if rep.failed:
        item.stash[FAILED] = True
    return rep


def intact(topo: str) -> bool:
    """The fabric of `topo` is up as a bring-up leaves it: every node and NIC daemon
    alive and running (not stopped), and no fault active."""
    from mrcemu.fabric.inject import active_faults
    st = state.load_state()
    if st is None or st.topology != topo or st.phase != "up" or not alive(st.manager_pid):
        return False
    pids = [*st.nodes.values(), *st.nics.values()]
    return all(proc_state(p) not in ("Z", "?", "T") for p in pids) and not active_faults()


@pytest.fixture(scope="module")
def _shared() -> Iterator[dict[str, str | None]]:
    """The fabric a module's `fabric` tests share: down and cleaned after its last."""
    keep: dict[str, str | None] = {"topo": None}
    yield keep
    if keep["topo"] is not None:
        down()


@pytest.fixture
def fabric(request, _shared) -> Iterator[str]:
    """A running fabric of the topology named by the test's parameter (default 'small').
    Bring-up is the slow part, so a module's tests share one: each gets the fabric the
    test before it left, if that one passed and left it as a bring-up does (`intact`:
    a daemon killed, a fault not healed, the fabric taken down all mean a fresh one)."""
    topo = getattr(request, "param", "small")
    if _shared["topo"] != topo or not intact(topo):
        if _shared["topo"] is not None:
            down()
        _shared["topo"] = None
        up(topo)
        _shared["topo"] = topo
    yield topo
    if request.node.stash.get(FAILED, False) or not intact(topo):
        # what the next test would inherit is not a fresh fabric: it gets one
        down()
        _shared["topo"] = None


@pytest.fixture(scope="module")
def default_fabric() -> Iterator[str]:
    """One default fabric shared by a module's tests (bring-up is the slow part)."""
    with running("default") as topo:
        yield topo
