"""The README's scaling note: what a plane split and a rack split of the white paper's
fabric put on each server, from the code's own closed form (mrcemu/topology/scale.py,
checked against what `up --cluster` builds)."""

from __future__ import annotations

from mrcemu.topology.scale import PAPER, Fabric, Share, footprint


def table(f: Fabric, splits: list[tuple[str, int]]) -> str:
    cols = ("namespaces", "hosts", "veths", "vxlan", "routes", "switch_ports")
    head = ("split", "servers", "which server", "namespaces", "NIC daemons", "veth ends",
            "VXLAN ports", "routes", "switch-program ports")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for placement, n in splits:
        shares = footprint(f, n, placement)
        picks: list[tuple[str, Share]]
        if placement == "plane":
            picks = [("the hosts' (first)", shares[0]), ("each plane's", shares[1])]
        else:
            picks = [("the busiest", max(shares, key=lambda s: (s.namespaces, s.vxlan)))]
        for label, s in picks:
            rows.append(f"| {placement} | {n:,} | {label} | "
                        + " | ".join(f"{getattr(s, c):,}" for c in cols) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(f"{PAPER.hosts:,} hosts, {PAPER.planes} planes, {PAPER.leaves_per_plane} leaves "
          f"and {PAPER.spines_per_plane} spines a plane, {PAPER.links:,} links\n")
    print(table(PAPER, [("plane", PAPER.planes + 1), ("rack", PAPER.leaves_per_plane)]))
