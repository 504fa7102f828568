"""What the fabric itself did over one run: every switch port's counters, the drops per
reason, and the EVs a transport retired where nothing was dropped. Pure: computed from
the counters the runner read before and after the run (`runner.fabric_counters`).

A retirement says "a packet on this path was lost". Where no port on the path (either
way) dropped anything over the run and no fault acted on it, the path lost nothing: the
retirement was false, and the report lists it.
"""

from __future__ import annotations

from mrcemu.topology import Layout, faults
from mrcemu.topology.paths import ev_fields, is_ecmp_ev, path_label, paths

# A switch port's counters as a report gives them: name in the report <- its program's.
SWITCH_COUNTERS = {"packets": "packets", "marked": "ecn_marked", "trimmed": "trimmed",
                   "dropped_buffer": "dropped"}
# Why a packet was dropped in the fabric: the switch program's buffer, a port's queue
# (its root qdisc), the device itself (a veth whose peer's backlog was full, a link down),
# a fault's drop rule (gray, loss, host-loss: nftables), or a path-loss fault.
DROP_REASONS = ("buffer", "qdisc", "link", "fault", "path_loss")
KERNEL_REASONS = ("qdisc", "link", "fault")
RETIRED = "ASSUMED_BAD"


def _delta(after: dict, before: dict, key: str) -> int:
    return max(0, int(after.get(key, 0)) - int(before.get(key, 0)))


def port_counters(raw: dict, layout: Layout) -> dict[str, dict[str, int]]:
    """Each port's counters over the run, by port name: every switch port's program
    counters and kernel drops, and each host port's kernel drops."""
    before, after = raw["fabric_before"], raw["fabric_after"]
    out: dict[str, dict[str, int]] = {}
    for node, ifaces in layout.interfaces.items():
        switch = not node.startswith("h")
        for i in ifaces:
            row = ({k: _delta(after["switch"].get(i.mac, {}), before["switch"].get(i.mac, {}),
                              src) for k, src in SWITCH_COUNTERS.items()} if switch else {})
            ka, kb = after["kernel"].get(i.name, {}), before["kernel"].get(i.name, {})
            for reason in KERNEL_REASONS:
                row[f"dropped_{reason}"] = _delta(ka, kb, reason)
            out[i.name] = row
    return out


def fabric(raw: dict, layout: Layout) -> dict:
    """The fabric's figures over the run: marks, trims and drops per reason summed, the
    ports that dropped anything, every port's counters, and the false retirements. Empty
    where the run read no counters (a run recorded before they were)."""
    if not raw.get("fabric_before") or not raw.get("fabric_after"):
        return {}
    ports = port_counters(raw, layout)
    dropped = {r: sum(p.get(f"dropped_{r}", 0) for p in ports.values())
               for r in DROP_REASONS[:-1]}
    dropped["path_loss"] = sum(f.get("dropped") or 0 for f in raw["faults"])
    dropping = sorted(n for n, p in ports.items()
                      if any(p.get(f"dropped_{r}") for r in DROP_REASONS))
    false = false_retirements(raw, layout, set(dropping))
    return {"marked": sum(p.get("marked", 0) for p in ports.values()),
            "trimmed": sum(p.get("trimmed", 0) for p in ports.values()),
            "dropped": dropped, "ports_that_dropped": dropping,
            "false_retirements": len(false), "false_retirement_list": false,
            "ports": ports}


def _egress(layout: Layout) -> dict[tuple[str, str], str]:
    """(node, next node) -> the port a packet leaves `node` by toward it."""
    return {(i.node, i.peer_node): i.name for ifs in layout.interfaces.values() for i in ifs}


def path_ports(layout: Layout, src: int, dst: int, ev: int,
               egress: dict[tuple[str, str], str] | None = None) -> set[str] | None:
    """Every port EV `ev` of src -> dst crosses, both ways (its data one way, the
    acknowledgements of what it carried the other); None for a path the fabric hashes
    (an ECMP flow's spine is the switches' choice)."""
    if is_ecmp_ev(ev):
        return None
    plane, spine = ev_fields(ev)
    hops = next((p.hops for p in paths(layout.topo, src, dst)
                 if (p.plane, p.spine) == (plane, spine)), None)
    if hops is None:
        return None
    egress = egress if egress is not None else _egress(layout)
    return {egress[(x, y)] for a, b in zip(hops, hops[1:], strict=False)
            for x, y in ((a, b), (b, a))}


def false_retirements(raw: dict, layout: Layout, dropping: set[str]) -> list[dict]:
    """Each EV retirement (to ASSUMED_BAD) in the run on a path where no port dropped
    anything over the run and no fault of the run that loses packets acted (a slowed
    link loses none itself): when, which pair and path, and the reason the transport
    gave."""
    hit = [faults.affects(layout, faults.Fault(r["kind"], r["target"],
                                               one_way=r["spec"].get("one_way", False)))
           for r in raw["faults"]
           if r.get("t_inject") is not None and r["kind"] not in faults.LOSSLESS_KINDS]
    egress = _egress(layout)
    out = []
    for h, tr in raw["traces"].items():
        for c in tr["conns"]:
            if c["transport"] != raw["transport"]:
                continue
            src, dst = int(h), int(c["peer"])
            for t, ev, _old, new, why, *_ in c["ev_changes"]:
                if new != RETIRED or t < raw["t0"] or any(f(src, dst, ev) for f in hit):
                    continue
                ports = path_ports(layout, src, dst, ev, egress)
                if ports is None or ports & dropping:
                    continue
                out.append({"t_s": round(t - raw["t0"], 4), "src": f"h{src}",
                            "dst": f"h{dst}", "ev": f"0x{ev & 0xFFFFFFFF:08x}",
                            "path": path_label(ev), "why": why})
    return sorted(out, key=lambda x: x["t_s"])
