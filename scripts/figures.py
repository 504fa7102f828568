#!/usr/bin/env python3
"""Write every measured figure that README.md and docs/ show from the committed result
files, so that a figure has one source.

A page marks each generated region `<!-- figures:NAME -->` ... `<!-- /figures:NAME -->`;
this rewrites what is between from the region's source (`REGIONS`). The sources are the
committed full paper run (`mrcemu/paper/example/paper.json`), the committed `make demo`
run (`mrcemu/scenarios/example/report.json`) and the benchmarks (`BENCHMARKS.json`),
each of which says when, where and at which commit it was measured.

    python scripts/figures.py           # rewrite every region, and BENCHMARKS.md
    python scripts/figures.py --check   # exit 1 naming each stale region (the tests do)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import inline_figures

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "mrcemu" / "paper" / "example" / "paper.json"
DEMO = ROOT / "mrcemu" / "scenarios" / "example" / "report.json"
STUDY = ROOT / "docs" / "assets" / "study" / "study.json"
BENCH = ROOT / "BENCHMARKS.json"
PAGES = ("README.md", "docs")
REGION = re.compile(r"(<!-- figures:([\w-]+) -->\n)(.*?)(<!-- /figures:\2 -->)", re.S)
# a figure in a sentence: scripts/inline_figures.py
INLINE = re.compile(r"(<!-- fig:([\w-]+) -->)(.*?)(<!-- /fig -->)")


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _when(doc: dict, commit: bool = True) -> str:
    """When and where a result file was measured, and at which commit (not on the README:
    a front door names no commits)."""
    day = str(doc.get("started", "?"))[:10]
    at = (f" at `{doc['commit']}`" if doc.get("commit") else " at an unrecorded commit"
          ) if commit else ""
    return f"measured {day}{at} on {doc.get('machine', 'an unrecorded machine')}"


def _wrap(text: str) -> str:
    """A generated paragraph in lines a reader's editor shows whole."""
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)


WIDTH = 100


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} minutes" if seconds >= 90 else f"{seconds:.0f} s"


# ---- the paper run ----------------------------------------------------------------------
def paper_summary(doc: dict, commit: bool = True) -> str:
    from mrcemu.paper.run import again_line, tally

    consistent, judged, unfaithful = tally(doc["experiments"])
    again = again_line(doc) if commit else "; ".join(
        f"{r['id']} ({str(r['again']['started'])[:10]}, on "
        f"{r['again'].get('machine', 'an unrecorded machine')})"
        for r in doc["experiments"] if r.get("again"))
    pace = ("each run slowed as `--slowdown auto` picked" if doc["slowdown"] == "auto"
            else f"every run slowed {doc['slowdown']:g} times")
    return _wrap(f"The committed full run ({_when(doc, commit)}; {pace}, "
            f"{_minutes(doc['wall_clock_s'])}) is consistent with "
            f"the paper in **{consistent} of {judged}** experiments judged. "
            + (f"Experiments with a run that was not faithful (their rows say which): "
               f"{', '.join(unfaithful)}." if unfaithful else "Every run was faithful.")
            + (f" Rows run again since: {again}." if again else ""))


def paper_verdicts(doc: dict) -> str:
    """A line each experiment: what it does, its verdict, whether its runs were faithful."""
    from mrcemu.paper.experiments import BY_ID
    from mrcemu.paper.run import verdict

    lines = ["| id | the paper's figure | what happens | verdict | faithful |",
             "|---|---|---|---|---|"]
    for r in doc["experiments"]:
        e = BY_ID[r["id"]]
        faithful = {True: "yes", False: "**no**", None: "-"}[r.get("faithful")]
        lines.append(f"| {r['id']} | {e.figure} | {e.short} | {verdict(r)} | {faithful} |")
    return paper_summary(doc, commit=False) + "\n\n" + "\n".join(lines)


def paper_table(doc: dict) -> str:
    """docs/paper.md's table: every experiment's figures, verdict and why."""
    from mrcemu.paper.run import markdown

    table = markdown(doc).split("\n| id |", 1)[1]
    return paper_summary(doc) + "\n\n| id |" + table.rstrip("\n")


# ---- the make demo run ------------------------------------------------------------------
def _faithful(t: dict) -> str:
    return "faithful" if (t.get("fidelity") or {}).get("ok") else "NOT faithful"


def demo_line(rep: dict, commit: bool = False) -> str:
    from mrcemu.scenario.report import label

    faithful = ", ".join(f"{label(n)} {_faithful(t)}"
                         for n, t in rep["transports"].items())
    pick = rep.get("slowdown_pick") or {}
    how = (f"`mrcemu run {rep['source']}`, slowed {rep['slowdown']:g} times as "
           "`--slowdown auto` picked" if pick.get("how") == "auto"
           else f"`mrcemu run {rep['source']} --slowdown {rep['slowdown']:g}`")
    return _wrap(f"`make demo`'s run: {how}, {_when(rep, commit)}; it took "
                 f"{_minutes(rep['wall_clock_s'])} ({faithful}).")


