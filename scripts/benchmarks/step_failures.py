"""`make bench`, section "A failure inside a synchronous step": `mrcemu study failures` at
8 and 16 hosts, into the committed results file its docs page is generated from
(docs/assets/study/)."""

from __future__ import annotations

import os

from figures import failures_table, failures_verdict

from benchmarks.common import ROOT, study_section

TITLE = "A failure inside a synchronous step"
OUT = ROOT / "docs" / "assets" / "study"
HOSTS = "8,16"


def run() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    doc = study_section("failures", HOSTS, OUT)
    return describe(doc["failures"])


def describe(c: dict) -> str:
    from mrcemu.study.failures import KINDS, TRANSPORTS, grows

    worst = [max(r["summary"][k]["extra_rtts_max"] or 0.0 for k in KINDS)
             for s in c["sizes"] for r in s["runs"] if r["transport"] == "mrc"]
    minutes = sum(s["seconds"] for s in c["sizes"]) / 60
    missing = [f"{s['hosts']} hosts {t}" for s in c["sizes"] for t in TRANSPORTS
               if t not in {r["transport"] for r in s["runs"]}]
    return (f"What it runs: `mrcemu study failures --hosts {HOSTS}` (written to "
            "docs/assets/study/study.json): at each size, MRC on the multi-plane fabric and "
            f"RoCE with one QP a pair on its ECMP twin, {c['trials']} trials each. A trial "
            "runs a cross-leaf permutation three times; inside the second, at a random moment, a "
            "random leaf-spine link goes down (or gray, in turn) and heals when the step "
            "ends; a third run follows, healed. The extra time is the faulted step's over "
            "the first run's (its twin), and the step after's too. Each run at "
            "`auto`'s pick, run again slower while not faithful. The whole study took "
            f"{minutes:.0f} minutes here"
            + (f"; it was stopped before {', '.join(missing)}, which it does not measure"
               if missing else "") + ".\n\n"
            + failures_table(c) + "\n" + failures_verdict(c) + "\n\n"
            + "MRC's worst extra step time level across sizes (not growing with each): "
            f"**{'no' if grows(worst) else 'yes'}**.\n")
