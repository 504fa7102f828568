"""`make bench`, section "Collisions in a synchronous step": `mrcemu study collisions` at
8, 16 and 32 hosts, into the committed results file its docs page is generated from
(docs/assets/study/)."""

from __future__ import annotations

import os

from figures import collisions_buckets, collisions_table, collisions_verdict

from benchmarks.common import ROOT, study_section

TITLE = "Collisions in a synchronous step"
OUT = ROOT / "docs" / "assets" / "study"
HOSTS = "8,16,32"


def run() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    doc = study_section("collisions", HOSTS, OUT)
    return describe(doc["collisions"], doc.get("census"))


def describe(c: dict, census: dict | None) -> str:
    sizes = c["sizes"]
    from mrcemu.study.collisions import falls, spread

    mrc_spread = spread([s["transports"]["mrc"]["efficiency_mean"] for s in sizes])
    roce_falls = falls([s["transports"]["roce-1qp"]["efficiency_mean"] for s in sizes])
    inside = {s["hosts"]: all(e["inside"] for e in
                              s["transports"]["roce-1qp"].get("expected", {}).values())
              for s in sizes}
    minutes = sum(s["seconds"] for s in sizes) / 60
    return (f"What it runs: `mrcemu study collisions --hosts {HOSTS}` (written to "
            "docs/assets/study/study.json): at each size, MRC on the multi-plane fabric "
            "and RoCE on its one-plane ECMP twin, each first as a lone cross-leaf flow "
            f"(its yardstick), then {c['steps']} steps of cross-leaf permutations (a step "
            "ends when its last flow does), RoCE at 1 and 4 QPs a pair; every write "
            "bandwidth-bound. Each run at `auto`'s pick, run again slower while not "
            f"faithful. The whole study took {minutes:.0f} minutes here.\n\n"
            + collisions_table(c, census) + "\n" + collisions_verdict(c) + "\n\n"
            + f"MRC's step efficiency across sizes: at most **{mrc_spread:.3f}** of its mean "
            "away from it.\n\n"
            + f"RoCE with one QP a pair, its step efficiency falling with every size: "
            f"**{'yes' if roce_falls else 'no'}**.\n\n"
            + "Flows by what they got of a lone flow's rate:\n\n" + collisions_buckets(c)
            + "\nOne-QP RoCE flows in every bucket inside the 95 % band of a uniform hash "
            "under equal shares, at 16 hosts (the paper's appendix testbed): "
            f"**{'yes' if inside.get(16) else 'no'}**.\n")