def demo_table(rep: dict) -> str:
    from mrcemu.scenario.report import fault_legend, table_rows

    head, rows = table_rows(rep)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
    legend = "; ".join(fault_legend(rep))
    return (demo_line(rep) + "\n\n" + "\n".join(lines)
            + ("\n\n" + _wrap(legend + ".") if legend else ""))


def demo_time(rep: dict) -> str:
    return f"about {_minutes(rep['wall_clock_s'])} on a 2-core machine"


# ---- the benchmarks ---------------------------------------------------------------------
def _verdict(t: dict) -> str:
    return "met" if t["met"] else "**missed**"


def _targets_table(rows: list[tuple[str, ...]], head: tuple[str, ...]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                      *("| " + " | ".join(r) + " |" for r in rows)])


def bench_markdown(doc: dict) -> str:
    """BENCHMARKS.md: every target at a glance, then each section as BENCHMARKS.json holds
    it, with when, where and by which command it was measured and its targets, met or
    missed."""
    from benchmarks.targets import shown, wanted

    glance = [(f"[{s['title']}](#{_anchor(s['title'])})", t["what"], shown(t), wanted(t),
               _verdict(t)) for s in doc["sections"] for t in s.get("targets", [])]
    met = sum(t["met"] for s in doc["sections"] for t in s.get("targets", []))
    parts = [doc["header"].rstrip("\n") + "\n",
             f"## Targets\n\n{met} of {len(glance)} targets met.\n\n"
             + _targets_table(glance, ("section", "target", "measured", "wanted", "verdict"))
             + "\n"]
    for s in doc["sections"]:
        m = s["measured"]
        body = s["markdown"].rstrip("\n") + "\n"
        if s.get("targets"):
            body += "\n" + _targets_table(
                [(t["what"], shown(t), wanted(t), _verdict(t)) for t in s["targets"]],
                ("target", "measured", "wanted", "verdict")) + "\n"
        parts.append(f"## {s['title']}\n\n_Measured {m['date']} on {m['machine']}, by "
                     f"`{m['command']}`._\n\n" + body)
    return "\n".join(parts)


def bench_stale(text: str, where: str = "BENCHMARKS.json") -> list[str]:
    """Each section of the results file whose stored targets are not what its own tables
    give (a figure changed in one place and not the other), or that misses a field of
    the schema, named with its line."""
    from benchmarks import SECTIONS
    from benchmarks.targets import measure

    doc, lines, out = json.loads(text), text.splitlines(), []

    def line_of(needle: str, start: int = 0) -> int:
        return next((i + 1 for i in range(start, len(lines)) if needle in lines[i]), 0)

    for s in doc["sections"]:
        at = line_of(f'"module": {json.dumps(s.get("module"))}')
        if s.get("module") not in SECTIONS:
            out.append(f"{where}:{at}: section {s.get('title')!r}: no module of "
                       "scripts/benchmarks/ has it")
            continue
        missing = [k for k in ("date", "commit", "machine", "command") if k not in s["measured"]]
        if missing:
            out.append(f"{where}:{at}: section {s['module']!r}: measured has no "
                       f"{', '.join(missing)}")
        md = line_of('"markdown":', at - 1)
        try:
            want = measure(s["module"], s["markdown"])
        except LookupError as e:
            out.append(f"{where}:{md}: section {s['module']!r}: {e}")
            continue
        for have, should in zip(s.get("targets", []), want, strict=False):
            if have != should:
                tline = line_of('"what": ' + json.dumps(have["what"]), at - 1)
                out.append(f"{where}:{tline}: section {s['module']!r} target "
                           f"{have['what']!r} stores {have.get('text')} "
                           f"(met: {have.get('met')}); its table "
                           f"({where}:{md}) gives {should['text']} (met: {should['met']})")
        if len(s.get("targets", [])) != len(want):
            out.append(f"{where}:{at}: section {s['module']!r} stores "
                       f"{len(s.get('targets', []))} targets; scripts/benchmarks/targets.py "
                       f"has {len(want)}")
    return out


