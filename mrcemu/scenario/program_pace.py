"""What an exec workload's programs cost the emulated NICs, for `--slowdown auto`.

A program spinning on its buffer costs the NICs wake-ups rather than CPU per packet, so
the calibration's cost per packet cannot see it. The probe brings the scenario's fabric
up at the packets' pick and runs its programs there as the run will (its first
transport, its capture and its map) without its faults, for PROBE_S of the fabric's
time; then judges how late the NICs' timers, delay-line releases and paced sends ran.
`slowdown.settle` turns that into the pace. The result is kept for the machine's uptime,
per topology, programs and pace, beside the calibration.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import tempfile
import threading
import time
from pathlib import Path

from mrcemu import fidelity
from mrcemu import slowdown as auto
from mrcemu.capture import Capture
from mrcemu.fabric import state
from mrcemu.fabric.launch import launch, stop
from mrcemu.fabric.servers import of_running, split_servers
from mrcemu.nic import ops
from mrcemu.nic.client import NicClient
from mrcemu.scenario import program_run
from mrcemu.scenario.calibrate import Ui, fingerprint, keep_entry, kept_entry
from mrcemu.scenario.model import Scenario
from mrcemu.scenario.runner import MapRecorder
from mrcemu.topology import Layout


def key(sc: Scenario, k0: float) -> str:
    """The kept probe's name: the topology, the programs, their transport and the pace."""
    progs = [(p.host, p.argv, p.ready) for p in sc.workload.programs]
    digest = hashlib.sha256(json.dumps([progs, sc.runs()[0][1], k0]).encode()).hexdigest()
    return f"programs:{fingerprint(sc.topology)}:{digest[:12]}"


def probe(sc: Scenario, k0: float, ui: Ui, fresh: bool = False) -> auto.Probe:
    """How late the NICs ran while `sc`'s programs (`sc` at full speed) ran slowed `k0`
    times: kept, or measured now (`fresh`: now, whatever is kept)."""
    from mrcemu.scenario.job import machine

    here, name = machine(), key(sc, k0)
    kept = None if fresh else kept_entry(name)
    if kept is not None and kept.get("machine") == here:
        return auto.Probe.from_json(kept)
    run = sc.slowed(k0) if k0 != 1.0 else sc
    ui("stage", {"text": f"pacing: its {len(sc.workload.programs)} programs for "
                         f"{auto.PROBE_S * k0:g} s at slowdown {k0:g}, to measure what they "
                         "cost the NICs (once per boot)"})
    launch(run.topology, lambda stage, n, total: ui(
        "up", {"stage": stage, "n": n, "total": total}), slowdown=k0)
    try:
        with tempfile.TemporaryDirectory(prefix="mrcemu-pace-") as tmp:
            seconds, recs = _measure(run, Path(tmp))
    finally:
        stop()
    verdict = fidelity.judge({f"h{h}": r["fidelity"] for h, r in enumerate(recs)},
                             fidelity.cpus(), fidelity.for_links(run.topology.host_link_mbps))
    share, worst = auto.lateness_share(verdict)
    got = auto.Probe(slowdown=k0, seconds=round(seconds, 3), share=round(share, 3),
                     worst=worst, machine=here,
                     measured=datetime.datetime.now().isoformat(timespec="seconds"))
    keep_entry(name, got.to_json())
    return got


def _measure(run: Scenario, tmp: Path) -> tuple[float, list[dict]]:
    """The programs for PROBE_S of the fabric's time on the running fabric, with the
    run's capture and map: how long that took here, and each NIC's fidelity record."""
    st = state.require_state()
    layout, pids = Layout(run.topology), st.nodes
    capture = Capture(layout, pids, run.capture.interfaces, tmp, run.capture.snaplen,
                      run.capture.max_mb, of_running(st))
    with NicClient(range(run.topology.hosts), split_servers()) as client:
        client.ask_each(ops.Fidelity(reset=True))
        t0 = time.monotonic()
        mapper = (MapRecorder(t0, layout, pids, run.map_interval_ms / 1e3,
                              slowdown=run.slowdown) if run.map_interval_ms else None)
        capture.start("pace")
        if mapper is not None:
            mapper.start()
        try:
            program_run.run(run.workload.programs, run.runs()[0][1],
                            t0 + auto.PROBE_S * run.slowdown, threading.Event())
        finally:
            if mapper is not None:
                mapper.stop()
            capture.stop()
        return time.monotonic() - t0, client.ask_each(ops.Fidelity())
