"""`mrcemu paper`: run the white paper's experiments, judge each, and write paper.md,
paper.json and a folder per experiment (its report.json and its plot).

Each experiment is an ordinary `mrcemu run` of its scenario (`experiments.py`), slowed
to the pace this host runs faithfully; a run the fidelity monitor does not trust is
judged all the same, and its row says so.
"""

from __future__ import annotations

import datetime
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from mrcemu.errors import MrcemuError
from mrcemu.paper.experiments import BY_ID, EXPERIMENTS, Experiment
from mrcemu.scenario.model import Scenario, from_mapping
from mrcemu.scenario.pace import faithful, paced, tried_text, until_faithful, why_not
from mrcemu.slowdown import next_slowdown
from mrcemu.topology import Topology
from mrcemu.topology import latency as lat
from mrcemu.topology import load as load_topology

Ui = Callable[[str, dict], None]



def select(ids: list[str]) -> list[Experiment]:
    """The experiments named (all when none), in the paper's order; an unknown id is an
    error naming the ids there are."""
    from mrcemu.errors import MrcemuError

    unknown = [i for i in ids if i.upper() not in BY_ID]
    if unknown:
        raise MrcemuError(f"no experiment {', '.join(unknown)}: the ids are "
                          f"{', '.join(BY_ID)}")
    want = {i.upper() for i in ids}
    return [e for e in EXPERIMENTS if not want or e.id in want]


class Interrupted(Exception):
    """A job of the paper's was stopped (Ctrl-C, SIGTERM): no experiment after it runs."""


def _job(sc: Scenario, out: Path, ui: Ui, pace: dict | None = None) -> tuple[Path, dict]:
    """Run one scenario of an experiment; its folder and report. Interrupted if the user
    stopped it: its partial report is kept, and nothing after it starts."""
    from mrcemu.scenario.job import run as run_job

    folder = run_job(sc, out / "runs", ui, pace=pace)
    report = json.loads((folder / "report.json").read_text())
    if report.get("interrupted"):
        raise Interrupted(sc.name)
    return folder, report


def run(ids: list[str], out: Path, quick: bool, slowdown: float | str, ui: Ui,
        latency: bool = True) -> dict:
    """Run and judge each experiment of `ids` (all: every one) into `out`; paper.json and
    paper.md are written even when the user stops it (`interrupted`, with the experiments
    judged so far). `slowdown`: every run's, or `auto`: each experiment's own pick (its
    row says which)."""
    from mrcemu.scenario.job import machine, source_commit

    out.mkdir(parents=True, exist_ok=True)
    started, t_start = datetime.datetime.now(), time.monotonic()
    rows: list[dict[str, Any]] = []
    interrupted, current = None, ""
    try:
        for e in select(ids):
            current = e.id
            rows.append(_experiment(e, quick, slowdown, out, ui, latency))
    except Interrupted as stop:
        interrupted = str(stop)  # the run it landed in
    except KeyboardInterrupt:  # between runs, or a second Ctrl-C inside one
        interrupted = current
    default = load_topology("default")
    doc = {"quick": quick, "slowdown": slowdown,
           # when, where and at which commit it was measured, once for every figure below
           "started": started.isoformat(timespec="seconds"), "machine": machine(),
           "commit": source_commit(), "wall_clock_s": round(time.monotonic() - t_start, 1),
           # the built-in fabric's scale: the experiments' times below are full-speed
           "scale": lat.describe(default if latency else default.without_latency()),
           **({"interrupted": interrupted} if interrupted else {}),
           "experiments": rows}
    (out / "paper.json").write_text(json.dumps(doc, indent=1, default=str))
    (out / "paper.md").write_text(markdown(doc))
    return doc


