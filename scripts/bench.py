#!/usr/bin/env python3
"""Regenerate the benchmarks: BENCHMARKS.json, and BENCHMARKS.md rendered from it. Every
figure carries the command that measured it; comparisons are ratios taken side by side
in the same run. Each section is a module of scripts/benchmarks/; this runs them in order
(`--only TEXT`: those whose title has it; the others keep what they had, with when and
at which commit they were measured)."""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import sys

from benchmarks import SECTIONS
from benchmarks.common import ROOT, BenchError
from figures import BENCH, bench_markdown


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--json", default=str(BENCH), help="the results file, read and rewritten")
    ap.add_argument("--only", default=None, help="run only sections whose title has this")
    args = ap.parse_args()
    import mrcemu.wire  # noqa: F401 - registers nothing, but fails early if broken
    from mrcemu.scenario.job import machine, source_commit

    # What measured it, taken before any section runs: a section may rewrite committed
    # result files (the paper's example), which would make the tree look modified.
    measured = {"date": datetime.date.today().isoformat(), "commit": source_commit(),
                "machine": machine()}
    results = ROOT / args.json
    doc = json.loads((results if results.exists() else BENCH).read_text())
    old = {s["title"]: s for s in doc["sections"]}
    sections = []
    for name in SECTIONS:
        mod = importlib.import_module(f"benchmarks.{name}")
        title, fn = mod.TITLE, mod.run
        if args.only and args.only.lower() not in title.lower():
            if title in old:
                sections.append(old[title])
            continue
        print(f"bench: {title} ...", file=sys.stderr, flush=True)
        try:
            text = fn()
        except BenchError as e:
            text = f"{e}\n"
        sections.append({"title": title, "measured": {**measured,
                         "date": datetime.date.today().isoformat()}, "markdown": text})
    doc["sections"] = sections
    results.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    (ROOT / args.out).write_text(bench_markdown(doc))
    print(f"bench: wrote {args.json} and {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
