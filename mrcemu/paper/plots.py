"""A sweep experiment's figure, drawn as the white paper's Fig. 16/17: bus bandwidth
against message size (log scale), a line per configuration, a panel per loss level."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"mrc": ("MRC, 1 QP, 8 planes", "#d62728", "o"),
         "roce-1qp": ("RoCE, 1 QP, ECMP", "#1f77b4", "s")}


def sweep(table: dict[str, dict[str, dict]], dest: Path, title: str,
          capacity_mbps: float) -> None:
    """`table`: loss (percent, as text) -> configuration -> size label -> busbw (Mb/s,
    full speed) or None where the run did not complete that size."""
    fig, axes = plt.subplots(1, len(table), figsize=(4.6 * len(table), 3.6), squeeze=False,
                             sharey=True)
    for ax, (loss, row) in zip(axes[0], table.items(), strict=True):
        for label, per in row.items():
            name, color, marker = STYLE.get(label, (f"RoCE, {label[5:]}, ECMP", "#2ca02c",
                                                    "^"))
            xs = list(range(len(per)))
            ys = [v if v is not None else float("nan") for v in per.values()]
            ax.plot(xs, ys, marker=marker, color=color, label=name)
            ax.set_xticks(xs, list(per))
        ax.axhline(capacity_mbps, color="k", ls=":", lw=0.8)
        ax.set_title(f"{loss} % loss at the NICs")
        ax.set_xlabel("message size")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("bus bandwidth per host (Mb/s)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(dest, dpi=110)
    plt.close(fig)
