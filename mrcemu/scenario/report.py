"""report.json and report.md from the per-transport summaries."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from mrcemu import fidelity
from mrcemu.scenario.analysis import BIN, recovery_windows
from mrcemu.slowdown import next_slowdown
from mrcemu.topology import latency

LABEL = {"mrc": "MRC", "roce": "RoCE"}


def label(name: str) -> str:
    """A run's name as a column title: MRC, RoCE, or MRC (reps) for one of several
    load-balancing policies (Scenario.runs)."""
    transport, _, policy = name.partition("-")
    return LABEL.get(transport, transport) + (f" ({policy})" if policy else "")


def _fmt(x: object, unit: str = "", nd: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    if isinstance(x, float):
        return f"{x:.{nd}f}{unit}"
    return f"{x}{unit}"


def _faithful(v: dict | None) -> str:
    if not v:
        return "not measured"
    return "faithful" if v["ok"] else "NOT faithful"


def _outcome(t: dict) -> str:
    if t.get("completed"):
        return "completed"
    if t.get("interrupted"):
        return "interrupted"
    if t.get("failed"):
        return "FAILED: " + ", ".join(t.get("failed_flows", [])[:4]) + (
            "" if "programs" in t else " gave up")
    return "TIMED OUT" if t.get("timed_out") else "-"


def table_rows(report: dict) -> tuple[list[str], list[list[str]]]:
    """The side-by-side comparison as (header, rows): report.md and the terminal share it."""
    ts = report["transports"]
    names = list(ts)
    head = ["", *[label(n) for n in names]]
    rows = [
        ["outcome", *[_outcome(ts[n]) for n in names]],
        ["job completion", *[_fmt(ts[n]["job_completion_s"], " s") for n in names]],
        ["iteration p50", *[_fmt(ts[n]["iteration_s_p50"], " s") for n in names]],
        ["iteration p99", *[_fmt(ts[n]["iteration_s_p99"], " s") for n in names]],
        ["goodput", *[_fmt(ts[n]["goodput_mbps"], " Mb/s", 1) for n in names]],
        *([["programs' own figures", *[_program_figures(ts[n]) for n in names]]]
          if any("programs" in ts[n] for n in names) else []),
        ["all data intact (SHA-256)", *[
            f"{_fmt(ts[n]['integrity_ok'])} ({ts[n]['messages_ok']}/{ts[n]['messages']})"
            if "programs" not in ts[n] else "the programs' own check" for n in names]],
        *([["load balancing", *[ts[n].get("load_balancing", "-") for n in names]]]
          if any(ts[n].get("load_balancing", "mrc") != "mrc" for n in names) else []),
        ["retransmits", *[_fmt(ts[n]["retransmits"]) for n in names]],
        ["trims", *[_fmt(ts[n]["trims"]) for n in names]],
        ["NACKs", *[_fmt(ts[n]["nacks"]) for n in names]],
        ["RTOs", *[_fmt(ts[n]["rtos"]) for n in names]],
        # packets no connection saw: the reasons are under the table (report.md)
        ["dropped at the NICs", *[_fmt(sum(ts[n].get("nic_drops", {}).values()))
                                  for n in names]],
        # every switch and host port over the run: the reasons are under the table
        ["dropped in the fabric", *[_fabric(ts[n], lambda f: sum(f["dropped"].values()))
                                    for n in names]],
        ["marked / trimmed", *[_fabric(ts[n], lambda f: f"{f['marked']} / {f['trimmed']}")
                               for n in names]],
        ["false retirements", *[_fabric(ts[n], lambda f: f["false_retirements"])
                                for n in names]],
        # The terminal shows only this table: it must say whether to trust the rest.
        ["fidelity", *[_faithful(ts[n].get("fidelity")) for n in names]],
    ]
    nf = max((len(ts[n]["faults"]) for n in names), default=0)
    for i in range(nf):
        # Short labels, so the table fits an 80-column terminal; fault_legend names them.
        what = f"fault {i + 1}"
        rows.append([f"{what}: last pkt on path", *[
            _fmt(ts[n]["faults"][i]["last_packet_on_failed_path_s"], " s")
            if len(ts[n]["faults"]) > i else "-" for n in names]])
        rows.append([f"{what}: back to 90 %", *[
            _recovered(ts[n]["faults"][i]) if len(ts[n]["faults"]) > i else "-"
            for n in names]])
        if any("map_bad" in f for n in names for f in ts[n]["faults"][i:i + 1]):
            rows.append([f"{what}: mapped bad", *[
                _mapped(ts[n]["faults"][i]) if len(ts[n]["faults"]) > i else "-"
                for n in names]])
    return head, rows


def _fabric(t: dict, pick: Callable[[dict], object]) -> str:
    """A figure of the fabric's counters over the run; '-' for a run that read none."""
    return _fmt(pick(t["fabric"])) if t.get("fabric") else "-"


