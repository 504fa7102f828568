"""`mrcemu run`: bring a fabric up, run the scenario over each transport with its fault
timeline (healing in between), and leave a report folder behind, even after Ctrl-C.

The folder: report.json, report.md, goodput.png, ev-states.png, capture.pcapng, logs/ (the
daemons' logs, and each transport's raw record, raw-<transport>.json.gz).
"""

from __future__ import annotations

import datetime
import gzip
import json
import os
import platform
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mrcemu import fidelity
from mrcemu.capture import Capture, merge
from mrcemu.fabric import inject, state
from mrcemu.fabric.launch import launch, stop
from mrcemu.fabric.servers import of_running
from mrcemu.nic import ops
from mrcemu.preload import Preload
from mrcemu.scenario import analysis, fullspeed, report
from mrcemu.scenario.model import Scenario, single_policy
from mrcemu.scenario.runner import run_transport
from mrcemu.topology import Layout, latency

Ui = Callable[[str, dict], None]


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def source_commit() -> str | None:
    """The commit of mrcemu's source this process runs (`+dirty` with uncommitted
    changes), for a result file to say what measured it; None outside a git checkout."""
    import subprocess

    here = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode:
            return None
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain",
                                "--untracked-files=no", "--", "mrcemu"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


def _write_raw(dest: Path, raw: dict) -> None:
    # json.dumps, not json.dump: only the one-shot encoder is the C one (a 2 MB record:
    # 0.03 s against 0.3 s); gzip's level 6 writes it 5 times faster than its default 9
    # for 4 % more bytes.
    dest.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(dest, "wt", compresslevel=6) as f:
        f.write(json.dumps(raw))


def _copy_logs(dest: Path) -> None:
    """Every daemon, fault and manager log: the run's own fabric's (a bring-up starts
    them anew, rundir.rotate_logs)."""
    dest.mkdir(parents=True, exist_ok=True)
    for p in [*(state.RUN_DIR / "logs").glob("*"), state.LOG]:
        if p.is_file() and p.stat().st_size:
            shutil.copyfile(p, dest / p.name)


def _named(ui: Ui, name: str) -> Ui:
    """`ui`, with each event's transport given as the run's name."""
    return lambda event, d: ui(event, {**d, "transport": name} if "transport" in d else d)


def _set_policy(sc: Scenario, lb: str) -> None:
    """Every NIC's connections made again with load-balancing policy `lb` (the runs
    before have finished: none is busy)."""
    from mrcemu.fabric.servers import split_servers
    from mrcemu.nic.client import NicClient

    with NicClient(range(sc.topology.hosts), split_servers()) as client:
        # one generation past every pair's, for every NIC: both ends of each pair on it
        gen = max(r["gen"] for r in client.ask_each(ops.Generation())) + 1
        client.ask_each(ops.Configure(transport={"load_balancing": lb}, gen=gen))