def _experiment(e: Experiment, quick: bool, slowdown: float | str, out: Path, ui: Ui,
                latency: bool) -> dict[str, Any]:
    """Run one experiment (its scenario and contrast, or its sweep) and judge it: its row."""
    row: dict[str, Any] = {"id": e.id, "figure": e.figure, "paper": e.paper}
    if e.sweep is not None:
        _sweep(e, quick, slowdown, out, row, ui, latency)
        ui("judged", row)
        return row
    if e.scenario is None or e.measure is None:
        row.update(measured=None, consistent=None, reason=f"not run: {e.missing}")
        ui("skipped", row)
        return row
    full = from_mapping(e.scenario(quick), f"<paper {e.id}>", e.id).as_run(1.0, latency)
    ui("experiment", {"id": e.id, "description": full.description})
    first, pick = paced(full, slowdown, ui)
    folder, report, k, tried = until_faithful(
        e.id, first.slowdown, slowdown == "auto", ui,
        lambda k, rerun: _job(full.as_run(k), out, ui, rerun or pick))
    row["slowdown"] = k
    if tried:
        row["reruns"] = tried
    dest = out / e.id
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir()
    for name in ("report.json", "report.md", "goodput.png", "ev-states.png"):
        if (folder / name).exists():
            shutil.copy(folder / name, dest / name)
    if "mrc" not in report["transports"]:
        row.update(measured=None, consistent=False, reason="the run did not finish")
    else:
        measured, ok, why = e.measure(report, quick)
        row.update(measured=measured, consistent=ok, reason=why)
    if tried:
        row["reason"] += f" (run at {k:g} after {tried_text(tried)})"
    row["faithful"] = faithful(report)
    row["usid_engine"] = report.get("usid_engine")  # what performed the switches' End
    if not row["faithful"]:
        row["reason"] += (f" (the run was NOT faithful: {why_not(report)}; next: "
                          f"--slowdown {next_slowdown(k):g})")
    if e.contrast is not None and row["measured"] is not None:
        # at the experiment's own pace: the contrast is compared with its run
        _contrast(e, quick, k, dest, out, row, ui, latency)
    row["folder"] = e.id
    ui("judged", row)
    return row


def _sweep(e: Experiment, quick: bool, slowdown: float | str, out: Path,
           row: dict[str, Any], ui: Ui, latency: bool) -> None:
    """Run each of a sweep experiment's scenarios, keep each report, judge them together
    and draw the figure."""
    from mrcemu.paper.experiments import sweep_table
    from mrcemu.paper.plots import sweep as plot_sweep

    assert e.sweep is not None
    dest = out / e.id
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    reports: dict[str, dict] = {}
    unfaithful: list[str] = []
    capacity = None
    port_mbps = min(from_mapping(m, "<sweep>", "x").topology.host_link_mbps
                    for _, m in e.sweep.runs(quick))
    auto = slowdown == "auto"
    reruns: dict[str, list[dict]] = {}
    if auto:  # the most any run on the slowest ports needs
        slowdown = max(paced(from_mapping(m, "<sweep>", "x").as_run(1.0, latency), "auto",
                             ui)[0].slowdown
                       for _, m in e.sweep.runs(quick)
                       if from_mapping(m, "<sweep>", "x").topology.host_link_mbps == port_mbps)
    row["slowdown"] = slowdown
    for label, mapping in e.sweep.runs(quick):
        sc = from_mapping(mapping, f"<paper {e.id} {label}>", f"{e.id}-{label}")
        capacity = capacity or sc.topology.planes * sc.topology.host_link_mbps
        # Every run's ports at the pace of the slowest's: `ecmp`'s one port is 8 times
        # `default`'s plane port, and at one slowdown its NICs' timers must keep 8 times
        # closer to time (the fidelity verdict's limits scale with the port's packet
        # time). Each report says its slowdown, and its figures are read at full speed.
        ratio = sc.topology.host_link_mbps / port_mbps
        ui("experiment", {"id": f"{e.id} {label}", "description": sc.description})
        folder, reports[label], k, tried = until_faithful(
            f"{e.id} {label}", float(slowdown), auto, ui,
            # a rerun's pace names the slowdown its ports ran at, as the report's own does
            lambda k, rerun, sc=sc, ratio=ratio: _job(sc.as_run(k * ratio, latency), out, ui,
                                                      rerun and {**rerun, "slowdown": k * ratio}))
        shutil.copy(folder / "report.json", dest / f"report-{label}.json")
        if tried:
            reruns[label] = [*tried, {"slowdown": k}]
        if not faithful(reports[label]):
            unfaithful.append(label)
    measured, ok, why = e.sweep.measure(reports, quick)
    row.update(measured=measured, consistent=ok, reason=why, folder=e.id,
               faithful=not unfaithful, **({"reruns": reruns} if reruns else {}))
    if reruns:
        row["reason"] += " (" + "; ".join(f"{label} run at {r[-1]['slowdown']:g} after "
                                          f"{tried_text(r[:-1])}"
                                          for label, r in reruns.items()) + ")"
    if unfaithful:
        row["reason"] += f" (runs NOT faithful: {', '.join(unfaithful)})"
    if e.sweep.busbw_figure:
        plot_sweep(sweep_table(reports, quick), dest / "busbw.png",
                   f"{e.id} (Fig. {e.figure}): {e.paper.split(':')[0]}", capacity or 0.0)


