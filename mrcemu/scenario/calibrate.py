"""Measure what a packet through a topology's fabric costs on this machine, for
`--slowdown auto` (mrcemu/slowdown.py picks from it).

The calibration brings the topology's fabric up at CAL_SLOWDOWN, runs an MRC all-to-all
of CAL_SECONDS at line rate, and divides the machine's busy CPU over it (/proc/stat:
every process and the kernel), less the harness's own (filling and hashing the
sources, which a run's report does not count as the NIC's), by the data packets
delivered. The result is kept for the machine's uptime (in the run directory, a tmpfs)
and used again for the same topology on the same machine; `mrcemu calibrate` measures
it anew.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict

from mrcemu import fidelity, rundir
from mrcemu import slowdown as auto
from mrcemu.errors import MrcemuError
from mrcemu.fabric.launch import launch, stop
from mrcemu.fabric.servers import split_servers
from mrcemu.fabric.state import require_state
from mrcemu.nic import ops
from mrcemu.nic.client import NicClient, poll_interval
from mrcemu.topology import Topology

Ui = Callable[[str, dict], None]
KINDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq")
BUSY = ("user", "nice", "system", "irq", "softirq")


def fingerprint(topo: Topology) -> str:
    """The topology's name and a digest of every field: a file edited since is another
    fabric."""
    digest = hashlib.sha256(json.dumps(asdict(topo), sort_keys=True).encode()).hexdigest()
    return f"{topo.name}:{digest[:12]}"


def machine_cpu() -> dict[str, float]:
    """The machine's CPU seconds by kind since boot (/proc/stat's first line)."""
    with open("/proc/stat") as f:
        vals = f.readline().split()[1:]
    tck = os.sysconf("SC_CLK_TCK")
    return {k: int(v) / tck for k, v in zip(KINDS, vals[:len(KINDS)], strict=True)}


def cached(topo: Topology, machine: str) -> auto.Calibration | None:
    """The calibration kept for this topology on this machine, if any."""
    try:
        kept = json.loads(rundir.CALIBRATION.read_text())
        cal = auto.Calibration.from_json(kept[fingerprint(topo)])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return cal if cal.machine == machine and cal.cpus == fidelity.cpus() else None


def _keep(topo: Topology, cal: auto.Calibration) -> None:
    keep_entry(fingerprint(topo), cal.to_json())


def kept_entry(key: str) -> dict | None:
    """What the calibration file keeps under `key`, if anything."""
    try:
        return json.loads(rundir.CALIBRATION.read_text())[key]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def keep_entry(key: str, entry: dict) -> None:
    try:
        kept = json.loads(rundir.CALIBRATION.read_text())
    except (OSError, ValueError):
        kept = {}
    kept[key] = entry
    rundir.CALIBRATION.parent.mkdir(parents=True, exist_ok=True)
    tmp = rundir.CALIBRATION.with_suffix(".tmp")
    tmp.write_text(json.dumps(kept, indent=1))
    tmp.replace(rundir.CALIBRATION)


def measure(topo: Topology, ui: Ui, machine: str, commit: str | None) -> auto.Calibration:
    """Bring the fabric up at CAL_SLOWDOWN, time an all-to-all on it, tear it down."""
    k = auto.CAL_SLOWDOWN
    slowed = topo.slowed(k)
    ui("stage", {"text": f"calibrating this machine for {topo.name} (once per boot): "
                         f"its fabric at slowdown {k:g}"})
    launch(slowed, lambda stage, n, total: ui("up", {"stage": stage, "n": n, "total": total}),
           slowdown=k)
    try:
        return _all_to_all(slowed, k, fingerprint(topo), machine, commit, ui)
    finally:
        stop()


def _all_to_all(topo: Topology, k: float, name: str, machine: str, commit: str | None,
                ui: Ui) -> auto.Calibration:
    size = auto.cal_message_bytes(topo.host_link_mbps * k, topo.planes, topo.hosts)
    writes = [{"src": s, "dst": d, "size": size, "transport": "mrc", "seed": s + 1}
              for s in range(topo.hosts) for d in range(topo.hosts) if s != d]
    pmtu = require_state().transport().pmtu
    packets = len(writes) * math.ceil(size / pmtu)
    ui("stage", {"text": f"calibrating: an all-to-all of {len(writes)} x {size >> 10} KiB"})
    with NicClient(range(topo.hosts), split_servers()) as client:
        client.ask_each(ops.Fidelity(reset=True))
        before, t0 = machine_cpu(), time.monotonic()
        client.post(writes)
        limit = 30 * auto.CAL_SECONDS * k
        done = client.wait(writes, lambda: time.monotonic() - t0 > limit,
                           every=poll_interval(topo.host_link_mbps))
        seconds = time.monotonic() - t0
        after = machine_cpu()
        harness = sum(r["fidelity"]["harness_cpu_s"] for r in client.ask_each(ops.Fidelity()))
        client.verify(writes)
    if not done or not all(w["ok"] for w in writes):
        raise MrcemuError("the calibration's all-to-all did not complete intact: the fabric "
                          "is not healthy; see 'mrcemu status', or give --slowdown a number")
    busy = sum(after[x] - before[x] for x in BUSY) - harness
    total = sum(after[x] - before[x] for x in KINDS)
    return auto.Calibration(
        cpu_us_per_packet=round(auto.cost_us(busy, packets), 2), packets=packets,
        seconds=round(seconds, 3), busy_share=round(busy / total, 3) if total else 0.0,
        cpus=fidelity.cpus(), slowdown=k, topology=name,
        machine=machine, measured=datetime.datetime.now().isoformat(timespec="seconds"),
        commit=commit)


def calibration(topo: Topology, ui: Ui, fresh: bool = False) -> auto.Calibration:
    """The calibration for `topo` on this machine: kept, or measured now (`fresh`:
    measured now whatever is kept)."""
    from mrcemu.scenario.job import machine, source_commit

    here = machine()
    cal = None if fresh else cached(topo, here)
    if cal is None:
        cal = measure(topo, ui, here, source_commit())
        _keep(topo, cal)
    return cal


def choose(topo: Topology, phases: list[list[tuple[int, int, int]]], ui: Ui) -> auto.Pick:
    """The slowdown `auto` picks for a workload of `phases` on `topo` (at full speed)."""
    cal = calibration(topo, ui)
    demand = auto.demand_pps(topo.host_link_mbps, topo.mtu, topo.planes, phases)
    return auto.pick(cal, demand, fidelity.cpus())
