"""Where the idle CPU group for programs goes: the CPU controller's mount, v1 or v2."""

from __future__ import annotations

from pathlib import Path

from mrcemu.fabric.idlegroup import cpu_root

V1 = """tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
V2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n"


def test_a_v1_cpu_hierarchy_is_used_before_a_v2_one():
    v2 = {"/sys/fs/cgroup/unified": "cpu io memory"}
    assert cpu_root(V1, v2) == Path("/sys/fs/cgroup/cpu,cpuacct")


def test_cpuset_alone_is_not_the_cpu_controller():
    assert cpu_root(V1.replace("cpu,cpuacct 0", "cpuacct 0"), {}) is None


def test_a_v2_hierarchy_serves_only_if_it_has_the_cpu_controller():
    assert cpu_root(V2, {"/sys/fs/cgroup": "cpuset cpu io memory pids"}) == Path("/sys/fs/cgroup")
    assert cpu_root(V2, {"/sys/fs/cgroup": "cpuset io memory"}) is None
    assert cpu_root("", {}) is None