def contrast_topology(e: Experiment, topo: Topology, dest: Path) -> Path:
    """The experiment's topology with its contrast's changes, as a file a scenario names."""
    assert e.contrast is not None
    fields = {k: v for k, v in asdict(topo).items() if k not in ("name", "source")}
    path = dest / f"{topo.name}-{e.contrast.key.replace('_', '-')}.yaml"
    path.write_text(yaml.safe_dump({**fields, **e.contrast.topology}, sort_keys=False))
    return path


def _contrast(e: Experiment, quick: bool, slowdown: float, dest: Path, out: Path,
              row: dict[str, Any], ui: Ui, latency: bool) -> None:
    """Run the contrast, and add its figures to the row (`KEY_figure`) and its reason."""

    assert e.contrast is not None and e.scenario is not None and e.measure is not None
    c = e.contrast
    mapping = e.scenario(quick)
    topo = from_mapping(mapping, f"<paper {e.id}>", e.id).topology  # at full speed
    sc = from_mapping({**mapping, "topology": str(contrast_topology(e, topo, dest))},
                      f"<paper {e.id} {c.key}>", f"{e.id}-{c.key}")
    sc = sc.as_run(slowdown, latency)
    ui("experiment", {"id": f"{e.id} ({c.what})", "description": sc.description})
    folder, report = _job(sc, out, ui)
    shutil.copy(folder / "report.json", dest / f"report-{c.key.replace('_', '-')}.json")
    if "mrc" not in report["transports"]:
        row["reason"] += f"; with {c.what}: the run did not finish"
        return
    measured, _, why = e.measure(report, quick)
    row["measured"].update({f"{c.key}_{k}": v for k, v in measured.items()})
    row["reason"] += f"; with {c.what}{'' if faithful(report) else ' (NOT faithful)'}: {why}"