def fabric_lines(report: dict) -> list[str]:
    """Under the table: the fabric's drops by reason and the ports that dropped, and each
    false retirement (an EV retired on a path that dropped nothing, with no fault)."""
    out = []
    for n, t in report["transports"].items():
        f = t.get("fabric")
        if not f:
            continue
        reasons = ", ".join(f"{k} {v}" for k, v in f["dropped"].items() if v) or "nothing"
        ports = f["ports_that_dropped"]
        out.append(f"{label(n)}: the fabric dropped {reasons}"
                   + (f" (at {', '.join(ports[:8])}{' ...' if len(ports) > 8 else ''})"
                      if ports else "") + f"; {f['marked']} marked, {f['trimmed']} trimmed.")
        for x in f["false_retirement_list"][:10]:
            out.append(f"- false retirement at {x['t_s']:g} s: {x['src']}->{x['dst']} EV "
                       f"{x['ev']} ({x['path']}), \"{x['why']}\", on a path that dropped "
                       "nothing")
        if f["false_retirements"] > 10:
            out.append(f"- and {f['false_retirements'] - 10} more (report.json)")
    return out


def paper_units(report: dict) -> str:
    """The key times again on the paper's fabric: each job, and when each fault's path
    last carried data."""
    sc, ts = report["scale"], report["transports"]
    parts = [f"{label(n)}'s job {latency.on_paper(t['job_completion_s'], sc)}"
             for n, t in ts.items() if t.get("job_completion_s") is not None]
    parts += [f"{label(n)}'s last packet on fault {i + 1}'s path "
              f"{latency.on_paper(f['last_packet_on_failed_path_s'], sc)} after it"
              for n, t in ts.items() for i, f in enumerate(t["faults"])
              if f.get("last_packet_on_failed_path_s") is not None]
    return ("In the paper's units: " + "; ".join(parts) + ".") if parts else \
        "In the paper's units: no job completed."


def fault_legend(report: dict) -> list[str]:
    """What each `fault N` of the table is: kind, target and scheduled time."""
    ts = report["transports"]
    faults = max((t["faults"] for t in ts.values()), key=len, default=[])
    return [f"fault {i + 1}: {f['kind']} {f['target']} at {f['scheduled_s']:g} s"
            for i, f in enumerate(faults)]


def _mapped(f: dict) -> str:
    if "map_bad" not in f:
        return "-"
    if not f["map_bad"]:
        out = "nothing"
    elif f["map_bad_after_s"] is None:
        out = f"{', '.join(f['map_bad'])}; missed {', '.join(f['map_missed'])}"
    else:
        out = f"{', '.join(f['map_bad'])} (all by +{f['map_bad_after_s']:.2f} s)"
    if f["map_also"]:
        out += f"; also {', '.join(f['map_also'])}"
    return out


def _recovered(f: dict) -> str:
    if f["at_s"] is None:
        return "not reached"
    if f["recovered_90pct_s"] is None:
        return "not recovered" if f.get("goodput_before_mbps") else "-"
    if f["recovered_90pct_s"] == 0.0:
        return "no dip below 90 %"
    return _fmt(f["recovered_90pct_s"], " s")


def _policies(ts: dict) -> str:
    """Which load-balancing policy chose MRC's EVs in each run (docs/load-balancing.md)."""
    return "Load balancing: " + ", ".join(
        f"{label(n)}: `{t['load_balancing']}`" for n, t in ts.items() if "load_balancing" in t
    ) + " (`mrc` is MRC's own EV profile)."