def _anchor(title: str) -> str:
    """The id MkDocs and GitHub give a heading."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower())


# ---- the scenario format, from the model that checks it --------------------------------
def _table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                      *("| " + " | ".join(r) + " |" for r in rows)])


def scenario_keys(_: dict) -> str:
    """Every key a scenario file may hold, every workload and fault kind, and every
    transport setting with its value on the default fabric: what the parser checks."""
    from mrcemu.scenario import model
    from mrcemu.topology import faults, load
    from mrcemu.transport.config import TransportConfig

    cfg = TransportConfig.for_topology(load("default")).to_json()
    parts = []
    for title, where, keys in (("Top level", "", model.SECTIONS[""]),
                               ("`workload`", "workload.", model.SECTIONS["workload."]),
                               ("Each program of `workload.programs` (`exec`)",
                                "", model.SECTIONS["workload.programs[]."]),
                               ("Each fault of `faults`", "", model.SECTIONS["faults[]."]),
                               ("`capture`", "capture.", model.SECTIONS["capture."])):
        parts.append(f"### {title}\n\n" + _table(("key", "what it is"), [
            (f"`{where}{k}`", v) for k, v in keys.items()]))
        if where == "workload.":
            parts.append("Workload kinds:\n\n" + _table(("kind", "what the hosts do"), [
                (f"`{k}`", v) for k, v in model.WORKLOAD_KINDS.items()]))
        if title.startswith("Each fault"):
            parts.append("Fault kinds (`mrcemu fail` takes the same):\n\n" + _table(
                ("kind", "target", "what it does"),
                [(f"`{k}`", t, d) for k, (t, d) in faults.KIND_DOCS.items()]))
    parts.append("### `transport`\n\nThe settings a scenario may change; the clocks follow "
                 "the links and are not among them. The value is the default on the "
                 "`default` fabric.\n\n" + _table(("key", "what it sets", "on `default`"), [
                     (f"`transport.{k}`", v, _on_default(k, cfg))
                     for k, v in model.TRANSPORT_SETTINGS.items()]))
    return "\n\n".join(parts)


def fidelity_thresholds(_: dict) -> str:
    """The fidelity verdict's rules, with the thresholds `mrcemu/fidelity.py` holds."""
    from mrcemu.fidelity import THRESHOLDS as th
    from mrcemu.nic.daemon import PACING
    from mrcemu.topology import load
    from mrcemu.transport.config import TransportConfig

    t = load("default")
    slack = TransportConfig.for_topology(t).ack_slack
    bucket = 2 * (t.mtu + 14) * 8 / (PACING * t.host_link_mbps * 1e6)
    ms = lambda v: f"{v * 1e3:g} ms"  # noqa: E731
    return _table(("measure", "threshold", "why this value"), [
        ("frames the kernel dropped at a NIC's AF_PACKET socket (`PACKET_STATISTICS`)", "0",
         "the network delivered them, the host lost them"),
        ("timer lateness (due time to when it ran), p99 per NIC", ms(th.timer_p99_s),
         "timers find losses and send SACKs: much later, the host decides what is lost "
         f"(of the {slack * 1e3:.0f} ms `ack_slack` the loss recovery allows the hosts, "
         "Path health)"),
        ("timer lateness, max", ms(th.timer_max_s),
         "half the minimum RTO: a false timeout becomes likely"),
        ("delay-line release lateness (the scale model's fixed latency, "
         "[Topologies](topologies.md)), p99 and max per NIC",
         f"{ms(th.timer_p99_s)}, {ms(th.timer_max_s)}",
         "a release is a timer: one released late lengthens that packet's round trip as a "
         "late SACK timer does, so it is held to the timers' limits"),
        ("frames the delay line had no room for", "0", "its bound, not the network, lost them"),
        ("paced-send lateness, p99 per NIC", ms(th.send_p99_s),
         f"the pacer's bucket (two {t.mtu + 14:,}-byte frames at {PACING:.0%} of "
         f"{t.host_link_mbps:g} Mb/s is {bucket * 1e3:.1f} ms) absorbs less"),
        (f"rate achieved / paced, on each port that had frames waiting for "
         f"{th.min_backlogged_s:g} s or more", f">= {th.min_achieved:.2f}",
         "a port with frames to send that sent them slower than its pace lost rate the "
         "link would have carried"),
        ("the NICs' CPU time / wall time / CPUs", f"<= {th.max_cpu_share:.2f}",
         "a saturated host paces everything")])


def paper_rules(_: dict) -> str:
    """`mrcemu paper`'s verdict rules, with the thresholds `paper/rules.py` holds."""
    from mrcemu.paper.rules import THRESHOLDS as th
    from mrcemu.topology import latency

    return _table(("rule", "threshold", "used by"), [
        ("a step to k of 8 planes: the level within this much of k/8 of the level before",
         f"{th.step_tolerance:g}", "E1, E2, E5"),
        ("\"minimal impact\", \"line rate sustained\" at this zoom (the white paper, 2.1: "
         "bypassed in a few of its round trips): what each failure cost, the goodput short "
         "of the level before summed until it is back, in round trips at that level "
         "(`report.json`: a fault's `cost_rtts`)", f"<= {th.max_cost_rtts:g}", "E3, E4, E7"),
        ("\"no steady-state loss\": the level judged at least this share of the level before",
         f"{th.no_impact:.2f}", "E6"),
        ("\"victim unaffected\": its goodput, a share of its destination's 8 ports at their "
         "paced rate", f">= {th.victim:.2f}", "E11"),
        ("\"fair sharing among the incast flows\": Jain's index of their goodputs",
         f">= {th.fairness:.2f}", "E11"),
        ("\"both near line rate\": each flow's goodput, a share of its one port's paced rate",
         f">= {th.near_line_rate:.2f}", "E8"),
        ("\"flow 1 moves to EV-B\": its data packets still on EV-A's path over the stream's "
         "second half", f"<= {th.moved_off:.2f} (even spraying: 0.5)", "E8"),
        (f"E0: each one-way latency within this much of {latency.PAPER_ONE_WAY_LOCAL_US:g} "
         f"and {latency.PAPER_ONE_WAY_CROSS_US:g} µs; the bandwidth share at least",
         f"{th.latency_tolerance:.0%}; {th.bandwidth_share:.2f}", "E0"),
        ("\"MRC ahead\": MRC's bus bandwidth over each RoCE configuration's, at every loss "
         "level (E9: at the largest size; E10: at every size)", f">= {th.ahead:.1f}",
         "E9, E10")])