def run(sc: Scenario, out_root: Path, ui: Ui, cluster: str | None = None,
        pace: dict | None = None) -> Path:
    """Run a scenario on a fabric of its own (split over `cluster`'s servers if given),
    and write its folder under `out_root`; returns the folder. `pace`: how its slowdown
    was chosen (scenario/calibrate.py's `paced`), for the report."""
    started, t_start = datetime.datetime.now(), time.monotonic()
    folder = out_root / f"{started:%Y%m%d-%H%M%S}-{sc.name}"
    folder.mkdir(parents=True, exist_ok=False)
    halt = threading.Event()
    interrupts = 0

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal interrupts
        interrupts += 1
        halt.set()
        ui("interrupt", {"count": interrupts})
        if interrupts > 1:
            raise KeyboardInterrupt

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    layout = Layout(sc.topology)
    summaries: dict[str, dict] = {}
    pcaps: list[Path] = []
    capture = None
    launched = up = False
    config: dict = {}
    config_cluster: dict | None = None
    usid_engine: str | None = None
    plots = Preload("mrcemu.scenario.plots")  # matplotlib, while the fabric comes up
    try:
        ui("stage", {"text": f"bringing up {sc.topology.name}"})
        launched = True
        launch(sc.topology, lambda stage, n, total: ui(
            "up", {"stage": stage, "n": n, "total": total}), seed=sc.seed,
            slowdown=sc.slowdown, transport=single_policy(sc.transport), cluster=cluster)
        up = True  # the logs are this fabric's from here on
        st = state.require_state()
        usid_engine = st.topology_snapshot.get("usid_engine")  # as `launch` decided it
        if st.cluster:
            placed: dict[str, int] = {}
            for server in st.placement.values():
                placed[server] = placed.get(server, 0) + 1
            # where each host, and so its NIC daemon, ran
            hosts_on = {f"h{h}": st.placement[f"h{h}"] for h in range(sc.topology.hosts)}
            config_cluster = {"file": st.cluster, "nodes_per_server": placed,
                              "hosts": hosts_on}
        pids, cfg = st.nodes, st.transport()
        window, config = cfg.init_cwnd // cfg.pmtu, cfg.to_json()
        capture = Capture(layout, pids, sc.capture.interfaces, folder / "pcap",
                          sc.capture.snaplen, sc.capture.max_mb, of_running(st))
        runs = sc.runs()
        for k, (name, transport, lb) in enumerate(runs):
            if halt.is_set():
                break
            if k:
                ui("stage", {"text": f"healed; settling {sc.settle_s:g} s"})
                time.sleep(sc.settle_s)
            if lb is not None:  # one of several policies: every NIC's QPs made anew on it
                _set_policy(sc, lb)
            capture.start(name)
            ui("transport", {"transport": name,
                             "iterations": sc.workload.iterations * len(sc.workload.sizes)})
            try:
                # what shows progress knows the run by its name (`mrc-reps`, say)
                raw = run_transport(sc, transport, layout, pids, _named(ui, name), halt)
            finally:
                pcaps += capture.stop()
            inject.heal(layout, pids)  # belt and braces: nothing carries over
            # The measurements first, as recorded: whatever the figures below make of
            # them, the run is not lost.
            _write_raw(folder / "logs" / f"raw-{name}.json.gz", raw)
            # One clock for every figure from here on: the fabric's own, at full speed.
            summaries[name] = fullspeed.at_full_speed(
                analysis.summarize(raw, layout, window), sc.slowdown)
            if transport == "mrc":  # the policy that chose each packet's EV
                summaries[name]["load_balancing"] = lb or config["load_balancing"]
            ui("transport_done", {"transport": name, "summary": summaries[name]})
    finally:
        try:
            if capture is not None:
                pcaps += capture.stop()
            if up:
                _copy_logs(folder / "logs")
            rep = {"scenario": sc.name, "description": sc.description,
                   "topology": sc.topology.name, "source": sc.source,
                   "slowdown": sc.slowdown, "scale": latency.describe(sc.topology, sc.slowdown),
                   "slowdown_pick": pace or {"how": "given", "slowdown": sc.slowdown},
                   **({"cluster": config_cluster} if config_cluster else {}),
                   "started": started.isoformat(timespec="seconds"), "machine": machine(),
                   "commit": source_commit(),
                   # what performed the switches' End: the kernel's seg6local or BPF
                   "usid_engine": usid_engine,
                   # what the run took on this host's clock, however slowed: the only
                   # time in the report that is not the fabric's own at full speed
                   "wall_clock_s": round(time.monotonic() - t_start, 1),
                   "partial": halt.is_set() or len(summaries) < len(sc.runs()),
                   # stopped by Ctrl-C or SIGTERM: a caller running several jobs (`paper`)
                   # starts no more
                   "interrupted": interrupts > 0,
                   "seed": sc.seed, "transport_config": config,
                   "workload": {"kind": sc.workload.kind, "size": sc.workload.size,
                                "iterations": sc.workload.iterations,
                                **({"sizes": list(sc.workload.sweep)}
                                   if sc.workload.sweep else {}),
                                **({"qps": sc.workload.qps} if sc.workload.qps > 1 else {}),
                                **({"pairs": [f"h{a}-h{b}" for a, b in sc.workload.pairs],
                                    "duration_s": sc.workload.duration / sc.slowdown,
                                    "depth": sc.workload.depth}
                                   if sc.workload.kind == "stream" else {})},
                   "transports": summaries,
                   "fidelity": fidelity.combine({t: v["fidelity"] for t, v in summaries.items()
                                                 if "fidelity" in v})}
            report.write(folder, rep)
            if summaries:
                plots.get().goodput(rep, folder / "goodput.png")
                plots.get().ev_states(rep, folder / "ev-states.png")
            if pcaps:
                merge(pcaps, folder / "capture.pcapng")
                shutil.rmtree(folder / "pcap", ignore_errors=True)
        finally:
            try:
                if launched and state.load_state() is not None:
                    ui("stage", {"text": "tearing the fabric down"})
                    stop()
            finally:
                for s, h in old.items():
                    signal.signal(s, h)
    return folder