def _compact(v: Any) -> str:
    """A nested figure (a sweep's table) on one line: floats to one decimal."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_compact(x)}" for k, x in v.items()) + "}"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return "-" if v is None else str(v)


def _measured(row: dict) -> str:
    m = row.get("measured")
    if not m:
        return "-"
    parts = []
    for k, v in m.items():
        if isinstance(v, dict):
            parts.append(f"{k} {_compact(v)}")
        elif isinstance(v, float):
            parts.append(f"{k} {v:.2f}")
        elif isinstance(v, list) and v and all(isinstance(x, float | int) or x is None
                                               for x in v):
            parts.append(f"{k} " + "/".join("-" if x is None else f"{x:.2f}"
                                             if isinstance(x, float) else str(x) for x in v))
        elif v is not None:
            parts.append(f"{k} {v}")
    return "; ".join(parts)


def verdict(row: dict) -> str:
    """An experiment's verdict in words: consistent, not consistent, not judged (it ran,
    but what the rule compares is missing), or not run."""
    if row["consistent"] is None:
        return "not run" if row.get("measured") is None else "not judged"
    return "consistent" if row["consistent"] else "not consistent"


def tally(rows: list[dict]) -> tuple[int, int, list[str]]:
    """A run's experiments: how many are consistent, of how many judged, and those with
    a run that was not faithful."""
    words = [verdict(r) for r in rows]
    judged = len(words) - words.count("not run") - words.count("not judged")
    return words.count("consistent"), judged, [r["id"] for r in rows
                                               if r.get("faithful") is False]


def with_rows(doc: dict, newer: dict) -> dict:
    """`doc` (a full run) with each experiment `newer` ran in place of its row, the row
    saying when, where and at which commit it was measured again (`again`). Raises
    MrcemuError for a newer run that is not as full as `doc`, was interrupted, or used
    another scale."""
    if newer.get("quick") != doc.get("quick") or newer.get("interrupted"):
        raise MrcemuError("the newer run must be as full as the one it goes into, and "
                          "complete: run `mrcemu paper ID` without --quick")
    if (newer.get("scale") or {}) != (doc.get("scale") or {}):
        raise MrcemuError("the newer run used another scale (--latency): rows of one run "
                          "must share one")
    again = {k: newer[k] for k in ("started", "machine", "commit", "slowdown")}
    fresh = {r["id"]: {**r, "again": again} for r in newer["experiments"]}
    return {**doc, "experiments": [fresh.get(r["id"], r) for r in doc["experiments"]]}


def again_line(doc: dict) -> str:
    """Which rows were measured again after the run, when, at which commit and on which
    machine (a sitting of its own): '' for none."""
    rows = [r for r in doc["experiments"] if r.get("again")]
    return "; ".join(f"{r['id']} measured again {str(r['again']['started'])[:10]} at "
                     f"`{r['again']['commit']}` on "
                     f"{r['again'].get('machine', 'an unrecorded machine')}" for r in rows)


def markdown(doc: dict) -> str:
    bold = {"not consistent": "**not consistent**", "not judged": "**not judged**"}
    lines = ["# The white paper's experiments, emulated", "",
             f"`mrcemu paper`{' --quick' if doc['quick'] else ''}, "
             + (f"every run slowed {doc['slowdown']:g} times"
                if doc["slowdown"] != "auto" else "each experiment slowed as `--slowdown "
                "auto` picked for it (its row's `slowdown`)")
             + " (times below are full-speed seconds). What each "
             "experiment is, and each rule's threshold: docs/paper.md.", "",
             *([f"On `default`: {lat.scale_line(doc['scale'])}", ""]
               if "scale" in doc else []),
             *([f"Rows run again since: {again}.", ""] if (again := again_line(doc)) else []),
             *([f"The switches' uSID End: the {' and the '.join(engines)} engine"
                f"{'s' if len(engines) > 1 else ''} (each row's `usid_engine`).", ""]
               if (engines := sorted({r["usid_engine"] for r in doc["experiments"]
                                      if r.get("usid_engine")})) else []),
             *([f"**Interrupted** during {doc['interrupted']}: the experiments judged "
                "before it are below, and none after it ran.", ""]
               if doc.get("interrupted") else []),
             "| id | figure | the paper observed | measured (shares of the level before) | "
             "verdict | slowdown | why |", "|---|---|---|---|---|---|---|"]
    for r in doc["experiments"]:
        k = r.get("slowdown", doc["slowdown"])
        lines.append(f"| {r['id']} | {r['figure']} | {r['paper']} | {_measured(r)} | "
                     f"{bold.get(verdict(r), verdict(r))} | "
                     f"{k if isinstance(k, str) else f'{k:g}'} | {r['reason']} |")
    return "\n".join(lines) + "\n"