def _size(n: int) -> str:
    for unit, k in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


def _workload(w, topo: str) -> str:
    hosts = lambda xs: ",".join(f"h{x}" for x in xs)  # noqa: E731
    what = {"all-to-all": f"iterated all-to-all, {_size(w.size)} a message",
            "single": f"h{w.src} writes {_size(w.size)} to h{w.dst}",
            "incast": f"{hosts(w.senders)} write {_size(w.size)} each to h{w.dst} at once",
            "exec": " and ".join(f"h{p.host}: `{' '.join(p.argv)}`" for p in w.programs)
            + ", unmodified"}.get(w.kind, f"{w.kind}, {_size(w.size)}")
    times = f", {w.iterations} times" if w.kind != "exec" and w.iterations > 1 else ""
    return f"{what}{times}, on `{topo}`"


def _fault(f) -> str:
    out = f"{f.kind} {f.target} at t={f.at:g} s"
    if f.value is not None:
        out += f" ({f.value:g} %)"
    if f.period:
        out += f", for {f.duration:g} s, down {f.duty:.0%} of every {f.period:g} s"
    elif f.duration:
        out += f", for {f.duration:g} s"
    return out


def builtin_scenarios(_: dict) -> str:
    """The built-in scenarios as their files define them: the workload and each fault."""
    from mrcemu.scenario.model import SCENARIO_DIR, load

    rows = []
    for path in sorted(SCENARIO_DIR.glob("*.yaml"), key=lambda x: (x.stem != "failover",
                                                                    x.stem)):
        sc = load(path.stem)
        name = f"`{sc.name}`" + (" (default)" if sc.name == "failover" else "")
        faults = "; ".join(_fault(f) for f in sc.faults) or "no fault"
        rows.append((name, _workload(sc.workload, sc.topology.name), faults))
    return _table(("name", "workload", "faults"), rows)


def _on_default(key: str, cfg: dict) -> str:
    """A setting's value on `default`; RoCE's window as given, and with the product the
    fabric adds."""
    from mrcemu.transport.config import TransportConfig

    if key == "roce_window":
        return (f"`{TransportConfig.roce_window}` (`{cfg[key]}` with the product on "
                "`default`)")
    return f"`{json.dumps(cfg[key])}`"


def kernel_needs(_: dict) -> str:
    """Every capability mrcemu uses, from the table `mrcemu doctor` probes."""
    from mrcemu.preflight import markdown

    return markdown()


def census_table(doc: dict) -> str:
    """The hash census's rows (`mrcemu study census`): BENCHMARKS.md's and docs/study.md's."""
    from mrcemu.study.census import as_text

    rows = []
    for s in doc["sizes"]:
        t = as_text(s)
        rows.append(f"| {s['hosts']} | {s['topology']} | {s['qps']} | {s['draws']} | "
                    f"Bin({s['fit']['n']}, 1/{s['spines']}) | {t['chi2']} | {t['dof']} | "
                    f"**{t['p']}** | {t['busiest']} | {t['uniform']} | **{t['ratio']}** | "
                    f"{s['recounted']} | {s['seconds']:.0f} s | {t['step']} |")
    return ("| hosts | fabric | QPs a pair | draws | a uniform hash gives | χ² | dof | p | "
            "busiest uplink (QPs) | uniform hash's | ratio | draws recounted | time | "
            "a step, equal shares |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
            + "\n")



def census_fields(doc: dict) -> str:
    """What the leaves' hash reads, as the census measured it at each size."""
    names = {"udp_source_port": "UDP source port", "flow_label": "flow label",
             "hash_seed": "hash seed"}
    sizes = list(doc["fields"])
    head = "| changed alone | " + " | ".join(f"{h} hosts" for h in sizes) + " |"
    rows = [f"| {names.get(f, f)} | " + " | ".join(
        f"{doc['fields'][h][f]['moved']} of {doc['fields'][h][f]['qps']} "
        f"({doc['fields'][h][f]['a_hashed_field_moves']:g})" for h in sizes) + " |"
        for f in doc["fields"][sizes[0]]]
    return (head + "\n|---|" + "---|" * len(sizes) + "\n" + "\n".join(rows) + "\n")


