"""Entering a Mininet node's network namespace by the PID of its shell."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

from pyroute2 import IPRoute, netns

from mrcemu.errors import MrcemuError


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


NFT_TABLE = "mrcemu_faults"  # the node's table of fault drop rules


def run_in(pid: int, *args: str) -> None:
    """A command in the node's namespace (`nsenter`); its error in one line."""
    r = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", *args], capture_output=True,
                       text=True)
    if r.returncode:
        raise MrcemuError(f"{' '.join(args[:4])}: {r.stderr.strip()[:300]}")


def nft_rules(pid: int, rules: list[str]) -> None:
    """Replace the node's fault table with these forward-path drop rules (none: remove it).
    Creating the table first makes the delete idempotent."""
    script = f"table inet {NFT_TABLE}\ndelete table inet {NFT_TABLE}\n"
    if rules:
        script += (f"table inet {NFT_TABLE} {{\n chain forward_drops {{ type filter hook forward "
                   f"priority 0; policy accept;\n" + "".join(f"  {r}\n" for r in rules)
                   + " }\n}\n")
    r = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "nft", "-f", "-"],
                       input=script, capture_output=True, text=True)
    if r.returncode:
        raise MrcemuError(f"nft: {r.stderr.strip()[:300]}")
