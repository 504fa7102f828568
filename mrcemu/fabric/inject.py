"""Fault injection on a running fabric: carrier, drop rules, rates, and the flapping
process. Each fault is applied and healed here, and every action is logged with its
time on the monotonic clock the NIC daemons log with, so reports can line faults up
with what the transports did. What a fault is and what it breaks is the pure model
in `mrcemu.topology.faults`.

A flap is a small process of its own (`python -m mrcemu.fabric.inject flap ...`),
recorded as a child of the fabric, so it keeps flapping after `mrcemu fail` returns;
healing the fault, `down` and `clean` end it by its PID.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import asdict

from mrcemu import rundir
from mrcemu.errors import MrcemuError
from mrcemu.fabric import bpf, children
from mrcemu.fabric.servers import Servers, of_running
from mrcemu.topology import Layout
from mrcemu.topology.addressing import Kind, host_address
from mrcemu.topology.faults import (
    CARRIER_KINDS,
    DROP_KINDS,
    ROUTED_AROUND,
    Fault,
    check,
    path_target,
    routed_around,
    targets,
)
from mrcemu.topology.layout import Interface
from mrcemu.topology.paths import make_ev

# Where faults are logged, one JSON line each.
LOG = rundir.FAULT_LOG


def _active() -> dict[str, dict]:
    try:
        return json.loads(rundir.FAULTS.read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _save(active: dict[str, dict]) -> None:
    rundir.FAULTS.parent.mkdir(parents=True, exist_ok=True)
    rundir.FAULTS.write_text(json.dumps(active, indent=1))


def _log(event: str, fault: Fault) -> None:
    rundir.FAULT_LOG.parent.mkdir(parents=True, exist_ok=True)
    with rundir.FAULT_LOG.open("a") as f:
        f.write(json.dumps({"t": round(time.monotonic(), 6), "event": event,
                            **asdict(fault)}) + "\n")


def _servers() -> Servers:
    """The running fabric's servers: each fault is applied by its node's server's agent."""
    from mrcemu.fabric import state

    st = state.load_state()
    return of_running(st) if st else Servers()


def _switches(layout: Layout, fault: Fault) -> set[str]:
    """The switches whose drop rules `fault` is in (hosts send with AF_PACKET, which
    netfilter never sees)."""
    return {i.node for i in targets(layout, fault) if not i.node.startswith("h")}


def _sync_nft(layout: Layout, pids: dict[str, int], active: dict[str, dict],
              nodes: set[str]) -> None:
    """Rewrite the drop rules of the switches in `nodes` (those of a fault injected or
    healed: no other switch's rules changed) from every active gray/loss/host-loss
    fault; a switch left with none gets an empty chain."""
    rules: dict[str, list[tuple[str, str]]] = {}
    for d in active.values():
        f = Fault(**d)
        if f.kind not in DROP_KINDS:
            continue
        for i in targets(layout, f):
            if i.node not in nodes:
                continue
            pct = 100.0 if f.kind == "gray" else float(f.value or 0)
            # In parts per million: E9/E10's 0.1 % is no whole percent.
            ppm = round(pct * 10_000)
            if ppm <= 0:
                continue
            cond = "" if ppm >= 1_000_000 else f"numgen random mod 1000000 < {ppm} "
            rules.setdefault(i.node, []).append((i.name, cond))
    servers = _servers()
    for node in sorted(nodes):
        servers.call(servers.of(node), "nft", pid=pids[node], rules=rules.get(node, []))


def path_loss_key(layout: Layout, fault: Fault) -> bpf.PathLossKey:
    """The switch's match for a path-loss fault: its port, the pair's addresses on the
    plane (the inner header's, as the NICs send them) and the EV's plane and spine."""
    pt = path_target(layout, fault.target)
    (port,) = targets(layout, fault)
    return bpf.PathLossKey(port.mac, host_address(pt.plane, pt.src).packed,
                           host_address(pt.plane, pt.dst).packed,
                           make_ev(pt.plane, pt.spine, 0) >> 16)


