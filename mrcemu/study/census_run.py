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
from mrcemu.topology import Topology, load

Ui = Callable[[str, dict], None]

# The ECMP fabric a census takes for each size: `ecmp` (two leaves of four) and the
# generated twins (topology/sizes.py).
# A draw counted wrong (another packet in the fabric) is sent again this often.
RECOUNTS = 2
ECMP_FABRICS = {8: "ecmp", 16: "rack4-ecmp", 32: "rack4x8-ecmp", 64: "rack8x8-ecmp"}


def fabric_for(hosts: int) -> Topology:
    if hosts not in ECMP_FABRICS:
        raise MrcemuError(f"no census fabric of {hosts} hosts: use "
                          + ", ".join(str(h) for h in ECMP_FABRICS))
    return load(ECMP_FABRICS[hosts])


def _draws(topo: Topology, probe, draws: int, qps: int, seed: int, ui: Ui) -> dict:
    """One size's census with `qps` QPs a pair, on its running fabric."""
    rng = random.Random(f"census:{seed}:{topo.hosts}:{qps}")
    counted: list[census.Loads] = []
    recounted, t0 = 0, time.monotonic()
    probe.quiet()
    for k in range(draws):
        probes = census.draw(topo, rng, qps)
        sends = [(p.src, p.dst, p.packet()) for p in probes]
        for attempt in range(RECOUNTS + 1):
            got = census.loads(topo, probe.run(sends))
            wrong = census.miscounted(topo, probes, got)
            if not wrong:
                break
            if attempt == RECOUNTS:
                raise MrcemuError(f"census draw {k} on {topo.name} counted wrong "
                                  f"{RECOUNTS + 1} times: " + "; ".join(wrong[:3]))
            recounted += 1
            probe.quiet()
        counted.append(got)
        ui("draw", {"n": k + 1, "total": draws, "topology": f"{topo.name} x{qps}"})
    out = census.summarize(topo, qps, counted)
    out["seconds"] = round(time.monotonic() - t0, 1)
    out["recounted"] = recounted  # draws counted again, the fabric not idle the first time
    return out


def census_size(topo: Topology, draws: int, qps: list[int], seed: int, ui: Ui) -> list[dict]:
    """One size's census at each count of QPs a pair, on its own fabric, brought up and
    torn down here."""
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
            return [_draws(topo, probe, draws, m, seed, ui) for m in qps]
    finally:
        stop()


def run(hosts: list[int], draws: int, qps: list[int], seed: int, ui: Ui) -> dict:
    """Every size's census, smallest first, at each count of QPs a pair; what is hashed
    and what each draw varied."""
    topos = [fabric_for(h) for h in sorted(set(hosts))]  # an unknown size stops here
    return {"hashed": census.HASHED, "varied": census.VARIED, "seed": seed,
            "sizes": [s for t in topos for s in census_size(t, draws, sorted(set(qps)), seed, ui)]}
