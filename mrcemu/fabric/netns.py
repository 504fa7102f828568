"""Entering a Mininet node's network namespace by the PID of its shell."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from pyroute2 import IPRoute, netns

from mrcemu import rundir
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


TCP_LISTEN = "0A"  # the state column of /proc/net/tcp for a listening socket


def listening_ports(table: str) -> set[int]:
    """The local ports in LISTEN in a /proc/net/tcp or tcp6 table's text."""
    out = set()
    for line in table.splitlines()[1:]:
        cells = line.split()
        if len(cells) > 3 and cells[3] == TCP_LISTEN:
            out.add(int(cells[1].rsplit(":", 1)[1], 16))
    return out


def listening_on(pid: int) -> set[int]:
    """The TCP ports that sockets listen on in the namespace of `pid` (its /proc/PID/net
    tables are that namespace's)."""
    ports: set[int] = set()
    for name in ("tcp", "tcp6"):
        try:
            ports |= listening_ports(Path(f"/proc/{pid}/net/{name}").read_text())
        except OSError:
            pass
    return ports


def listening(pid: int, port: int) -> bool:
    """Whether a TCP socket listens on `port` in the namespace of `pid`: a program's
    server is ready."""
    return port in listening_on(pid)


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
NFT_CHAIN = "forward_drops"


def run_in(pid: int, *args: str) -> None:
    """A command in the node's namespace (`nsenter`); its error in one line."""
    r = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", *args], capture_output=True,
                       text=True)
    if r.returncode:
        raise MrcemuError(f"{' '.join(args[:4])}: {r.stderr.strip()[:300]}")


def nft_counter(port: str) -> str:
    """The named counter of the packets a fault's rule dropped at `port`'s egress."""
    return "drops_" + port.replace("-", "_")


def nft_rules(pid: int, rules: list[tuple[str, str]]) -> None:
    """Replace the node's fault drop rules with these, each (egress port, nft match before
    its verdict); none leaves the chain empty. Each rule counts what it drops in its
    port's named counter, which outlives the rules (the chain is flushed, the table and
    its counters kept): `nft_drops` reads them, and a run's report holds what they
    counted over it."""
    script = (f"table inet {NFT_TABLE} {{\n chain {NFT_CHAIN} {{ type filter hook forward "
              "priority 0; policy accept; }\n}\n"
              f"flush chain inet {NFT_TABLE} {NFT_CHAIN}\n")
    for port, match in rules:
        script += (f"add counter inet {NFT_TABLE} {nft_counter(port)}\n"
                   f"add rule inet {NFT_TABLE} {NFT_CHAIN} oifname \"{port}\" {match}"
                   f"counter name {nft_counter(port)} drop\n")
    if rules:
        _ruled(pid)
    r = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "nft", "-f", "-"],
                       input=script, capture_output=True, text=True)
    if r.returncode:
        raise MrcemuError(f"nft: {r.stderr.strip()[:300]}")


def nft_nodes() -> set[int]:
    """The node shells (PIDs) on this server that ever had fault drop rules: only they
    have counters to read."""
    try:
        return {int(x) for x in rundir.NFT_NODES.read_text().split()}
    except (FileNotFoundError, ValueError):
        return set()


def _ruled(pid: int) -> None:
    if pid not in nft_nodes():
        rundir.NFT_NODES.parent.mkdir(parents=True, exist_ok=True)
        with open(rundir.NFT_NODES, "a") as f:
            f.write(f"{pid}\n")


def nft_drops(pid: int) -> dict[str, int]:
    """What the node's fault rules dropped, per named counter, since the node began
    (empty: no fault of the drop kinds ever touched it)."""
    import json

    r = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "nft", "-j", "list",
                        "counters", "table", "inet", NFT_TABLE],
                       capture_output=True, text=True)
    if r.returncode:
        return {}  # no such table: nothing ever dropped here by a fault
    out = {}
    for item in json.loads(r.stdout).get("nftables", []):
        c = item.get("counter")
        if c:
            out[c["name"]] = int(c["packets"])
    return out
