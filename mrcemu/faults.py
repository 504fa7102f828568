"""Fault injection on a running fabric: each fault is applied and healed by the same
object, and every action is logged with its time on the monotonic clock the NIC
daemons log with, so reports can line faults up with what the transports did.

Targets use the topology's names: a node (`p2s1`, `h3`), a link (`p2l0-p2s1`), a
host port (`h3-p2`) or a plane (`2`).

A flap is a small process of its own (`python -m mrcemu.faults flap ...`), so it keeps
flapping after `mrcemu fail` returns; healing the fault stops it by its PID.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from mrcemu.errors import MrcemuError
from mrcemu.fabric import rates, state
from mrcemu.topology import Layout
from mrcemu.topology.layout import Interface

KINDS = ("link-down", "gray", "loss", "degrade", "flap", "switch-down", "host-port-down",
         "plane-down")
LINK_KINDS = ("link-down", "gray", "loss", "degrade", "flap")
ALL_SPINES = "all-spines"  # loss: every spine port, i.e. each cross-leaf path once
CARRIER_KINDS = ("link-down", "switch-down", "host-port-down", "plane-down")
FAULTS = state.RUN_DIR / "faults.json"
LOG = state.RUN_DIR / "logs" / "faults.jsonl"
NFT_TABLE = "mrcemu_faults"


@dataclass
class Fault:
    kind: str
    target: str
    value: float | None = None  # percent, for loss and degrade
    one_way: bool = False  # gray: only the direction from the link's first node
    at: float = field(default_factory=time.monotonic)
    period: float | None = None  # flap: seconds per down+up cycle
    duty: float | None = None  # flap: fraction of the period the link is down
    pid: int | None = None  # flap: the flapping process

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.target}"


def targets(layout: Layout, fault: Fault) -> list[Interface]:
    """The interfaces a fault acts on, each seen from its own node; raises a clear
    error for a target the topology does not have."""
    t = fault.target
    if fault.kind == "loss" and t == ALL_SPINES:
        return [i for sw in layout.switches if sw.kind.name == "SPINE"
                for i in layout.interfaces[sw.name]]
    if fault.kind in ("loss", "gray") and t in layout.nodes and not t.startswith("h"):
        return list(layout.interfaces[t])  # every egress port of that switch
    if fault.kind in LINK_KINDS:
        link = layout.links_by_name.get(t)
        if link is None:
            extra = (f", a switch, or {ALL_SPINES}" if fault.kind == "loss" else
                     ", or a switch" if fault.kind == "gray" else "")
            raise MrcemuError(f"no link '{t}': links are named NODE-NODE, e.g. "
                              f"{layout.links[-1].name}{extra}")
        first = link.a if t.startswith(link.a.node + "-") else link.b
        other = link.b if first is link.a else link.a
        return [first] if fault.one_way else [first, other]
    if fault.kind == "switch-down":
        if t not in layout.nodes or t.startswith("h"):
            raise MrcemuError(f"no switch '{t}' (e.g. p3s1, p0l0)")
        return [i for i in layout.interfaces[t]]
    if fault.kind == "host-port-down":
        host, _, plane = t.partition("-p")
        ifs = [i for i in layout.interfaces.get(host, []) if i.name == t]
        if not ifs or not plane.isdigit():
            raise MrcemuError(f"no host port '{t}' (e.g. h0-p2)")
        return ifs
    if fault.kind == "plane-down":
        if not t.isdigit() or int(t) >= layout.topo.planes:
            raise MrcemuError(f"no plane '{t}': planes are 0..{layout.topo.planes - 1}")
        return [link.a for link in layout.links if link.a.plane == int(t)]
    raise MrcemuError(f"unknown fault kind '{fault.kind}': use one of {', '.join(KINDS)}")


def affects(layout: Layout, fault: Fault) -> Callable[[int, int, int], bool]:
    """Whether the data path of EV `ev` from host `src` to host `dst` crosses what the
    fault breaks (either direction). Reports use it to find the failed paths."""
    from mrcemu.topology.paths import ev_fields

    topo = layout.topo
    t = fault.target
    if fault.kind == "plane-down":
        return lambda s, d, ev: ev_fields(ev)[0] == int(t)
    if fault.kind == "host-port-down":
        host, plane = int(t.split("-p")[0][1:]), int(t.split("-p")[1])
        return lambda s, d, ev: ev_fields(ev)[0] == plane and host in (s, d)
    if fault.kind == "loss" and t == ALL_SPINES:
        return lambda s, d, ev: ev_fields(ev)[1] is not None
    if fault.kind == "switch-down" or t in layout.nodes:
        node = layout.nodes[t]
        if node.kind.name == "SPINE":
            return lambda s, d, ev: ev_fields(ev) == (node.plane, node.index)
        return lambda s, d, ev: ev_fields(ev)[0] == node.plane and node.index in (
            topo.leaf_of(s), topo.leaf_of(d))
    link = layout.links_by_name[t]
    a, b = layout.nodes[link.a.node], layout.nodes[link.b.node]
    if a.kind.name == "HOST" or b.kind.name == "HOST":
        host, leaf = (a, b) if a.kind.name == "HOST" else (b, a)
        return lambda s, d, ev: ev_fields(ev)[0] == leaf.plane and host.index in (s, d)
    leaf, spine = (a, b) if a.kind.name == "LEAF" else (b, a)
    return lambda s, d, ev: (ev_fields(ev) == (spine.plane, spine.index)
                             and leaf.index in (topo.leaf_of(s), topo.leaf_of(d)))


def _ip(pid: int, *args: str) -> None:
    r = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", *args], capture_output=True,
                       text=True)
    if r.returncode:
        raise MrcemuError(f"{' '.join(args[:4])}: {r.stderr.strip()[:300]}")


def _nft_rules(pid: int, rules: list[str]) -> None:
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


def _active() -> dict[str, dict]:
    try:
        return json.loads(FAULTS.read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _save(active: dict[str, dict]) -> None:
    FAULTS.parent.mkdir(parents=True, exist_ok=True)
    FAULTS.write_text(json.dumps(active, indent=1))


def _log(event: str, fault: Fault) -> None:
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("a") as f:
        f.write(json.dumps({"t": round(time.monotonic(), 6), "event": event,
                            **asdict(fault)}) + "\n")


def _sync_nft(layout: Layout, pids: dict[str, int], active: dict[str, dict],
              also: set[str]) -> None:
    """Rewrite the drop rules of every switch an active gray/loss fault touches, and of
    the switches in `also` (a healed fault's, which may now need none)."""
    rules: dict[str, list[str]] = {}
    for d in active.values():
        f = Fault(**d)
        if f.kind not in ("gray", "loss"):
            continue
        for i in targets(layout, f):
            if i.node.startswith("h"):
                continue  # hosts send with AF_PACKET, which netfilter never sees
            pct = 100 if f.kind == "gray" else int(f.value or 0)
            if pct <= 0:
                continue
            cond = "" if pct >= 100 else f"numgen random mod 100 < {pct} "
            rules.setdefault(i.node, []).append(f'oifname "{i.name}" {cond}drop')
    for node in set(rules) | also:
        _nft_rules(pids[node], rules.get(node, []))


def _restore(layout: Layout, pids: dict[str, int], ends: list[Interface]) -> None:
    """Both ends of every link that came back up get their addresses, neighbours and
    routes again (the kernel flushed them when the link went down)."""
    from mrcemu.fabric.netlink import restore
    from mrcemu.fabric.netns import iproute
    from mrcemu.topology.routes import tables

    tabs = tables(layout)
    devs: dict[str, set[str]] = {}
    for i in ends:
        devs.setdefault(i.node, set()).add(i.name)
        devs.setdefault(i.peer_node, set()).add(i.peer_name)
    for node, names in devs.items():
        with iproute(pids[node]) as ipr:
            restore(ipr, tabs[node], names)


def _set_carrier(layout: Layout, pids: dict[str, int], ends: list[Interface], up: bool) -> None:
    for i in ends:
        _ip(pids[i.node], "ip", "link", "set", i.name, "up" if up else "down")
    if up:
        _restore(layout, pids, ends)


def inject(layout: Layout, pids: dict[str, int], fault: Fault, topology: str = "") -> Fault:
    active = _active()
    if fault.key in active:
        raise MrcemuError(f"{fault.kind} on {fault.target} is already active")
    ends = targets(layout, fault)
    if fault.kind == "flap":
        if not fault.period or fault.period < 0.05 or not fault.duty or not 0 < fault.duty < 1:
            raise MrcemuError("flap needs --period (seconds, >= 0.05) and --duty (0 < x < 1)")
        proc = subprocess.Popen(
            [sys.executable, "-m", "mrcemu.faults", "flap", fault.target, "--period",
             str(fault.period), "--duty", str(fault.duty), "--topology", topology],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(LOG.parent / "flap.err", "a"), start_new_session=True)
        fault.pid = proc.pid
    if fault.kind in CARRIER_KINDS:
        for i in ends:
            _ip(pids[i.node], "ip", "link", "set", i.name, "down")
    elif fault.kind == "degrade":
        if not fault.value or not 0 < fault.value <= 100:
            raise MrcemuError("degrade needs a percentage of the rate, 0 < x <= 100")
        for i in ends:
            rates.set_port_rate(layout, pids, i.node, i.name, i.mbps * fault.value / 100)
    elif fault.kind == "loss" and (fault.value is None or not 0 <= fault.value <= 100):
        raise MrcemuError("loss needs a percentage, 0..100")
    fault.at = time.monotonic()
    active[fault.key] = asdict(fault)
    if fault.kind in ("gray", "loss"):
        _sync_nft(layout, pids, active, set())
    _save(active)
    _log("inject", fault)
    return fault


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
            stop_flapper(f.pid)
        if f.kind in CARRIER_KINDS or f.kind == "flap":
            _set_carrier(layout, pids, targets(layout, f), up=True)
        elif f.kind == "degrade":
            for i in targets(layout, f):
                rates.set_port_rate(layout, pids, i.node, i.name, i.mbps)
        if f.kind in ("gray", "loss"):
            _sync_nft(layout, pids, active, {i.node for i in targets(layout, f)
                                             if not i.node.startswith("h")})
        _save(active)
        _log("heal", f)
        healed.append(f)
    return healed


def active_faults() -> list[Fault]:
    return [Fault(**d) for d in _active().values()]


def stop_flapper(pid: int, timeout: float = 5.0) -> None:
    """End a flapping process by its PID (it leaves the link up as it exits)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if not os.path.exists(f"/proc/{pid}") or _zombie(pid):
            return
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def stop_all_flappers() -> None:
    for d in _active().values():
        if d.get("kind") == "flap" and d.get("pid"):
            stop_flapper(d["pid"])


def _flap(target: str, period: float, duty: float, topology: str) -> None:
    from mrcemu.topology import load

    st = state.require_state()
    layout = Layout(load(topology or st.topology))
    fault = Fault("flap", target, period=period, duty=duty, pid=os.getpid())
    ends = targets(layout, fault)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    t = time.monotonic()
    try:
        while not stopping:
            _set_carrier(layout, st.nodes, ends, up=False)
            _log("flap-down", fault)
            t += period * duty
            while not stopping and time.monotonic() < t:
                time.sleep(min(0.01, max(0.0, t - time.monotonic())))
            _set_carrier(layout, st.nodes, ends, up=True)
            _log("flap-up", fault)
            t += period * (1 - duty)
            while not stopping and time.monotonic() < t:
                time.sleep(min(0.01, max(0.0, t - time.monotonic())))
    finally:
        try:
            _set_carrier(layout, st.nodes, ends, up=True)
        except MrcemuError:
            pass  # the fabric is already gone


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m mrcemu.faults")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("flap")
    f.add_argument("target")
    f.add_argument("--period", type=float, required=True)
    f.add_argument("--duty", type=float, required=True)
    f.add_argument("--topology", default="")
    args = ap.parse_args()
    _flap(args.target, args.period, args.duty, args.topology)
    return 0


if __name__ == "__main__":
    sys.exit(main())
