"""`make bench`, section "ECMP's hash, counted": `mrcemu study census` at every size, into
the committed results file its docs page is generated from (docs/assets/study/)."""

from __future__ import annotations

import json
import os

from figures import census_fields, census_table

from benchmarks.common import ROOT, BenchError, mrcemu

TITLE = "ECMP's hash, counted"
OUT = ROOT / "docs" / "assets" / "study"


def run() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    mrcemu("clean")
    r = mrcemu("study", "census", "--out", str(OUT), timeout=3600)
    if r.returncode:
        raise BenchError(f"`mrcemu study census` failed: {r.stderr.strip()[-300:]}")
    doc = json.loads((OUT / "study.json").read_text())["census"]
    return ("What it runs: `mrcemu study census` (written to docs/assets/study/study.json): "
            "at each size, the ECMP fabric up, then 1,000 draws, each a cross-leaf "
            "permutation whose QPs all get fresh numbers, so the flow label their NIC "
            "derives from them is new; one RoCE packet a QP, and every switch port's "
            f"counters read before and after. The kernel hashes {doc['hashed']}. "
            "The fit takes one uplink a leaf a draw (the spine turning with the draw), so "
            "its loads are independent; the busiest uplink is each leaf's, every draw. "
            "A draw is recounted when a hop's count is off (another packet in the fabric).\n\n"
            + census_table(doc) + "\nWhat the hash reads: QPs that took another uplink "
            "when one thing alone was changed (in brackets: how many a field the hash reads "
            "moves).\n\n" + census_fields(doc))
