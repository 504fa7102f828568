"""A study's figures: the hash census's uplink loads against the binomial a uniform hash
gives, a panel a size."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def census(doc: dict, dest: Path) -> None:
    """`doc`: census_run.run's result. Each size's fitted loads (one uplink a leaf a
    draw) as bars, the binomial's expectation over the same bins as points: a column a
    size, a row a count of QPs a pair."""
    hosts = sorted({s["hosts"] for s in doc["sizes"]})
    qps = sorted({s["qps"] for s in doc["sizes"]})
    fig, axes = plt.subplots(len(qps), len(hosts), figsize=(3.6 * len(hosts), 3.2 * len(qps)),
                             squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    for s in doc["sizes"]:
        ax = axes[qps.index(s["qps"])][hosts.index(s["hosts"])]
        ax.set_visible(True)
        bins = s["fit"]["bins"]
        xs = list(range(len(bins)))
        labels = [f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in (b["loads"] for b in bins)]
        total = s["fit"]["observations"]
        ax.bar(xs, [b["observed"] / total for b in bins], color="#1f77b4", alpha=0.7,
               label="counted")
        ax.plot(xs, [b["expected"] / total for b in bins], "o", color="#d62728",
                label=f"Bin({s['fit']['n']}, 1/{s['spines']})")
        ax.set_xticks(xs, labels)
        pv = s["fit"]["p_value"]
        ax.set_title(f"{s['hosts']} hosts, {s['qps']} QP{'s' * (s['qps'] > 1)} a pair, "
                     f"{s['draws']} draws\nχ² p = "
                     + ("n/a" if pv is None else f"{pv:.3g}"), fontsize=9)
        ax.set_xlabel("QPs on an uplink")
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("share of uplinks")
        row[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dest, dpi=110)
    plt.close(fig)


def collisions(sizes: list[dict], dest: Path) -> None:
    """Each transport's mean step efficiency against the fabric's hosts, its p10-p90 over
    the steps as error bars; a hollow marker where a size's runs were not all faithful."""
    from mrcemu.study.collisions import row_qps

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    names = sorted({n for s in sizes for n in s["transports"]}, key=lambda n: (n != "mrc", n))
    for name in names:
        pts = [(s["hosts"], s["transports"][name], s["faithful"]) for s in sizes
               if s["transports"].get(name, {}).get("efficiency_mean") is not None]
        if not pts:
            continue
        xs = [h for h, _, _ in pts]
        ys = [r["efficiency_mean"] for _, r, _ in pts]
        lo = [r["efficiency_mean"] - r["efficiency_p10"] for _, r, _ in pts]
        hi = [r["efficiency_p90"] - r["efficiency_mean"] for _, r, _ in pts]
        label = "MRC (sprayed)" if name == "mrc" else f"RoCE, {row_qps(name)} QP a pair"
        line = ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label)
        for x, y, (_, _, ok) in zip(xs, ys, pts, strict=True):
            if not ok:
                ax.plot([x], [y], "o", mfc="white", color=line[0].get_color())
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({s["hosts"] for s in sizes}), [str(s["hosts"]) for s in sizes])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("hosts")
    ax.set_ylabel("step efficiency (ideal / measured)")
    ax.set_title("A synchronous step's efficiency: cross-leaf permutations", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dest, dpi=110)
    plt.close(fig)


def failures(sizes: list[dict], dest: Path) -> None:
    """Each trial's extra step time (over its twin without the fault) in base round
    trips against the fabric's hosts, a colour a transport and a marker a kind, the
    trials whose link carried none of the step's flows hollow; each transport's median
    over the others as a line."""
    from mrcemu.study.failures import KINDS

    fig, ax = plt.subplots(figsize=(8.0, 4.0))
    colours = {"mrc": "#1f77b4", "roce": "#d62728"}
    side = {"mrc": -0.15, "roce": 0.15}  # each transport's trials a little aside, log2 x
    marks = dict(zip(KINDS, ("o", "s"), strict=True))
    hosts = sorted({s["hosts"] for s in sizes})
    for transport, colour in colours.items():
        med = []
        for s in sizes:
            for r in (r for r in s["runs"] if r["transport"] == transport):
                for kind in KINDS:
                    rows = [t for t in r["trials"] if t["kind"] == kind and "extra_rtts" in t]
                    # spread along x, so a size's trials do not hide each other
                    n = max(1, len(rows) - 1)
                    xs = [s["hosts"] * 2 ** (side[transport] + 0.12 * (i / n - 0.5))
                          for i in range(len(rows))]
                    for x, t in zip(xs, rows, strict=True):
                        ax.plot([x], [max(t["extra_rtts"], 0.01)], marks[kind], color=colour,
                                mfc=colour if t["crossed"] else "white", alpha=0.7, ms=4)
                hit = [t["extra_rtts"] for t in r["trials"]
                       if t.get("crossed") and "extra_rtts" in t]
                if hit:
                    med.append((s["hosts"], max(statistics.median(hit), 0.01)))
        if med:
            ax.plot(*zip(*med, strict=True), "-D", color=colour, ms=6,
                    label=("MRC (sprayed)" if transport == "mrc" else "RoCE, 1 QP a pair")
                    + ": median")
    for kind, m in marks.items():
        ax.plot([], [], m, color="grey", label=kind)
    ax.axhline(4, ls="--", color="grey", lw=1, label="4 base round trips")
    ax.set_xscale("log", base=2)
    ax.set_xlim(hosts[0] / 1.6, hosts[-1] * 1.6)
    ax.set_yscale("log")
    ax.set_xticks(hosts, [str(h) for h in hosts])
    ax.set_xlabel("hosts")
    ax.set_ylabel("extra step time (base round trips)")
    ax.set_title("One link failing inside a synchronous step: what the step loses",
                 fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(dest, dpi=110)
    plt.close(fig)