def _restore(layout: Layout, pids: dict[str, int], ends: list[Interface]) -> None:
    """Both ends of every link that came back up get their addresses, neighbours and
    routes again (the kernel flushed them when the link went down), each by its
    server's agent."""
    devs: dict[str, set[str]] = {}
    for i in ends:
        devs.setdefault(i.node, set()).add(i.name)
        devs.setdefault(i.peer_node, set()).add(i.peer_name)
    servers = _servers()
    for server, nodes in servers.group(sorted(devs)).items():
        servers.call(server, "restore", topology=asdict(layout.topo),
                     devs={n: [pids[n], sorted(devs[n])] for n in nodes})


def _across_servers(layout: Layout, ends: list[Interface]) -> list[Interface]:
    """The ends, and the far end of each whose link crosses servers (`up --cluster`).
    Downing a veth's end takes its peer's carrier with it; a VXLAN port has no carrier,
    so its far end must go down itself, or its node (a host's NIC, a switch) never
    learns."""
    from mrcemu.fabric import state

    st = state.load_state()
    where = st.placement if st else {}
    if not where:
        return ends
    out = list(ends)
    names = {(i.node, i.name) for i in ends}
    for i in ends:
        if where.get(i.node) != where.get(i.peer_node) and (i.peer_node, i.peer_name) \
                not in names:
            (far,) = [x for x in layout.interfaces[i.peer_node] if x.name == i.peer_name]
            out.append(far)
            names.add((far.node, far.name))
    return out


def _set_carrier(layout: Layout, pids: dict[str, int], ends: list[Interface], up: bool) -> None:
    ends = _across_servers(layout, ends)
    servers = _servers()
    for server, nodes in servers.group(dict.fromkeys(i.node for i in ends)).items():
        servers.call(server, "carrier", up=up,
                     ends=[[pids[i.node], i.name] for i in ends if i.node in nodes])
    if up:
        _restore(layout, pids, ends)


def _set_rate(layout: Layout, pids: dict[str, int], i: Interface, mbps: float) -> None:
    servers = _servers()
    servers.call(servers.of(i.node), "set_rate", topology=asdict(layout.topo), node=i.node,
                 pid=pids[i.node], ifname=i.name, mbps=mbps)


def _path_loss(layout: Layout, fault: Fault, percent: float | None) -> int | None:
    """Set (or, with None, clear) a path loss on the server of the port it acts on;
    cleared, the packets it dropped."""
    key = path_loss_key(layout, fault)
    servers = _servers()
    (port,) = targets(layout, fault)
    return servers.call(servers.of(port.node), "path_loss", port_mac=key.port_mac,
                        src=key.src.hex(), dst=key.dst.hex(), ev_hi=key.ev_hi,
                        percent=percent)


def inject(layout: Layout, pids: dict[str, int], fault: Fault) -> Fault:
    """Apply `fault` now; returns it with `at` (and a flap's `pid`) filled in."""
    check(fault)
    active = _active()
    if fault.key in active:
        raise MrcemuError(f"{fault.kind} on {fault.target} is already active")
    ends = targets(layout, fault)
    if fault.kind == "flap":
        proc = children.spawn(
            [sys.executable, "-m", "mrcemu.fabric.inject", "flap", fault.target, "--period",
             str(fault.period), "--duty", str(fault.duty)],
            what=f"flap {fault.target}", log=rundir.LOGS / "flap.err")
        fault.pid = proc.pid
    if fault.kind in CARRIER_KINDS:
        _set_carrier(layout, pids, ends, up=False)
    elif fault.kind == "degrade":
        for i in ends:
            _set_rate(layout, pids, i, i.mbps * (fault.value or 0) / 100)
    elif fault.kind == "path-loss":
        _path_loss(layout, fault, fault.value or 0.0)
    if fault.kind in DROP_KINDS:
        active[fault.key] = asdict(fault)
        _sync_nft(layout, pids, active, _switches(layout, fault))
    # When it took effect: its carrier down, its rate set or its drop rules in. A time
    # taken before a slow rule went in would count packets sent before as sent into it.
    fault.at = time.monotonic()
    active[fault.key] = asdict(fault)
    _save(active)
    _log("inject", fault)
    if layout.topo.ecmp and fault.kind in ROUTED_AROUND:
        # An ECMP fabric's routing learns of it after its reconvergence delay (the
        # switch at a downed link's end stops using it at once: ignore_routes_with_
        # linkdown), then every leaf routes around it.
        children.spawn([sys.executable, "-m", "mrcemu.fabric.inject", "reconverge",
                        "--after", str(_reconvergence_s())],
                       what=f"reconverge around {fault.key}",
                       log=rundir.LOGS / "reconverge.err")
    return fault