def markdown(report: dict) -> str:
    head, rows = table_rows(report)
    k = report.get("slowdown", 1.0)
    pick = report.get("slowdown_pick") or {}
    # the analysis's windows, in the slowed run's seconds: at full speed, as below
    before, bins = recovery_windows(k)
    before, smooth = before / k, bins * BIN / k
    took = (f" It took {report['wall_clock_s']:g} s on this host's clock."
            if "wall_clock_s" in report else "")
    lines = [f"# {report['scenario']} on {report['topology']}", "",
             report.get("description", ""), "",
             f"Run {report['started']}, machine: {report['machine']}.{took}"
             + (f" The switches' uSID End: the {report['usid_engine']} engine."
                if report.get("usid_engine") else ""), "",
             *([f"Run {k:g} times slower (`--slowdown`): every link and clock, fault "
                f"times included. Every time and rate below is the fabric's own at full "
                f"speed.", ""] if k != 1.0 else []),
             *([f"The slowdown: {pick['why']}.", ""] if pick.get("how") == "auto" else []),
             *([latency.scale_line(report["scale"]), ""] if "scale" in report else []),
             fidelity.line(report.get("fidelity")), "",
             *([f"Next: `--slowdown {next_slowdown(k):g}` (this run was not faithful at "
                f"{k:g}).", ""] if report.get("fidelity") and not report["fidelity"]["ok"]
               else []),
             *([_policies(report["transports"]), ""]
               if any("load_balancing" in t for t in report["transports"].values()) else [])]
    if report.get("partial"):
        lines += ["**Partial report: the run was interrupted.**", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    drops = [f"{label(n)}: " + ", ".join(f"{k} {v}" for k, v in t["nic_drops"].items())
             for n, t in report["transports"].items() if t.get("nic_drops")]
    if drops:
        lines += ["", "Dropped at the NICs before any connection took them, by reason: "
                  + "; ".join(drops) + "."]
    fab = fabric_lines(report)
    if fab:
        lines += ["", *fab]
    legend = fault_legend(report)
    if legend:
        lines += ["", "; ".join(legend) + "."]
    if "scale" in report:
        lines += ["", paper_units(report)]
    ts = report["transports"]
    if any(ts[n]["faults"] for n in ts):
        lines += ["", "Fault details (seconds after the first write):", "",
                  "| transport | fault | at | healed | new pkts on failed path (max per conn / "
                  "window) | failed paths used / detected | detection p50 / max | "
                  "stopped / retired after the loss: max RTTs | cost (RTTs) | "
                  "data after retired | max RTO |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for n, t in ts.items():
            for f in t["faults"]:
                if f["at_s"] is None:
                    continue
                lines.append(
                    f"| {label(n)} | {f['kind']} {f['target']} | {_fmt(f['at_s'])} | "
                    f"{_fmt(f['healed_s'])} | {_fmt(f.get('new_packets_on_failed_path'))} "
                    f"({f.get('new_packets_on_failed_path_max_per_connection')} / "
                    f"{f.get('window_packets')}) | {f.get('paths_used_after_fault')} / "
                    f"{f.get('paths_detected')} | {_fmt(f.get('detect_s_p50'))} / "
                    f"{_fmt(f.get('detect_s_max'))} | {_fmt(f.get('stop_after_loss_rtts_max'))} / "
                    f"{_fmt(f.get('retire_after_loss_rtts_max'))} | "
                    f"{_fmt(f.get('cost_rtts'))} | "
                    f"{_fmt(f.get('data_packets_after_retire'))} | {_fmt(f.get('rto_s_max'))} |")
        missing = [(n, f) for n, t in ts.items() for f in t["faults"] if f.get("not_computed")]
        for n, f in missing:
            lines.append(f"\n{label(n)}, {f['kind']} {f['target']}: some figures were "
                         f"not computed ({f['not_computed']}); the raw record is in logs/.")
    lines += ["", "Definitions: failover time is measured from the moment the fault took "
              "effect. *Last pkt on path*: the last data packet the senders put on "
              "a path through the failed element before it healed. *Stopped / retired after the "
              "loss*: from the send of the lost packet that stopped, then retired, a path, in "
              "the connection's smoothed RTTs. *Cost*: the goodput short of the level before, "
              "summed until it is back, in round trips at that level. *Back to 90 %*: "
              f"after goodput (summed over receivers, {smooth:.3g} s average) first fell below "
              f"90 % of its mean over the {before:.3g} s before the fault, the time it first got "
              "back above. *Mapped bad*: the failed links Clustermapper named bad, and "
              "when the last of them was named.", ""]
    return "\n".join(lines + program_lines(ts))


def _program_figures(t: dict) -> str:
    """Each program's own measurement (perftest's), at full speed: `h0 36.5 Mb/s`."""
    out = []
    for p in t.get("programs", []):
        pt = p.get("perftest")
        if pt and pt["kind"] == "bandwidth":
            out.append(f"{p['host']} {pt['average_mbps']:,.1f} Mb/s")
        elif pt:
            out.append(f"{p['host']} {pt['typical_one_way_s'] * 1e6:,.2f} us one way")
    return ", ".join(out) or "-"


def _program_figure(p: dict) -> str:
    pt = p.get("perftest")
    if pt is None:
        return ""
    if pt["kind"] == "bandwidth":
        return f"; its bandwidth: {pt['average_mbps']:,.1f} Mb/s average"
    return (f"; its one-way latency: {pt['typical_one_way_s'] * 1e6:.2f} us typical, "
            f"{pt['p99_one_way_s'] * 1e6:.2f} us p99")


def program_lines(ts: dict) -> list[str]:
    """What each program of an exec workload did and printed, transport by transport.
    Its own figures (perftest's) are the fabric's at full speed, as every figure here."""
    out = []
    for n, t in ts.items():
        for p in t.get("programs", []):
            how = (f"ended by mrcemu ({p['ended_by']})" if p["ended_by"]
                   else f"exit {p['exit']}")
            out += [f"## {label(n)}: `{p['host']}$ {p['command']}`", "",
                    f"Started at {_fmt(p['started_at_s'], ' s')}, ran {_fmt(p['ran_s'], ' s')}, "
                    f"{how}{_program_figure(p)}."
                    + (" Its output's end:" if p["output_cut"] else ""), "",
                    "```text", p["output"].rstrip("\n"), "```", ""]
    return out


def write(folder: Path, report: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report, indent=1))
    (folder / "report.md").write_text(markdown(report))