def study_census(doc: dict) -> str:
    """The census as the study's page gives it: when and where, what is hashed, the rows."""
    c = doc["census"]
    worst = min(c["sizes"], key=lambda s: s["fit"]["p_value"] or 0.0)
    pv = worst["fit"]["p_value"] or 0.0
    ratios = [s["busiest_uplink"]["mean"] / s["busiest_uplink"]["uniform_hash"]
              for s in c["sizes"]]
    verdict = (f"The smallest p-value is {pv:.3g} ({worst['hosts']} hosts, {worst['qps']} "
               f"QP{'s' * (worst['qps'] > 1)} a pair): "
               + ("at every size and count of QPs the loads are what a uniform, "
                  "independent hash gives, at the 1 % level" if pv > 0.01 else
                  "the kernel's hash is not uniform there, at the 1 % level")
               + f"; a leaf's busiest uplink is {min(ratios):.3f} to {max(ratios):.3f} "
               "times a uniform hash's.")
    return (_wrap(f"Measured {c['measured'][:10]} on {c['machine']}"
                  + (f" at `{c['commit']}`" if c.get("commit") else "")
                  + f". The kernel hashes {c['hashed']}; each draw changes {c['varied']}.")
            + "\n\n" + census_table(c) + "\n" + _wrap(verdict)
            + "\n\n" + _wrap("QPs that took another uplink when one thing alone was changed "
                           "(in brackets: how many a field the hash reads moves, "
                           "(spines - 1) / spines of them):")
            + "\n\n" + census_fields(c))


def _transport_name(name: str) -> str:
    from mrcemu.study.collisions import row_qps

    return "MRC" if name == "mrc" else f"RoCE, {row_qps(name)} QP a pair"


def collisions_table(doc: dict, census: dict | None) -> str:
    """The collision study's rows (`mrcemu study collisions`): a size and transport a
    row, with the census's equal-share step where it measured the same case."""
    from mrcemu.study.collisions import as_text, row_qps, row_runs

    step = {(s["hosts"], s["qps"]): s.get("step_efficiency")
            for s in (census or {}).get("sizes", [])}
    rows = []
    for s in doc["sizes"]:
        runs = {r["label"]: r for r in s["runs"]}
        for name, row in s["transports"].items():
            t = as_text(row)
            ran = [runs[label] for label in row_runs(name, s["qps"])]
            fabric = ran[1]["topology"]
            pred = None if name == "mrc" else step.get((s["hosts"], row_qps(name)))
            pred_text = ("" if not pred else
                         f"{pred['mean']:.2f} [{pred['p10']:.2f}-{pred['p90']:.2f}]")
            paces = ", ".join(sorted({f"{r['slowdown']:g}" for r in ran}, key=float))
            faithful = "yes" if all(r["faithful"] for r in ran) else "**no**"
            st = ran[1]
            rows.append(f"| {s['hosts']} | {_transport_name(name)} | {fabric} | "
                        f"{row['steps']} | {ran[0]['steps']['write_bdps']:g} | **{t['mean']}** "
                        f"[{t['p10']}-{t['p90']}] | {t['alone']} | {t['of_alone']} | "
                        f"{pred_text or '-'} | {st['fabric_drops']:,} | "
                        f"{st['retransmits']:,} | {st['rtos']:,} | {paces} | {faithful} |")
    return ("| hosts | transport | fabric | steps | a pair's write (BDPs) | step efficiency "
            "[p10-p90] | a lone flow's | of the lone flow's | census, equal shares | fabric "
            "drops | retransmitted | timeouts | slowdown (alone, steps) | faithful |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")


def collisions_buckets(doc: dict) -> str:
    """Each transport's flows by what they got of a lone flow's rate, as the paper's
    appendix sorts its permutation's flows, at each size."""
    from mrcemu.study.collisions import BUCKETS

    names = [n for n, _ in BUCKETS]
    rows = []
    for s in doc["sizes"]:
        for name, row in s["transports"].items():
            b = row.get("buckets") or {}
            total = sum(b.values()) or 1
            rows.append(f"| {s['hosts']} | {_transport_name(name)} | {total} | "
                        + " | ".join(f"{b.get(n, 0)} ({b.get(n, 0) / total:.0%})"
                                     for n in names) + " |")
    return ("| hosts | transport | flows | " + " | ".join(names) + " |\n|---|---|---|"
            + "---|" * len(names) + "\n" + "\n".join(rows) + "\n")


def collisions_expected(doc: dict) -> str:
    """One-QP RoCE's flows by bucket against a uniform hash under equal shares: each
    bucket's expected share, the 95 % band for the flows counted, and the count."""
    from mrcemu.study.collisions import BUCKETS

    names = [n for n, _ in BUCKETS]
    rows = []
    for s in doc["sizes"]:
        exp = s["transports"].get("roce-1qp", {}).get("expected")
        if not exp:
            continue
        rows.append(f"| {s['hosts']} | " + " | ".join(
            f"{exp[n]['share']:.0%}: {exp[n]['band'][0]}-{exp[n]['band'][1]}, "
            + (f"{exp[n]['counted']}" if exp[n]["inside"] else f"**{exp[n]['counted']}**")
            for n in names) + " |")
    return ("| hosts | " + " | ".join(names) + " |\n|---|" + "---|" * len(names) + "\n"
            + "\n".join(rows) + "\n")


