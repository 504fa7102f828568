#!/usr/bin/env python3
"""Regenerate the benchmarks: BENCHMARKS.json, and BENCHMARKS.md rendered from it. Every
section carries the command that measures it again, and its targets (scripts/benchmarks/
targets.py) with their thresholds and whether they were met; comparisons are ratios taken
side by side in the same run. Each section is a module of scripts/benchmarks/; this runs
them in order (`--only TEXT`: those whose module name or title has it; the others keep
what they had, with when, where and at which commit they were measured)."""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import sys

from benchmarks import SECTIONS
from benchmarks.common import ROOT, BenchError
from benchmarks.targets import measure
from figures import BENCH, bench_markdown


def _chosen(only: str, name: str, title: str) -> bool:
    """`--only a,b`: the sections whose module is one of them, or whose title has one."""
    words = [w.strip() for w in only.split(",") if w.strip()]
    return name in words or any(w.lower() in title.lower() for w in words
                                if w not in SECTIONS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--json", default=str(BENCH), help="the results file, read and rewritten")
    ap.add_argument("--only", default=None,
                    help="run only these sections: module names, or words of their "
                    "titles, separated by commas")
    args = ap.parse_args()
    import mrcemu.wire  # noqa: F401 - registers nothing, but fails early if broken
    from mrcemu.scenario.job import machine, source_commit

    # What measured it, taken before any section runs: a section may rewrite committed
    # result files (the paper's example), which would make the tree look modified.
    measured = {"date": datetime.date.today().isoformat(), "commit": source_commit(),
                "machine": machine()}
    results = ROOT / args.json
    doc = json.loads((results if results.exists() else BENCH).read_text())
    old = {s["module"]: s for s in doc["sections"]}
    sections = [old[n] for n in SECTIONS if n in old]
    for name in SECTIONS:
        mod = importlib.import_module(f"benchmarks.{name}")
        title, fn = mod.TITLE, mod.run
        if args.only and not _chosen(args.only, name, title):
            continue
        print(f"bench: {title} ...", file=sys.stderr, flush=True)
        try:
            text = fn()
        except BenchError as e:
            text = f"{e}\n"
        except Exception as e:  # noqa: BLE001 - one section's bug must not lose the others'
            print(f"bench: {name} failed: {e!r}", file=sys.stderr)
            continue
        try:
            targets = measure(name, text)
        except LookupError as e:  # kept, and the tests name the section until it is mended
            print(f"bench: {name}: {e}", file=sys.stderr)
            targets = []
        section = {"module": name, "title": title, "measured": {
            **measured, "date": datetime.date.today().isoformat(),
            "command": f"sudo make bench ONLY={name}"}, "markdown": text, "targets": targets}
        sections = [section if s["module"] == name else s for s in sections]
        if name not in {s["module"] for s in sections}:
            sections.append(section)
        sections.sort(key=lambda s: SECTIONS.index(s["module"]))
        _write(doc | {"sections": sections}, results, ROOT / args.out)
    _write(doc | {"sections": sections}, results, ROOT / args.out)
    print(f"bench: wrote {args.json} and {args.out}", file=sys.stderr)


def _write(doc: dict, results, out) -> None:
    """The results so far, after every section: a later one that fails loses nothing."""
    results.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    out.write_text(bench_markdown(doc))


if __name__ == "__main__":
    main()
