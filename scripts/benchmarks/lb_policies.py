"""`make bench`, section "Load-balancing policies": each policy on the
degraded-spine permutation, clean and degraded, beside uet-htsim's figures."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

from benchmarks.common import fid, run_report
from benchmarks.nscc_reference import CLEAN, SLOWDOWN, SLOWED, slowed_share

TITLE = "Load-balancing policies on a degraded spine"

POLICIES = ("mrc", "bitmap", "reps", "reps_ack", "oblivious")
# uet-htsim at 40ccb05, NSCC with trimming, 8 hosts, 2 leaves, 4 spines, one spine at
# 25 %, a cross-leaf permutation: job degraded / clean (uet-htsim's shape). It has no MRC profile.
# Its REPS recycles one EV an ACK, an ACK every 16 KiB (4 packets): `reps_ack` is that;
# `reps` recycles every packet's.
HTSIM = {"bitmap": 1.30, "reps_ack": 1.93, "oblivious": 2.65}
BOUND = 4 / (3 + 0.25)  # four spines a plane, one at a quarter
# Active EVs a path: mrcemu's default, one (a plane's set is its 4 paths); and 15, about
# uet-htsim's 64 EVs over its 4 spines, so that a sweep of a plane's set spans about a
# round trip as the reference's does (40 packets a plane a round trip here).
EV_SETS = ((1, "one EV a path (mrcemu's default: 4 a plane)"),
           (15, "15 EVs a path (60 a plane, as uet-htsim's 64 over 4 spines)"))


def _spec(base: dict, per_path: int) -> dict:
    return {**base, "transport": {"load_balancing": list(POLICIES), "ev_per_path": per_path}}


def _raw(folder: Path, name: str) -> dict:
    with gzip.open(folder / "logs" / f"raw-mrc-{name}.json.gz") as f:
        return json.load(f)


def lb_policies() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    import yaml

    tables = []
    for per_path, what in EV_SETS:
        tables.append(f"**{what}** (`transport: {{ev_per_path: {per_path}}}`):\n\n"
                      + _table(per_path, yaml))
    return _intro() + "\n".join(tables)


def _table(per_path: int, yaml) -> str:  # noqa: ANN001 - the module
    got: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as d:
        for state, base in (("clean", CLEAN), ("degraded", SLOWED)):
            path = Path(d) / f"{state}.yaml"
            path.write_text(yaml.safe_dump(_spec(base, per_path)))
            out = Path(d) / state
            rep = run_report(str(path), str(out), SLOWDOWN)
            (folder,) = out.iterdir()
            got[state] = {p: (rep["transports"][f"mrc-{p}"], slowed_share(_raw(folder, p)))
                          for p in POLICIES}
    rows, why = [], []
    for p in POLICIES:
        for state in ("clean", "degraded"):
            v = got[state][p][0].get("fidelity") or {}
            if v and not v["ok"]:
                why.append(f"- `{p}`, {state}: not faithful: {'; '.join(v['reasons'])}\n")
        (mc, sc), (md, sd) = got["clean"][p], got["degraded"][p]
        ratio = mc["goodput_mbps"] / md["goodput_mbps"]
        ref = HTSIM.get(p)
        rows.append(
            f"| `{p}` | {mc['goodput_mbps']:.1f} | {md['goodput_mbps']:.1f} | "
            f"**{ratio:.2f}** | {f'{ref:.2f}' if ref else '-'} | "
            f"{f'{ratio / ref:.2f}' if ref else '-'} | {sc:.3f} | **{sd:.3f}** | "
            f"{md['trims']:,} | {md['rtos']} | {_recycled(md)} | {fid(mc.get('fidelity'))} / "
            f"{fid(md.get('fidelity'))} |")
    return ("| policy | clean, Mb/s | degraded, Mb/s | degraded / clean | htsim | ours / "
            "htsim | share on spine 1, clean | degraded | trims (degraded) | RTOs | "
            "recycled (degraded) | fidelity (clean / degraded) |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n" + ("\n" + "".join(why) if why else ""))


def _recycled(run: dict) -> str:
    """A REPS policy's share of choices that reused a good EV (the rest explored)."""
    c = run.get("counters", {})
    n = c.get("lb_recycled", 0) + c.get("lb_explored", 0)
    return f"{c.get('lb_recycled', 0) / n:.2f}" if n else "-"


def _intro() -> str:
    return (f"What it runs: Two `mrcemu run`s at "
            f"`--slowdown {SLOWDOWN}` of the cross-leaf permutation of the NSCC section "
            "(h0-h3 and h4-h7 pair off across the leaves and stream 1 MiB writes, four in "
            "flight, both ways for 3 s), clean and with the 16 leaf-spine links of spine 1 "
            "of every plane at a quarter of their rate; each run lists the five policies "
            "(`transport: {load_balancing: [...]}`), which run one after the other on one "
            "fabric and seed. Degraded / clean is the job's slowdown: clean goodput over "
            "degraded goodput (the same bytes a pair). uet-htsim's figures (NSCC "
            "with trimming, 8 hosts, 2 leaves, 4 spines, one at 25 %) have no MRC "
            "profile, and its REPS recycles one EV for each ACK of 16 KiB (four packets), "
            "as `reps_ack` does, where `reps` recycles every packet's; the capacity bound "
            f"is {BOUND:.2f}, and the slowed spines' share of the capacity 0.077. Twice: "
            "with mrcemu's EV set, and with one as large as the reference's. Recycled: of a "
            "REPS policy's choices, the share that reused an EV a good ack returned.\n\n")


run = lb_policies
