"""`make bench`, section "The NIC daemon's pace": what the slowdown auto picks on this
machine, whether the runs at it (and at the ladder's step below) are faithful, how late
the timers ran, and the streaming all-to-all at the pace auto picks."""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.common import fid, run_report

TITLE = "The NIC daemon's pace: --slowdown auto, timers, streaming"
RUNS = 3  # of each slowdown: faithful means faithful in every one


def _timer_p99(rep: dict) -> float:
    """The worst NIC's timer lateness at p99 over the run's transports, seconds."""
    return max(v["fidelity"]["timer_late_p99_s"] for v in rep["transports"].values())


def _faithful(rep: dict) -> bool:
    return all(v["fidelity"]["ok"] for v in rep["transports"].values())


def _failover(tmp: str) -> tuple[str, float]:
    """`failover` at auto RUNS times, and RUNS times at the ladder's step below auto's
    pick: the rows, and the pick."""
    from mrcemu.slowdown import LADDER

    rows, pick, verdicts = [], None, {}
    for i in range(RUNS):
        rep = run_report("failover", f"{tmp}/auto{i}", "auto")
        pick = rep["slowdown"]
        verdicts.setdefault(pick, []).append(_faithful(rep))
        rows.append(_row(f"auto ({pick:g})", rep))
    assert pick is not None
    below = max((k for k in LADDER if k < pick), default=None)
    if below is not None:
        for i in range(RUNS):
            rep = run_report("failover", f"{tmp}/below{i}", str(below))
            verdicts.setdefault(below, []).append(_faithful(rep))
            rows.append(_row(f"{below:g}", rep))
    whole = sorted(k for k, v in verdicts.items() if len(v) == RUNS and all(v))
    p3 = (f"**{whole[0]:g}**" if whole else f"above {pick:g}") + (
        f" (not {below:g}: faithful in {sum(verdicts[below])} of {RUNS})"
        if below is not None and below not in whole else "")
    return ("| slowdown | MRC | RoCE | timers late, p99 (the worst NIC) | wall time |\n"
            "|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
            f"The smallest slowdown at which `failover` was faithful {RUNS} times in {RUNS} "
            f"(target: at most 2): {p3}.\n"), pick


def _row(k: str, rep: dict) -> str:
    t = rep["transports"]
    return (f"| {k} | {fid(t['mrc']['fidelity'])} | {fid(t['roce']['fidelity'])} | "
            f"{_timer_p99(rep) * 1e3:.2f} ms | {rep['wall_clock_s']:.0f} s |")


def _streaming(tmp: str) -> str:
    """The streaming all-to-all at the slowdown auto picks, against its bound."""
    import yaml

    from mrcemu.nic.daemon import PACING
    from mrcemu.topology import latency, load

    topo = load("default")
    size, iterations = 2 << 20, 2
    host_s = (topo.hosts - 1) * size * 8 / (topo.planes * topo.host_link_mbps * 1e6 * PACING)
    rtt = latency.longest_rtt_s(topo)
    bound = (topo.hosts * (topo.hosts - 1) * size * 8 / (host_s + rtt)) / 1e6  # Mb/s
    spec = {"description": "Streaming all-to-all, 2 MiB per message, 2 iterations.",
            "topology": "default", "transports": ["mrc"], "seed": 1,
            "workload": {"kind": "all-to-all", "size": "2MiB", "iterations": iterations}}
    scen = Path(tmp) / "p6.yaml"
    scen.write_text(yaml.safe_dump(spec))
    rep = run_report(str(scen), f"{tmp}/p6", "auto")
    v = rep["transports"]["mrc"]
    its = v["iteration_s"]
    # goodput over the iterations' own time (the job's, the harness's gaps left out)
    good = topo.hosts * (topo.hosts - 1) * size * 8 * len(its) / sum(its) / 1e6 if its else 0
    return (f"The streaming all-to-all (8 hosts, 2 MiB to each other host, "
            f"{iterations} iterations, MRC) at the slowdown auto picked "
            f"({rep['slowdown']:g}): {good:.0f} Mb/s over its iterations, against a bound of "
            f"{bound:.0f} Mb/s (each host's bytes at its NIC's paced rate, {PACING:g} of its "
            f"ports', plus a base round trip of {rtt * 1e3:.1f} ms an iteration): "
            f"**{good / bound:.2f}** of it (target: at least 0.90, at a slowdown of at most "
            f"4); the run {fid(v['fidelity'])}; data intact: "
            f"{'yes' if v['integrity_ok'] else 'NO'}.\n")


def run() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        table, pick = _failover(tmp)
        p6 = _streaming(tmp)
    return ("What it runs: `mrcemu run failover` (`make demo`'s job) "
            f"{RUNS} times at `--slowdown auto` and {RUNS} times at the ladder's step below "
            "the slowdown it picked; then the streaming all-to-all at auto. The "
            "timers' lateness at p99 in `make demo` (target: at most 0.2 ms) is the "
            "auto rows' timer column.\n\n" + table + "\n" + p6)
