"""`make bench`, section "ECMP fabric: RoCE flows hashed over spines, and one QP's share"."""

from __future__ import annotations

import json
import os

from benchmarks.common import BenchError, fid, mrcemu

TITLE = "ECMP fabric: RoCE flows hashed over spines, and one QP's share"
# Each leaf-0 QP's write when they run together: about 25 of the fabric's bandwidth-delay
# products, so that DCQCN's settling is a small part of it.
TOGETHER = 32 << 20


def _spine_packets() -> dict[str, int]:
    r = mrcemu("stats", "--json")
    if r.returncode:
        raise BenchError(f"`mrcemu stats` failed: {r.stderr.strip()[-300:]}")
    d = json.loads(r.stdout)
    return {s: sum(p["packets"] for p in ports.values()) for s, ports in sorted(d.items())
            if "s" in s[2:]}


def ecmp_spread() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    from mrcemu.fabric.launch import launch, stop
    from mrcemu.fabric.state import load_state
    from mrcemu.nic import transfer
    from mrcemu.topology import load

    # Slowed as `mrcemu paper` runs it (paper/run.py): its one 160 Mb/s port at the pace
    # of default's ports slowed 4 times, 5 Mb/s. At 4 (40 Mb/s), before the scale model
    # and with RoCE's window a fixed 16 packets, the runs were faithful; with the window
    # carrying the bandwidth-delay product, the NICs fell behind (2026-11-26).
    k = 32
    flows = [(a, a + 4) for a in range(4)] + [(a + 4, a) for a in range(4)]
    cross = flows[:4]  # leaf 0 to leaf 1, at once
    mrcemu("clean")
    launch(load("ecmp").slowed(k), slowdown=k)
    try:
        topo = load_state().topo()
        placed, rows = {}, []
        for a, b in flows:
            before = _spine_packets()
            (res,), _ = transfer.run_many(topo, [(a, b, 1 << 20, "roce", 1)], 300)
            delta = {sp: n - before[sp] for sp, n in _spine_packets().items()}
            placed[(a, b)] = max(delta, key=lambda sp: delta[sp])
            rows.append(f"| h{a}->h{b} | " + " | ".join(str(delta[sp]) for sp in delta)
                        + f" | {res['packets_per_path']['p0-ecmp']} | {placed[(a, b)]} |")
        spines = list(delta)
        together, _ = transfer.run_many(topo, [(a, b, TOGETHER, "roce", 1) for a, b in cross],
                                        1200)
    finally:
        stop()
    port = topo.host_link_mbps
    on = {sp: sum(1 for f in cross if placed[f] == sp) for sp in spines}
    share_rows = []
    carried: dict[str, float] = {}
    for (a, b), r in zip(cross, together, strict=True):
        carried[placed[(a, b)]] = carried.get(placed[(a, b)], 0.0) + r["goodput_mbps"] / port
        n = on[placed[(a, b)]]
        share_rows.append(f"| h{a}->h{b} | {placed[(a, b)]} | {n} | {1 / n:.2f} | "
                          f"{r['goodput_mbps'] * k:.1f} | {r['goodput_mbps'] / port:.2f} | "
                          f"{fid(r.get('fidelity'))} |")
    shared = [f"| {sp} | {on[sp]} | **{carried[sp]:.3f}** |" for sp in spines if on[sp] > 1]
    return ("What it runs: `ecmp` (one plane, a 160 Mb/s port a "
            f"host, leaves hashing each flow over 4 spines, one fixed hash seed) slowed {k} "
            "times. First each of 8 RoCE QPs (1 QP a pair, 1 MiB) alone: the packets each "
            "spine's BPF counters counted during it (its data, and the ACKs coming back, "
            "which hash on their own), against the QP's data packets. Then the 4 leaf-0 "
            f"to leaf-1 QPs at once, {TOGETHER >> 20} MiB each: each QP's goodput (full "
            "speed) against its port, beside the share its spine's collisions leave it "
            "(1 / the QPs hashed onto that spine), in this run; and what the QPs hashed "
            "onto one spine carried together, as a share of that spine's link (DCQCN "
            "shares it; a link it kept full would be 1).\n\n"
            "| QP | " + " | ".join(spines) + " | its data packets | its spine |\n"
            "|---|" + "---|" * len(spines) + "---|---|\n" + "\n".join(rows)
            + "\n\n| QP (together) | spine | QPs on it | collision share | goodput (Mb/s) "
              "| share of its port | fidelity |\n|---|---|---|---|---|---|---|\n"
            + "\n".join(share_rows) + "\n\n| spine shared | QPs on it | carried together "
              "(share of the link) |\n|---|---|---|\n" + "\n".join(shared) + "\n")


run = ecmp_spread
