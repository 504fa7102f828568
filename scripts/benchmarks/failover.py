"""`make bench`, section "Failover: MRC against RoCE (the `failover` scenario)"."""

from __future__ import annotations

from pathlib import Path

from benchmarks.common import SLOWDOWN, bad_evs, false_retirements, fid, run_report

TITLE = 'Failover: MRC against RoCE (the `failover` scenario)'


def _retired(f: dict) -> str:
    """For one fault: the slowest stop and the slowest retirement after the loss
    that caused it, in the connection's smoothed RTTs (how many stopped within 2, retired
    within 4), and data packets onto a path once retired."""
    stops = [p["stop_rtts"] for p in f["failed_paths"] if p.get("stop_rtts") is not None]
    rtts = [p["retire_rtts"] for p in f["failed_paths"] if p["retire_rtts"] is not None]
    if not rtts and not stops:
        return "-"
    n = f["paths_used_after_fault"]
    stop = f"{max(stops):.1f} ({sum(x <= 2 for x in stops)}/{n})" if stops else "-"
    ret = f"{max(rtts):.1f} ({sum(x <= 4 for x in rtts)}/{n})" if rtts else "-"
    return f"{stop} / {ret}; {f['data_packets_after_retire']} after"


def slack_ms() -> float:
    """The hosts' slack `mrcemu up default` runs with, at full speed."""
    from mrcemu.topology import load
    from mrcemu.transport.config import TransportConfig
    return TransportConfig.for_topology(load("default")).ack_slack * 1000


def flap_vs_clean() -> str:
    """The `flap` scenario against the same workload with no fault, in one run."""
    import tempfile

    import yaml

    from mrcemu.scenario.model import SCENARIO_DIR

    data = yaml.safe_load((SCENARIO_DIR / "flap.yaml").read_text())
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        clean = dict(data, faults=[])
        (Path(tmp) / "no-fault.yaml").write_text(yaml.safe_dump(clean))
        for name, arg in (("flap", "flap"), ("no fault", f"{tmp}/no-fault.yaml")):
            rep = run_report(arg, f"{tmp}/{name.replace(' ', '-')}")
            out[name] = {t: v["job_completion_s"] for t, v in rep["transports"].items()}
            out[name]["fidelity"] = rep.get("fidelity")
    f, c = out["flap"], out["no fault"]
    return ("Link flaps. The `flap` scenario (all-to-all, link p1l0-p1s0 down 0.2 s of every "
            "0.5 s for 3 s) against the same workload with no fault, run one after the other "
            "(`make bench`, section failover):\n\n"
            "| | MRC job | RoCE job |\n|---|---|---|\n"
            f"| no fault | {c['mrc']:.2f} s | {c['roce']:.2f} s |\n"
            f"| flapping | {f['mrc']:.2f} s | {f['roce']:.2f} s |\n"
            f"| **flapping / no fault** | **{f['mrc'] / c['mrc']:.2f}** | "
            f"**{f['roce'] / c['roce']:.2f}** |\n\n"
            f"Fidelity: no fault {fid(c['fidelity'])}, flapping {fid(f['fidelity'])}.\n\n"
            "The publications' \"no measurable impact\" needs failures detected in "
            "microseconds; here a flapping path costs MRC whatever its packets on that path "
            "wait (their EV's stop and then overdue age, two to three round trips) each time "
            "the link goes down under it, which run-to-run noise of a few hundred "
            "milliseconds can hide or not; these runs are at full speed, which this host "
            "does not run faithfully. "
            "A RoCE flow hashed onto the flapping link stalls for each down period and its "
            "timeouts.\n")


