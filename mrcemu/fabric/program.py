"""One node's kernel programmed from the model, on the server that holds it: addresses,
static neighbours and routes over netlink, and htb on its ports. The agent runs it for
its own nodes; orchestration (`build`) never runs it on another server's.

`python -m mrcemu.fabric.program` is a worker: it programs the nodes it is handed on
stdin ({"topology": ..., "nodes": {name: PID}}), and exits 1 with the first failure,
named, on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict

from mrcemu.fabric import netlink, shaping
from mrcemu.fabric.netns import iproute
from mrcemu.topology import Layout, Topology
from mrcemu.topology.addressing import Kind
from mrcemu.topology.routes import NodeTable, tables

# Programming is pyroute2's Python, about 1 ms a request and 50 a node: one core's work.
# Cores to spare take a share each in a worker of their own (at most MAX_WORKERS), when
# each share has at least MIN_SHARE nodes: a worker's start (an interpreter and
# pyroute2's import) costs what about 7 nodes do.
MAX_WORKERS = 3
MIN_SHARE = 12


def program_node(layout: Layout, table: NodeTable, pid: int) -> None:
    """Addresses, neighbours, routes and htb into one node's kernel, by its PID on this
    server (each server's agent runs this for its own nodes)."""
    topo = layout.topo
    ipr = iproute(pid)
    try:
        ifindex = netlink.program(ipr, table, topo.mtu, topo.usid_engine)
        switch = layout.nodes[table.node].kind is not Kind.HOST
        for i in layout.interfaces[table.node]:
            idx = ifindex[i.name]
            if switch:
                # htb's leaf pfifo holds txqlen packets: size it to the switch buffer,
                # so a congested port drops instead of queueing for seconds.
                ipr.link("set", index=idx, txqlen=shaping.queue_packets(topo.buffer_bytes))
            shaping.shape(ipr, idx, i.mbps, topo.mtu)
    finally:
        ipr.close()


def _program_each(layout: Layout, tables: dict[str, NodeTable], nodes: dict[str, int]
                  ) -> None:
    for name, pid in nodes.items():
        try:
            program_node(layout, tables[name], pid)
        except Exception as e:
            raise RuntimeError(f"programming {name} (PID {pid}): {type(e).__name__}: {e}"
                               ) from None


def shares(names: list[str], cores: int) -> list[list[str]]:
    """`names` dealt out, one share a core that has at least MIN_SHARE of them (the
    first share is the caller's own)."""
    n = max(1, min(cores, MAX_WORKERS + 1, len(names) // MIN_SHARE))
    return [names[k::n] for k in range(n)]


def _start_worker(topo: Topology, nodes: dict[str, int]) -> subprocess.Popen:
    # A fresh interpreter, not a fork: a fork of a process with threads may copy a lock
    # another thread holds, and the child then waits on it forever.
    p = subprocess.Popen([sys.executable, "-m", "mrcemu.fabric.program"],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdin is not None
    p.stdin.write(json.dumps({"topology": asdict(topo), "nodes": nodes}))
    p.stdin.close()
    return p


def program_nodes(layout: Layout, tables: dict[str, NodeTable], nodes: dict[str, int]
                  ) -> None:
    """`program_node` for every node given (name -> PID), a share of them in each worker
    this machine has cores for, at once; the first that fails stops its share, and is
    raised named (the others' shares are finished or ended first)."""
    own, *others = shares(list(nodes), len(os.sched_getaffinity(0)))
    workers = [_start_worker(layout.topo, {n: nodes[n] for n in share}) for share in others]
    try:
        _program_each(layout, tables, {n: nodes[n] for n in own})
    except BaseException:
        for p in workers:
            p.kill()
        raise
    finally:
        failed = [_ended(p) for p in workers]
        failed = [why for why in failed if why is not None]
    if failed:
        raise RuntimeError(failed[0])


def _ended(p: subprocess.Popen) -> str | None:
    """A worker waited for: None if it succeeded, else its error's last line."""
    assert p.stderr is not None
    err = p.stderr.read().strip()
    p.stderr.close()
    if p.wait() == 0:
        return None
    return err.splitlines()[-1] if err else f"a programming worker ended with {p.returncode}"


def main() -> int:
    job = json.load(sys.stdin)
    layout = Layout(Topology(**job["topology"]))
    try:
        _program_each(layout, tables(layout), job["nodes"])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
