"""`make bench`, section "The full paper at --slowdown auto": `mrcemu paper` as a
user runs it, every experiment at the pace `auto` picks for it (and again a step slower
where a run came out not faithful), timed. The run becomes the committed example
(`mrcemu/paper/example`) that README.md's and docs/'s paper figures are written from."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.common import MRCEMU, ROOT, BenchError

TITLE = "The full paper at --slowdown auto"
EXAMPLE = ROOT / "mrcemu" / "paper" / "example"
TIMEOUT_S = 6 * 3600
TARGET_MIN = 30  # at most 30 minutes, and no run not faithful


def run(ids: tuple[str, ...] = ()) -> str:
    """The section; `ids`, some experiments only, for trying the section itself out."""
    with tempfile.TemporaryDirectory(prefix="mrcemu-bench-paper-") as tmp:
        out = Path(tmp)
        t0 = time.monotonic()
        # its progress goes to the terminal: it is the longest section by far
        r = subprocess.run([*MRCEMU, "paper", *ids, "--out", str(out)], stdout=sys.stderr,
                           timeout=TIMEOUT_S, check=False)
        wall = time.monotonic() - t0
        if r.returncode or not (out / "paper.json").exists():
            raise BenchError(f"`mrcemu paper` failed (exit {r.returncode}); no figures")
        doc = json.loads((out / "paper.json").read_text())
        if doc.get("interrupted"):
            raise BenchError(f"`mrcemu paper` stopped in {doc['interrupted']}; no figures")
        keep_example(out)
        return render(doc, run_times(out / "runs"), wall)


def run_times(runs: Path) -> dict[str, tuple[int, float]]:
    """Per experiment: how many runs it made (reruns and contrasts included) and their
    wall time together, from each run's report (its folder is `STAMP-ID[-LABEL]`)."""
    out: dict[str, list[float]] = defaultdict(list)
    for rep in sorted(runs.glob("*/report.json")):
        name = rep.parent.name.split("-", 2)[2]
        out[name.split("-")[0]].append(json.loads(rep.read_text())["wall_clock_s"])
    return {k: (len(v), sum(v)) for k, v in out.items()}


def _ks(runs: list[dict]) -> str:
    return ", ".join(f"{t['slowdown']:g}" for t in runs)


def _slowdowns(row: dict) -> str:
    """The slowdown an experiment's runs kept, and the ones a rerun replaced: an
    experiment's own, or a sweep's pick with each of its rerun runs named."""
    k = row.get("slowdown")
    kept = f"{k:g}" if isinstance(k, (int, float)) else str(k)
    r = row.get("reruns") or []
    if isinstance(r, dict):  # a sweep: per label, its replaced runs then the one kept
        return "; ".join([kept, *(f"{label} at {v[-1]['slowdown']:g} (after {_ks(v[:-1])})"
                                  for label, v in r.items())])
    return kept + (f" (after {_ks(r)})" if r else "")


def render(doc: dict, times: dict[str, tuple[int, float]], wall: float) -> str:
    from mrcemu.paper.run import tally, verdict

    rows = ["| experiment | slowdown (auto) | runs | their wall time | faithful | verdict |",
            "|---|---|---|---|---|---|"]
    for r in doc["experiments"]:
        n, s = times.get(r["id"], (0, 0.0))
        faithful = {True: "yes", False: "**no**", None: "-"}[r.get("faithful")]
        rows.append(f"| {r['id']} | {_slowdowns(r)} | {n} | {s / 60:.1f} min | {faithful} "
                    f"| {verdict(r)} |")
    minutes = wall / 60
    consistent, judged, unfaithful = tally(doc["experiments"])
    which = f" ({', '.join(unfaithful)})" if unfaithful else ""
    return (
        "What it runs: `mrcemu paper` at its default, "
        "`--slowdown auto`: each experiment at the slowdown auto picks for it (a sweep at "
        "the pick of its runs on the slowest ports, `ecmp`'s runs that many times its "
        "port's ratio), and a run that comes out not faithful again at the ladder's next "
        "step, twice at most. `make bench` commits this run as the example the docs' paper "
        "figures come from; rows measured again since replace their own there "
        "(docs/paper.md names each and its machine), so that example's tally can differ "
        "from this run's.\n\n"
        + "\n".join(rows) + "\n\n"
        f"A full `mrcemu paper` took **{minutes:.0f} minutes** (target: at most "
        f"{TARGET_MIN}, with every run faithful); experiments with a run not faithful: "
        f"**{len(unfaithful)}**{which}. "
        f"This run was consistent with the paper in {consistent} of the {judged} "
        "experiments judged. "
        "A run's wall time includes its fabric's bring-up and teardown; the runs' sum is "
        "less than the whole by the judging and plotting between them.\n")


def keep_example(out: Path) -> None:
    """The run's paper.json, paper.md and the plots docs/paper.md shows, as the committed
    example (`EXAMPLE`), replacing the one before."""
    pngs = {f"{p.parent.name}-{p.name}": p
            for p in [*out.glob("E*/goodput.png"), *out.glob("E*/busbw.png")]}
    shown = {p.name for p in EXAMPLE.glob("*.png")}
    if shown - set(pngs):
        raise BenchError(f"the run has no {', '.join(sorted(shown - set(pngs)))}, which "
                         "docs/paper.md shows; the example is kept as it was")
    for old in EXAMPLE.glob("*"):
        old.unlink()
    for name in ("paper.json", "paper.md"):
        shutil.copy(out / name, EXAMPLE / name)
    for flat in shown:
        shutil.copy(pngs[flat], EXAMPLE / flat)
