"""The CPU group a program on an emulated host runs in: a cgroup whose `cpu.idle` is 1.

A program runs at idle priority so that its spinning (ib_write_lat polls its buffer)
never holds up the emulated NICs: a real NIC is hardware beside the CPU. A task's idle
policy only counts against tasks of its own group, though. With the scheduler's
autogroups (`kernel.sched_autogroup_enabled`, on by default) every session is a group,
and a program's session competes with each NIC's as a whole, at an equal share: a
waking NIC then waits up to a scheduler tick behind a spinning program. An idle cgroup
is scheduled as an idle task at the top level, and a task in any cgroup but the root
has no autogroup, so a program in this group yields to a NIC at once.

Made on a program's first start, removed with the fabric (`down`, `clean`). Where the
kernel has no CPU controller mounted, or it has no `cpu.idle` (before Linux 5.15),
programs keep the idle priority alone and the run's fidelity verdict judges the rest.
"""

from __future__ import annotations

import errno
from pathlib import Path

NAME = "mrcemu-programs"
MOUNTS = Path("/proc/self/mounts")


def cpu_root(mounts: str, v2_controllers: dict[str, str]) -> Path | None:
    """Where the CPU controller is mounted, from /proc/self/mounts' text: a cgroup v1
    hierarchy with `cpu` among its options, else a cgroup2 one whose controllers
    (`v2_controllers`, mount point -> its cgroup.controllers text) include `cpu`."""
    v2 = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        point, fstype, options = fields[1], fields[2], fields[3].split(",")
        if fstype == "cgroup" and "cpu" in options:
            return Path(point)
        if fstype == "cgroup2" and v2 is None and "cpu" in v2_controllers.get(point, "").split():
            v2 = Path(point)
    return v2


def _found() -> Path | None:
    try:
        mounts = MOUNTS.read_text()
    except OSError:
        return None
    v2 = {}
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            try:
                v2[fields[1]] = (Path(fields[1]) / "cgroup.controllers").read_text()
            except OSError:
                pass
    return cpu_root(mounts, v2)


def ensure() -> tuple[Path | None, str | None]:
    """The group's `cgroup.procs` (a program writes its PID there before it execs), made
    idle if it was not; or None and why programs run without it."""
    root = _found()
    if root is None:
        return None, "no CPU cgroup controller is mounted"
    group = root / NAME
    try:
        if (root / "cgroup.subtree_control").exists():  # cgroup2: its children get `cpu`
            (root / "cgroup.subtree_control").write_text("+cpu")
        group.mkdir(exist_ok=True)
        (group / "cpu.idle").write_text("1")
    except OSError as e:
        return None, f"{group}: {e.strerror}"
    return group / "cgroup.procs", None


def exists() -> bool:
    """Whether the group is there (made, and not yet removed)."""
    root = _found()
    return root is not None and (root / NAME).is_dir()


def remove() -> int:
    """The group gone, once no program is in it; 1 if it was removed."""
    root = _found()
    if root is None:
        return 0
    try:
        (root / NAME).rmdir()
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.EBUSY):
            return 0
        raise
    return 1