def _reconvergence_s() -> float:
    """The fabric's routing reconvergence delay: the transport config's (the RoCE
    baseline's emulated one, slowed with the run)."""
    from mrcemu.fabric import state

    return state.require_state().transport().roce_reconvergence


def reconverge(layout: Layout, pids: dict[str, int]) -> frozenset[str]:
    """Every leaf of an ECMP fabric routes around the links the active faults broke
    (and over every link again once healed), each by its server's agent."""
    dead = routed_around(layout, active_faults())
    leaves = [n.name for n in layout.switches if n.kind is Kind.LEAF]
    servers = _servers()
    for server, nodes in servers.group(leaves).items():
        servers.call(server, "ecmp_routes", topology=asdict(layout.topo), dead=sorted(dead),
                     nodes={n: pids[n] for n in nodes})
    return dead


def _reconverge_after(delay: float) -> None:
    from mrcemu.fabric import state

    stopping: list[bool] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    _sleep_until(time.monotonic() + delay, stopping)
    if stopping:
        return
    st = state.require_state()
    dead = reconverge(Layout(st.topo()), st.nodes)
    with rundir.FAULT_LOG.open("a") as f:
        # The fault log's shape (kind, target) for every reader of it; `around` lists
        # the links routing now avoids.
        f.write(json.dumps({"t": round(time.monotonic(), 6), "event": "reconverged",
                            "kind": "reconverge", "target": "routing",
                            "around": sorted(dead)}) + "\n")


def heal(layout: Layout, pids: dict[str, int], key: str | None = None) -> list[Fault]:
    """Heal one active fault (by `kind:target`) or, with no key, every one."""
    active = _active()
    keys = list(active) if key is None else [key]
    healed = []
    for k in keys:
        if k not in active:
            raise MrcemuError(f"no active fault {k}; active: {', '.join(active) or 'none'}")
        f = Fault(**active.pop(k))
        if f.kind == "flap" and f.pid:
            children.stop(f.pid)
        if f.kind in CARRIER_KINDS or f.kind == "flap":
            _set_carrier(layout, pids, targets(layout, f), up=True)
        elif f.kind == "degrade":
            for i in targets(layout, f):
                _set_rate(layout, pids, i, i.mbps)
        elif f.kind == "path-loss":
            f.dropped = _path_loss(layout, f, None)
        if f.kind in DROP_KINDS:
            _sync_nft(layout, pids, active, _switches(layout, f))
        _save(active)
        _log("heal", f)
        healed.append(f)
    if layout.topo.ecmp and any(f.kind in ROUTED_AROUND for f in healed):
        reconverge(layout, pids)  # a link back up is routed over at once
    return healed


def active_faults() -> list[Fault]:
    return [Fault(**d) for d in _active().values()]


def _sleep_until(t: float, stopping: list[bool]) -> None:
    while not stopping and time.monotonic() < t:
        time.sleep(min(0.01, max(0.0, t - time.monotonic())))


def _flap(target: str, period: float, duty: float) -> None:
    from mrcemu.fabric import state

    st = state.require_state()
    layout = Layout(st.topo())
    fault = Fault("flap", target, period=period, duty=duty)
    ends = targets(layout, fault)
    stopping: list[bool] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    t = time.monotonic()
    try:
        while not stopping:
            _set_carrier(layout, st.nodes, ends, up=False)
            _log("flap-down", fault)
            t += period * duty
            _sleep_until(t, stopping)
            _set_carrier(layout, st.nodes, ends, up=True)
            _log("flap-up", fault)
            t += period * (1 - duty)
            _sleep_until(t, stopping)
    finally:
        try:
            _set_carrier(layout, st.nodes, ends, up=True)
        except MrcemuError:
            pass  # the fabric is already gone


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m mrcemu.fabric.inject")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("flap")
    f.add_argument("target")
    f.add_argument("--period", type=float, required=True)
    f.add_argument("--duty", type=float, required=True)
    r = sub.add_parser("reconverge")
    r.add_argument("--after", type=float, required=True)
    args = ap.parse_args()
    if args.cmd == "flap":
        _flap(args.target, args.period, args.duty)
    else:
        _reconverge_after(args.after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
