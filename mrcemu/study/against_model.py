"""The collision model (atscale) against the emulated steps: for each size and transport
the study measured, the model's step efficiency over the same fabric shape, the same
QPs a pair and the transport's own lone-flow efficiency, and how far the measured mean
is from it. Pure: it reads the study's results and runs no fabric."""

from __future__ import annotations

from mrcemu.atscale.clos import Clos
from mrcemu.atscale.step import Transport, permutation_efficiency
from mrcemu.study.collisions import row_qps, row_runs
from mrcemu.study.fabrics import ECMP_FABRICS, MRC_FABRICS
from mrcemu.topology import Topology, load

# Within this share of the model's mean, and inside its p10-p90, a measured mean agrees.
# A band of no width (spraying: every draw the same step) leaves the share alone to judge.
WITHIN = 0.10


def clos_of(topo: Topology) -> Clos:
    return Clos(hosts=topo.hosts, hosts_per_leaf=topo.hosts_per_leaf,
                spines=topo.spines_per_plane, planes=topo.planes,
                uplink=topo.fabric_link_mbps / topo.host_link_mbps)


def transport_of(name: str, alone: float) -> Transport:
    """A row's name (`mrc`, `roce-4qp`) as the model's transport."""
    return Transport(sprayed=name == "mrc", qps=row_qps(name), efficiency=alone)


def _faithful(size: dict, name: str) -> bool:
    """Whether the runs behind a row (its transport's lone flow and its steps) were."""
    runs = {r["label"]: r for r in size.get("runs", [])}
    return all(runs[k]["faithful"] for k in row_runs(name, size["qps"]) if k in runs)


def compare(collisions: dict, draws: int, seed: int) -> list[dict]:
    """A row a size and transport the study measured: the model's band, the measured
    mean, their ratio and whether they agree."""
    out = []
    for s in collisions["sizes"]:
        for name, row in s["transports"].items():
            if row.get("efficiency_mean") is None or not row.get("alone_efficiency"):
                continue
            topo = load((MRC_FABRICS if name == "mrc" else ECMP_FABRICS)[s["hosts"]])
            band = permutation_efficiency(clos_of(topo), transport_of(
                name, row["alone_efficiency"]), 1 if name == "mrc" else draws, seed)
            got = row["efficiency_mean"]
            off = got / band.mean - 1
            out.append({"hosts": s["hosts"], "transport": name, "topology": topo.name,
                        "model_mean": round(band.mean, 4), "model_p10": round(band.p10, 4),
                        "model_p90": round(band.p90, 4), "draws": band.draws,
                        "measured_mean": got, "off": round(off, 4),
                        "agrees": abs(off) <= WITHIN and (band.p10 == band.p90
                                                          or band.p10 <= got <= band.p90),
                        "faithful": _faithful(s, name)})
    return out


def compare_failures(failures: dict, draws: int, seed: int) -> list[dict]:
    """A row a size and transport the failure study measured: the trials whose link
    carried the step's flows, against the model's P_hit and the counts a binomial of
    that chance holds 95 % of the time for the trials that acted."""
    from mrcemu.atscale.failure import p_hit
    from mrcemu.study.collisions import bucket_band
    from mrcemu.study.failures import KINDS

    out = []
    for s in failures["sizes"]:
        for r in s["runs"]:
            acted = sum(r["summary"][k]["acted"] for k in KINDS)
            crossed = sum(1 for t in r["trials"] if t.get("crossed") and "extra_s" in t)
            if not acted:
                continue
            topo = load(r["topology"])
            p = p_hit(clos_of(topo), Transport(sprayed=r["transport"] == "mrc"), draws, seed)
            lo, hi = bucket_band(p, acted)
            out.append({"hosts": s["hosts"], "transport": r["transport"],
                        "topology": topo.name, "model_p_hit": round(p, 4), "band": [lo, hi],
                        "acted": acted, "crossed": crossed, "agrees": lo <= crossed <= hi,
                        "faithful": r["faithful"]})
    return out