def failover() -> str:
    import tempfile

    import yaml

    from mrcemu.scenario.analysis import fault_cost_rtts, goodput_dip, recovery
    from mrcemu.scenario.model import SCENARIO_DIR
    from mrcemu.scenario.model import load as load_scenario

    spec = load_scenario("failover")
    k = SLOWDOWN
    data = yaml.safe_load((SCENARIO_DIR / "failover.yaml").read_text())
    rows, reasons, srtts = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / "failover-no-fault.yaml"
        clean.write_text(yaml.safe_dump(dict(data, faults=[], transports=["mrc"])))
        for i in range(3):  # each a pair, side by side: the workload alone, then faulted
            nf = run_report(str(clean), f"{tmp}/nf{i}", k)
            fo = run_report("failover", f"{tmp}/fo{i}", k)
            m, r, c = fo["transports"]["mrc"], fo["transports"]["roce"], nf["transports"]["mrc"]
            first = min(f["at_s"] for f in m["faults"] if f["at_s"] is not None)
            dips, base, costs, cbase = [], [], [], []
            for f in m["faults"]:
                end = min(x for x in (f["healed_s"], m["job_completion_s"]) if x)
                dips.append(goodput_dip(m["goodput_series"], f["at_s"], end, 0.1, 0.3)[1])
                # the same windows of the run without the fault: what iterations alone do
                base.append(goodput_dip(c["goodput_series"], f["at_s"], end, 0.1, 0.3)[1])
                costs.append(f.get("cost_rtts"))
                # the run without the fault, over the same window with its own level before
                # and the faulted run's round trip: what the iterations alone cost
                level = recovery(c["goodput_series"], f["at_s"], end)[0]
                cbase.append(fault_cost_rtts(c["goodput_series"], f["at_s"], end, level,
                                             f.get("rtt_s")))
            fm = {f["kind"]: f for f in m["faults"]}

            def ratio(x: float | None) -> str:
                return "-" if x is None else f"{x:.2f}"

            rows.append(
                f"| {i + 1} | {bad_evs(nf)} | {bad_evs(fo, first)} | "
                f"{false_retirements(nf)} / {false_retirements(fo)} | "
                f"{c['job_completion_s']:.2f} | {m['job_completion_s']:.2f} | "
                f"**{m['job_completion_s'] / c['job_completion_s']:.2f}** | "
                f"{r['job_completion_s']:.2f} | "
                f"**{r['job_completion_s'] / m['job_completion_s']:.2f}** | "
                f"{_retired(fm['switch-down'])} | {_retired(fm['gray'])} | "
                f"{' / '.join(ratio(x) for x in costs)} ({' / '.join(ratio(x) for x in cbase)})"
                f" | {' / '.join(ratio(x) for x in dips)} "
                f"({' / '.join(ratio(x) for x in base)}) | {m['rtos']} | "
                f"{fid(c.get('fidelity'))} / {fid(m.get('fidelity'))} / "
                f"{fid(r.get('fidelity'))} |")
            reasons.append("; ".join(fo["fidelity"]["reasons"] + nf["fidelity"]["reasons"])
                           or "none")
            srtts += [(p["bad_s"] - p["first_loss_s"]) / p["retire_rtts"]
                      for f in m["faults"] for p in f["failed_paths"] if p["retire_rtts"]]
    srtt_ms = 1000 * sorted(srtts)[len(srtts) // 2] if srtts else None
    return ("What it runs: Three pairs of runs, all slowed "
            f"{k} times (`mrcemu run --slowdown {k}`): the `failover` workload with no "
            "fault (MRC), then `mrcemu run "
            "failover` (MRC, then RoCE, same seed): the iterated all-to-all "
            f"({spec.workload.iterations} iterations of {spec.workload.size:,} B "
            f"messages), spine p3s1 dying at t={spec.faults[0].at:g} s and link p5l0-p5s2 "
            f"going gray at t={spec.faults[1].at:g} s. Times are in full-speed seconds "
            "(a slowed run's divided by its slowdown).\n\n"
            "The targets, per column: no EV retired with no "
            "fault; every failed path stopped within 2 RTTs of the first packet lost on "
            "it, and retired within 4; no data onto it once retired; MRC's job with the "
            "faults at most 1.10 times without; each fault costs at most 3 round trips "
            "at the level before (docs/paper.md: the goodput short of the level, "
            "summed until a bin is back at it, over level x the median smoothed RTT); "
            "RoCE's job at least 3 times MRC's. The lowest 100 ms bin after the fault's own "
            "is shown as well, as what it is: at 20 Mb/s a 100 ms bin is about 7 round "
            "trips.\n\n"
            "| pair | EVs retired, no fault | EVs retired before the first fault | false "
            "retirements, no fault / failover | MRC job "
            "no fault | MRC job failover | **failover / no fault** | RoCE job failover | "
            "**RoCE / MRC** | spine: **stopped** / **retired** after the loss, max "
            "RTTs (how many within 2 / 4; data packets after) | gray: the same | **cost** "
            "in RTTs, spine / gray (no-fault run, same windows) | lowest 100 ms "
            "goodput after the fault / level before (no-fault run) | MRC RTOs | fidelity "
            "no fault / MRC / RoCE |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
            + "\n\nFidelity reasons: " + " | ".join(reasons) + ".\n\n"
            "An RTT here is the connection's smoothed RTT at the end of the run ("
            + (f"median {srtt_ms:.0f} ms full-speed in these runs" if srtt_ms else "none")
            + "). A path is stopped (no new data on it, its probes sent) when a packet on "
            "it is late against the path's own round trips: its smoothed RTT plus one "
            f"deviation, plus the {slack_ms():.0f} ms the hosts may add in a faithful run; "
            "the packet goes again elsewhere at six deviations. It is retired on proof: a "
            "later packet on the same EV arrived (per-EV order), its control-class probe "
            "went unanswered for an RTT plus four deviations plus that slack (then its "
            "packets still in flight go again at once), or its data-class probe's answer "
            "reported the packet missing.\n\n"
            + flap_vs_clean())


run = failover
