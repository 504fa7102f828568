"""A study's figures: the hash census's uplink loads against the binomial a uniform hash
gives, a panel a size."""

from __future__ import annotations

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