def collisions_verdict(doc: dict) -> str:
    """What the sizes say together: whether RoCE's step falls with the fabric's size, and
    whether MRC's keeps its lone flow's efficiency and stays flat."""
    from mrcemu.study.collisions import falls, flat

    sizes = [s for s in doc["sizes"] if "mrc" in s["transports"]]
    roce = [s["transports"]["roce-1qp"]["efficiency_mean"] for s in sizes
            if "roce-1qp" in s["transports"]]
    mrc = [s["transports"]["mrc"]["efficiency_mean"] for s in sizes]
    kept = [s["transports"]["mrc"]["of_alone"] for s in sizes]
    hosts = ", ".join(str(s["hosts"]) for s in sizes)
    return (f"At {hosts} hosts, a RoCE step with one QP a pair kept "
            + ", ".join(f"{x:.2f}" for x in roce) + " of its ideal: "
            + ("it falls with every size" if falls(roce) else "it does not fall with every size")
            + ". MRC's kept " + ", ".join(f"{x:.2f}" for x in mrc) + " ("
            + ", ".join(f"{x:.2f}" for x in kept) + " of what its lone flow keeps: "
            + ("at least 0.90 at every size" if min(kept) >= 0.9 else
               f"below 0.90 at {sum(k < 0.9 for k in kept)} of {len(kept)} sizes")
            + "), " + ("flat across sizes within 5 %" if flat(mrc) else
                       "not flat across sizes within 5 %")
            + (". Not every run was faithful: see the last column."
               if not all(s["faithful"] for s in sizes) else ". Every run was faithful."))


def study_collisions(doc: dict) -> str:
    """The collision study as the study's page gives it: when and where, the rows, the
    verdict, the flows' buckets."""
    c = doc["collisions"]
    return (_wrap(f"Measured {c['measured'][:10]} on {c['machine']}"
                  + (f" at `{c['commit']}`" if c.get("commit") else "")
                  + f", seed {c['seed']}, slowdown {c['slowdown']}.")
            + "\n\n" + collisions_table(c, doc.get("census")) + "\n"
            + _wrap(collisions_verdict(c)) + "\n\n"
            + _wrap("Each flow's share of its port over its own time, over what the "
                    "transport's lone flow gets, sorted as the paper's appendix sorts its "
                    "permutation's flows (above 0.75: line rate; above 5/12: a half; above "
                    "7/24: a third):") + "\n\n" + collisions_buckets(c) + "\n"
            + _wrap("One-QP RoCE's flows against a uniform hash under equal shares: each "
                    "bucket's expected share, the counts its flows would hold 95 % of the "
                    "time, and the count measured (in bold where outside):") + "\n\n"
            + collisions_expected(c))


