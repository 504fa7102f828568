"""Entering a Mininet node's network namespace by the PID of its shell."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pyroute2 import IPRoute, netns


def ns_path(pid: int) -> str:
    return f"/proc/{pid}/ns/net"


@contextlib.contextmanager
def inside(pid: int) -> Iterator[None]:
    """Run the block in that namespace. Sockets opened here stay bound to it after
    the block exits, which is how one process talks to every node."""
    netns.pushns(ns_path(pid))
    try:
        yield
    finally:
        netns.popns()


def iproute(pid: int) -> IPRoute:
    with inside(pid):
        return IPRoute()


def write_sysctls(pid: int, values: dict[str, str]) -> None:
    """/proc/sys/net resolves against the opener's namespace, so write from inside."""
    with inside(pid):
        for key, value in values.items():
            with open("/proc/sys/" + key.replace(".", "/"), "w") as f:
                f.write(value)
