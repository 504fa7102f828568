"""The hash census run: for each size, its ECMP fabric brought up, `draws` draws probed
and counted (fabric/census_probes.py), the fabric torn down; the counts judged by
census.py. A draw counted wrong at any hop stops the census: its figures would not be
the kernel's hash."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from mrcemu.errors import MrcemuError
from mrcemu.study import census
from mrcemu.study.fabrics import ECMP_FABRICS
from mrcemu.topology import Topology, load

Ui = Callable[[str, dict], None]

# A draw counted wrong (another packet in the fabric) is sent again this often.
RECOUNTS = 2
# QPs probed for what the hash reads: enough to tell a field that moves about
# (spines - 1) / spines of them from one that moves none.
FIELD_QPS = 32


def fabric_for(hosts: int) -> Topology:
    if hosts not in ECMP_FABRICS:
        raise MrcemuError(f"no census fabric of {hosts} hosts: use "
                          + ", ".join(str(h) for h in ECMP_FABRICS))
    return load(ECMP_FABRICS[hosts])


class _Counter:
    """Probes sent and counted, a draw counted again while a hop is off; how often."""

    def __init__(self, topo: Topology, probe) -> None:
        self.topo, self.probe, self.recounted = topo, probe, 0

    def count(self, probes: list[census.Probe], packets: list[bytes],
              what: str) -> census.Loads:
        sends = [(p.src, p.dst, b) for p, b in zip(probes, packets, strict=True)]
        for attempt in range(RECOUNTS + 1):
            got = census.loads(self.topo, self.probe.run(sends))
            wrong = census.miscounted(self.topo, probes, got)
            if not wrong:
                return got
            if attempt == RECOUNTS:
                raise MrcemuError(f"census {what} on {self.topo.name} counted wrong "
                                  f"{RECOUNTS + 1} times: " + "; ".join(wrong[:3]))
            self.recounted += 1
            self.probe.quiet()
        raise AssertionError("unreachable")


def _draws(topo: Topology, probe, draws: int, qps: int, seed: int, ui: Ui) -> dict:
    """One size's census with `qps` QPs a pair, on its running, idle fabric."""
    rng = random.Random(f"census:{seed}:{topo.hosts}:{qps}")
    counter = _Counter(topo, probe)
    counted: list[census.Loads] = []
    t0 = time.monotonic()
    for k in range(draws):
        probes = census.draw(topo, rng, qps)
        counted.append(counter.count(probes, [p.packet() for p in probes], f"draw {k}"))
        ui("draw", {"n": k + 1, "total": draws, "topology": f"{topo.name} x{qps}"})
    out = census.summarize(topo, qps, counted)
    out["seconds"] = round(time.monotonic() - t0, 1)
    out["recounted"] = counter.recounted  # draws counted again: the fabric was not idle
    return out


def _fields(topo: Topology, probe, pids: dict[str, int], seed: int, ui: Ui) -> dict:
    """Which header fields (and the seed) the leaves' hash reads: FIELD_QPS QPs probed
    alone, then again with one field changed, then again under another seed."""
    from mrcemu.fabric.census_probes import hash_seeds, set_hash_seeds

    rng = random.Random(f"fields:{seed}:{topo.hosts}")
    probes: list[census.Probe] = []
    while len(probes) < FIELD_QPS:
        probes += census.draw(topo, rng, 1)
    probes = probes[:FIELD_QPS]

    counter = _Counter(topo, probe)

    def uplink(p: census.Probe, **change: int) -> tuple[int, int]:
        return census.uplink_of(counter.count([p], [p.packet(**change)], "field probe"))

    base = [uplink(p) for p in probes]
    moved: dict[str, list[bool]] = {f: [] for f in census.FIELDS}
    for p, was in zip(probes, base, strict=True):
        sport, label = p.sport, p.flow_label
        while sport == p.sport:  # another value a RoCEv2 NIC could give it
            sport = rng.randrange(0xC000, 0x10000)
        while label == p.flow_label:
            label = rng.randrange(1 << 20)
        moved["udp_source_port"].append(uplink(p, sport=sport) != was)
        moved["flow_label"].append(uplink(p, flow_label=label) != was)
    leaves = [n for n in pids if n.startswith("p0l")]
    old = hash_seeds(pids, leaves)
    try:
        set_hash_seeds(pids, {n: str(rng.randrange(1, 1 << 32)) for n in leaves})
        moved["hash_seed"] = [uplink(p) != was for p, was in zip(probes, base, strict=True)]
    finally:
        set_hash_seeds(pids, old)
    ui("stage", {"text": f"{topo.name}: what the hash reads, measured on {FIELD_QPS} QPs"})
    return census.hashed(moved, topo.spines_per_plane)


def census_size(topo: Topology, draws: int, qps: list[int], seed: int,
                ui: Ui) -> tuple[list[dict], dict]:
    """One size's census at each count of QPs a pair, and what its hash reads, on its own
    fabric, brought up and torn down here."""
    from mrcemu.fabric.census_probes import Census
    from mrcemu.fabric.launch import launch, stop
    from mrcemu.fabric.servers import of_running
    from mrcemu.fabric.state import require_state

    ui("stage", {"text": f"bringing up {topo.name} ({topo.hosts} hosts)"})
    launch(topo, lambda stage, n, total: ui("up", {"stage": stage, "n": n, "total": total}))
    try:
        st = require_state()
        servers = of_running(st)
        with Census(topo, st.nodes, lambda: servers.counters()["state"]) as probe:
            probe.quiet()
            fields = _fields(topo, probe, st.nodes, seed, ui)
            return [_draws(topo, probe, draws, m, seed, ui) for m in qps], fields
    finally:
        stop()


def run(hosts: list[int], draws: int, qps: list[int], seed: int, ui: Ui) -> dict:
    """Every size's census, smallest first, at each count of QPs a pair; what is hashed
    and what each draw varied."""
    topos = [fabric_for(h) for h in sorted(set(hosts))]  # an unknown size stops here
    sizes: list[dict] = []
    fields: dict[str, dict] = {}
    for t in topos:
        got, fields[str(t.hosts)] = census_size(t, draws, sorted(set(qps)), seed, ui)
        sizes += got
    return {"hashed": census.HASHED, "varied": census.VARIED, "seed": seed,
            "fields": fields, "sizes": sizes}