def study_model(doc: dict) -> str:
    """The collision model against the emulated steps, as the study's page gives it."""
    m = doc["model"]
    rows = [f"| {r['hosts']} | {_transport_name(r['transport'])} | {r['topology']} | "
            f"{r['model_mean']:.2f} [{r['model_p10']:.2f}-{r['model_p90']:.2f}] | "
            f"{r['measured_mean']:.2f} | {r['off']:+.0%} | "
            + ("yes" if r["agrees"] else "**no**")
            + ("" if r["faithful"] else " (runs not all faithful)") + " |"
            for r in m["rows"]]
    agree = sum(r["agrees"] for r in m["rows"])
    by: dict[str, list[dict]] = {}
    for r in m["rows"]:
        by.setdefault("MRC" if r["transport"] == "mrc" else "RoCE", []).append(r)
    each = "; ".join(f"{t}: {sum(r['agrees'] for r in rs)} of {len(rs)}, measured "
                     f"{min(r['off'] for r in rs):+.0%} to {max(r['off'] for r in rs):+.0%} "
                     "from the model" for t, rs in by.items())
    return (_wrap(f"Computed {m['measured'][:10]} at `{m['commit']}`, {m['draws']} draws a "
                  f"hashed case, seed {m['seed']}. A measured mean agrees when it is within "
                  f"{m['within']:.0%} of the model's and inside its p10-p90 band (a band "
                  f"of no width, spraying's, leaves the {m['within']:.0%} alone). "
                  f"{agree} of {len(m['rows'])} agree ({each}).")
            + "\n\n| hosts | transport | fabric | model [p10-p90] | measured | off | "
            "agrees |\n|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def failures_table(doc: dict) -> str:
    """The failure study's rows (`mrcemu study failures`): a size, transport and kind a
    row; the worst extra time in bold, the measure S4 is judged by."""
    from mrcemu.study.failures import KINDS

    def f(x: float | None, fmt: str = ".2f") -> str:
        return "n/a" if x is None else format(x, fmt)

    rows = []
    for s in doc["sizes"]:
        for r in s["runs"]:
            for kind in KINDS:
                k = r["summary"][kind]
                rows.append(
                    f"| {s['hosts']} | {'MRC' if r['transport'] == 'mrc' else 'RoCE, 1 QP'} | "
                    f"{r['topology']} | {kind} | {k['acted']} of {k['trials']} | "
                    f"{f(k['p_hit'])} | **{f(k['extra_rtts_max'])}** | "
                    f"{f(k['extra_rtts_median'])} [{f(k['extra_rtts_p90'])}] | "
                    f"{f(k['after_rtts_median'])}, {f(k['after_rtts_max'])} | "
                    f"{f(k['extra_s_median'], '.3f')} | {f(k['amplification_median'])} | "
                    f"{f(k['missed_extra_rtts_median'])} | {r['slowdown']:g} | "
                    + ("yes" if r["faithful"] else "**no**") + " |")
    return ("| hosts | transport | fabric | fault | trials acted | P_hit | worst extra "
            "(base RTTs) | median [p90] | the step after: median, worst | median extra (s) "
            "| amplification | extra where the link carried none of the step | slowdown | "
            "faithful |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
            + "\n")


def _runs_of(doc: dict, transport: str) -> list[tuple[int, dict]]:
    return [(s["hosts"], r) for s in doc["sizes"] for r in s["runs"]
            if r["transport"] == transport]


def failures_verdict(doc: dict) -> str:
    """What the sizes say together: MRC's worst extra time against 4 base round trips
    and whether it grows with the size, and the step after's; RoCE's against its
    reconvergence and timeout."""
    from mrcemu.study.failures import KINDS, grows
    from mrcemu.transport.config import TransportConfig

    def worst(r: dict, key: str) -> float:
        return max(r["summary"][k][key] or 0.0 for k in KINDS)

    mrc = _runs_of(doc, "mrc")
    roce = _runs_of(doc, "roce")
    cfg = TransportConfig()
    extra = [worst(r, "extra_rtts_max") for _, r in mrc]
    text = (f"At {', '.join(str(h) for h, _ in mrc)} hosts, a link failing inside an MRC "
            "step cost the step at most " + ", ".join(f"{x:.2f}" for x in extra)
            + " base round trips: " + ("within 4 at every size" if max(extra) <= 4 else
                                       f"above 4 at {sum(x > 4 for x in extra)} of "
                                       f"{len(extra)} sizes")
            + (", growing with the size" if grows(extra) else ", not growing with the size")
            + "; the step after it, healed, took at most "
            + ", ".join(f"{worst(r, 'after_rtts_max'):.2f}" for _, r in mrc)
            + " base round trips more than its twin.")
    if roce:
        medians = [max(x for x in (r["summary"][k]["extra_s_median"] for k in KINDS)
                       if x is not None) for _, r in roce]
        text += (f" At {', '.join(str(h) for h, _ in roce)} hosts, RoCE's median extra time "
                 "where the link carried the step's flows was "
                 + ", ".join(f"{x:.2f}" for x in medians) + " s (the worse kind), against "
                 f"its routing reconvergence of {cfg.roce_reconvergence:g} s and its "
                 f"{cfg.roce_timeout:g} s timeout doubling on each retry: a flow on the link "
                 "waits for both.")
    runs = [r for s in doc["sizes"] for r in s["runs"]]
    return text + (" Not every run was faithful: see the last column."
                   if not all(r["faithful"] for r in runs) else " Every run was faithful.")


def study_failures(doc: dict) -> str:
    """The failure study as the study's page gives it: when and where, the rows, the
    verdict."""
    c = doc["failures"]
    return (_wrap(f"Measured {c['measured'][:10]} on {c['machine']}"
                  + (f" at `{c['commit']}`" if c.get("commit") else "")
                  + f", seed {c['seed']}, {c['trials']} trials a size and transport, "
                  f"slowdown {c['slowdown']}.")
            + "\n\n" + failures_table(c) + "\n" + _wrap(failures_verdict(c)) + "\n")


def study_failure_model(doc: dict) -> str:
    """The model's chance that a failed link touches a step against the failure study's
    trials, as the study's page gives it."""
    m = doc["model"]
    rows = [f"| {r['hosts']} | {'MRC' if r['transport'] == 'mrc' else 'RoCE, 1 QP'} | "
            f"{r['topology']} | {r['model_p_hit']:.3f} | {r['band'][0]}-{r['band'][1]} | "
            f"{r['crossed']} of {r['acted']} | " + ("yes" if r["agrees"] else "**no**")
            + ("" if r["faithful"] else " (run not faithful)") + " |"
            for r in m.get("failures", [])]
    agree = sum(r["agrees"] for r in m.get("failures", []))
    return (_wrap(f"Computed {m['measured'][:10]} at `{m['commit']}`, {m['draws']} draws a "
                  f"case, seed {m['seed']}. {agree} of {len(rows)} agree: the trials whose "
                  "link carried the step are inside the 95 % band a binomial of the "
                  "model's chance gives for the trials that acted.")
            + "\n\n| hosts | transport | fabric | model's P_hit | 95 % band | link carried "
            "the step | agrees |\n|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


REGIONS: dict[str, tuple[Path | None, Callable[[dict], str]]] = {
    "study-model": (STUDY, study_model),
    "study-census": (STUDY, study_census),
    "study-collisions": (STUDY, study_collisions),
    "study-failures": (STUDY, study_failures),
    "study-failure-model": (STUDY, study_failure_model),
    "paper-verdicts": (PAPER, paper_verdicts),
    "paper-table": (PAPER, paper_table),
    "demo-table": (DEMO, demo_table),
    "demo-line": (DEMO, lambda rep: demo_line(rep, commit=True)),
    "demo-time": (DEMO, demo_time),
    "scenario-keys": (None, scenario_keys),
    "kernel-needs": (None, kernel_needs),
    "fidelity-thresholds": (None, fidelity_thresholds),
    "paper-rules": (None, paper_rules),
    "builtin-scenarios": (None, builtin_scenarios),
}


def pages(root: Path = ROOT) -> list[Path]:
    out = []
    for p in PAGES:
        path = root / p
        out += sorted(path.rglob("*.md")) if path.is_dir() else [path]
    return out


def render(text: str, where: str = "") -> str:
    """The page with every region rewritten from its source; an unknown region name is
    an error naming the page."""
    cache: dict[Path, dict] = {}

    def fill(m: re.Match) -> str:
        name = m.group(2)
        if name not in REGIONS:
            raise SystemExit(f"figures: {where}: unknown region '{name}'; known: "
                             f"{', '.join(REGIONS)}")
        src, fn = REGIONS[name]
        doc = {} if src is None else cache.setdefault(src, _load(src))
        return m.group(1) + fn(doc).rstrip("\n") + "\n" + m.group(4)

    def inline(m: re.Match) -> str:
        if m.group(2) not in inline_figures.FIGURES:
            raise SystemExit(f"figures: {where}: unknown figure '{m.group(2)}'; known: "
                             f"{', '.join(inline_figures.FIGURES)}")
        return m.group(1) + inline_figures.value(m.group(2), cache) + m.group(4)

    return INLINE.sub(inline, REGION.sub(fill, text))


def _source(path: Path | None) -> str:
    return str(path.relative_to(ROOT)) if path else "a formula over the topology and code"


def stale_inline(text: str, where: str) -> list[str]:
    """Each inline figure of the page that is not what its source gives."""
    out, cache = [], {}
    for m in INLINE.finditer(text):
        name = m.group(2)
        if name not in inline_figures.FIGURES:
            out.append(f"{where}:{text[:m.start()].count(chr(10)) + 1}: unknown figure "
                       f"'{name}'")
            continue
        want = inline_figures.value(name, cache)
        if m.group(3) != want:
            src = inline_figures.FIGURES[name][0]
            out.append(f"{where}:{text[:m.start()].count(chr(10)) + 1}: figure '{name}' "
                       f"differs from {_source(src)}: the page has {m.group(3)!r}, the "
                       f"source gives {want!r}")
    return out


def stale(text: str, where: str) -> list[str]:
    """Each region of the page whose text is not what its source gives, named with its
    first differing line: what the page says, and what the source says."""
    out = []
    want = {m.group(2): m.group(3) for m in REGION.finditer(render(text, where))}
    for m in REGION.finditer(text):
        have, should = m.group(3).splitlines(), want[m.group(2)].splitlines()
        if have != should:
            i = next((k for k, (a, b) in enumerate(zip(have, should, strict=False)) if a != b),
                     min(len(have), len(should)))
            line = text[:m.start(3)].count("\n") + 1 + i
            out.append(f"{where}:{line}: region '{m.group(2)}' differs from "
                       f"{_source(REGIONS[m.group(2)][0])}: the page has "
                       f"{(have[i] if i < len(have) else '<nothing>')!r}, the source gives "
                       f"{(should[i] if i < len(should) else '<nothing>')!r}")
    return out + stale_inline(text, where)


# A decimal in prose that is no figure: a section of a publication, a version.
_NOT_A_FIGURE = re.compile(r"\d+\.\d+(?:\.\d+)+|(?:section|sections|white paper,|paper's|"
                           r"Linux|OCP-MRC-)\s*\d+\.\d+")
_DECIMAL = re.compile(r"(?<![\w.-])\d+\.\d+\b")


def _blank(m: re.Match) -> str:
    return "\n" * m.group(0).count("\n")


def unsourced(text: str, where: str) -> list[str]:
    """Each decimal figure in the page's prose that comes from no source: outside every
    generated region and inline figure, code and link address. history.md is dated by
    design and exempt."""
    text = REGION.sub(_blank, text)
    text = INLINE.sub("", text)
    text = re.sub(r"```.*?```", _blank, text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # a link's address is no figure
    text = _NOT_A_FIGURE.sub("", text)
    return [f"{where}:{n}: {m.group(0)!r} is a figure from no source: generate it (an "
            "inline figure, scripts/inline_figures.py) or take it out"
            for n, line in enumerate(text.splitlines(), 1) for m in _DECIMAL.finditer(line)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only say which regions are stale")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    problems = []
    targets = [(p, p.read_text()) for p in pages()]
    if BENCH.exists():
        targets.append((ROOT / "BENCHMARKS.md", None))
    for path, text in targets:
        rel = str(path.relative_to(ROOT))
        new = bench_markdown(_load(BENCH)) if text is None else render(text, rel)
        old = path.read_text()
        if new == old:
            continue
        if args.check:
            problems += stale(old, rel) if text is not None else [
                f"{rel} is not BENCHMARKS.json rendered: run scripts/figures.py"]
        else:
            path.write_text(new)
            print(f"figures: wrote {rel}", file=sys.stderr)
    if BENCH.exists():
        problems += bench_stale(BENCH.read_text())
    for path in pages():
        if path.name != "history.md":
            problems += unsourced(path.read_text(), str(path.relative_to(ROOT)))
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
