"""Fault injection on a running fabric: each fault is applied and healed by the same
object, and every action is logged with its time on the monotonic clock the NIC
daemons log with, so reports can line faults up with what the transports did.

Targets use the topology's names: a node (`p2s1`, `h3`), a link (`p2l0-p2s1`), a
host port (`h3-p2`) or a plane (`2`).
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import asdict, dataclass, field

from mrcemu.errors import MrcemuError
from mrcemu.fabric import rates, state
from mrcemu.topology import Layout
from mrcemu.topology.layout import Interface

KINDS = ("link-down", "gray", "loss", "degrade", "switch-down", "host-port-down", "plane-down")
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

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.target}"


def _ends(layout: Layout, fault: Fault) -> list[Interface]:
    """The interfaces a fault acts on, each seen from its own node."""
    t = fault.target
    if fault.kind in ("link-down", "gray", "loss", "degrade"):
        link = layout.links_by_name.get(t)
        if link is None:
            raise MrcemuError(f"no link '{t}': links are named NODE-NODE, e.g. "
                              f"{layout.links[-1].name}")
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
        for i in _ends(layout, f):
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


def inject(layout: Layout, pids: dict[str, int], fault: Fault) -> Fault:
    active = _active()
    if fault.key in active:
        raise MrcemuError(f"{fault.kind} on {fault.target} is already active")
    ends = _ends(layout, fault)
    if fault.kind in ("link-down", "switch-down", "host-port-down", "plane-down"):
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
        if f.kind in ("link-down", "switch-down", "host-port-down", "plane-down"):
            ends = _ends(layout, f)
            for i in ends:
                _ip(pids[i.node], "ip", "link", "set", i.name, "up")
            _restore(layout, pids, ends)
        elif f.kind == "degrade":
            for i in _ends(layout, f):
                rates.set_port_rate(layout, pids, i.node, i.name, i.mbps)
        if f.kind in ("gray", "loss"):
            _sync_nft(layout, pids, active, {i.node for i in _ends(layout, f)
                                             if not i.node.startswith("h")})
        _save(active)
        _log("heal", f)
        healed.append(f)
    return healed


def active_faults() -> list[Fault]:
    return [Fault(**d) for d in _active().values()]
