"""goodput.png and ev-states.png from a report (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mrcemu.scenario.report import label  # noqa: E402

STATE_COLOR = {"GOOD": "#2ca02c", "SKIP": "#ff7f0e", "STOPPED": "#9467bd",
               "ASSUMED_BAD": "#d62728", "DENIED": "#7f7f7f", "REHASHED": "#1f77b4"}


def _fault_marks(ax: plt.Axes, faults: list[dict]) -> None:
    for f in faults:
        if f["at_s"] is None:
            continue
        ax.axvline(f["at_s"], color="k", ls="--", lw=0.8)
        ax.text(f["at_s"], 1.0, f" {f['kind']} {f['target']}", rotation=90, va="top",
                ha="left", fontsize=7, transform=ax.get_xaxis_transform())
        if f.get("healed_s") is not None:
            ax.axvline(f["healed_s"], color="g", ls=":", lw=0.8)


def goodput(report: dict, dest: Path) -> None:
    ts = report["transports"]
    fig, axes = plt.subplots(len(ts), 1, figsize=(10, 3.2 * len(ts)), squeeze=False,
                             sharex=True)
    for ax, (name, t) in zip(axes[:, 0], ts.items(), strict=True):
        s = t["goodput_series"]
        for p, ys in enumerate(s["per_plane_mbps"]):
            ax.plot(s["t"], _smooth(ys), lw=0.8, label=f"plane {p}")
        ax.plot(s["t"], _smooth(s["total_mbps"]), lw=1.8, color="k", label="total")
        _fault_marks(ax, t["faults"])
        ax.set_ylabel("goodput (Mb/s)")
        job = t["job_completion_s"]
        ax.set_title(f"{label(name)}: received goodput per plane "
                     f"({SMOOTH * s['bin_s']:.3g} s average); job "
                     f"{'-' if job is None else f'{job:.3g}'} s", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=5, loc="upper right")
    axes[-1, 0].set_xlabel("seconds after the first write, the fabric's own at full speed")
    fig.suptitle(f"{report['scenario']} on {report['topology']}")
    fig.tight_layout()
    fig.savefig(dest, dpi=110)
    plt.close(fig)


SMOOTH = 2  # bins averaged in the goodput curves


def _smooth(ys: list[float], n: int = SMOOTH) -> list[float]:
    return [sum(ys[max(0, i - n + 1):i + 1]) / min(n, i + 1) for i in range(len(ys))]


def ev_states(report: dict, dest: Path) -> None:
    """Top: how many EVs are in each non-GOOD state over time. Bottom: each EV that
    left GOOD, as a row coloured by its state."""
    ts = report["transports"]
    fig, axes = plt.subplots(2, len(ts), figsize=(6 * len(ts), 7), squeeze=False)
    for col, (name, t) in enumerate(ts.items()):
        changes = t["ev_states"]["changes"]
        end = t["goodput_series"]["t"][-1] if t["goodput_series"]["t"] else 1.0
        state: dict[tuple[str, str, str], str] = {}
        counts: dict[str, list[tuple[float, int]]] = {}
        rows: dict[tuple[str, str, str], list[tuple[float, str]]] = {}
        for tt, src, dst, ev, old, new, _why in changes:
            if new not in STATE_COLOR:
                continue  # BACKUP -> ACTIVE promotions are not states
            old = old if old in STATE_COLOR else "GOOD"  # RoCE: PATH -> REHASHED
            key = (src, dst, ev)
            state.setdefault(key, old)
            state[key] = new
            rows.setdefault(key, [(0.0, old)]).append((tt, new))
            for st in ("SKIP", "STOPPED", "ASSUMED_BAD", "DENIED", "REHASHED"):
                n = sum(1 for v in state.values() if v == st)
                counts.setdefault(st, [(0.0, 0)]).append((tt, n))
        ax = axes[0, col]
        for st, pts in counts.items():
            if any(n for _, n in pts):
                xs = [p[0] for p in pts] + [end]
                ys = [p[1] for p in pts] + [pts[-1][1]]
                ax.step(xs, ys, where="post", color=STATE_COLOR[st], label=st)
        _fault_marks(ax, t["faults"])
        ax.set_title(f"{label(name)}: EVs not GOOD "
                     f"(of {t['ev_states']['evs_total']} used)", fontsize=10)
        ax.set_ylabel("EVs")
        if ax.get_legend_handles_labels()[0]:  # none when every EV stayed GOOD
            ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        ax2 = axes[1, col]
        keys = sorted(rows)[:200]
        for y, key in enumerate(keys):
            pts = rows[key] + [(end, rows[key][-1][1])]
            for (a, st), (b, _) in zip(pts, pts[1:], strict=False):
                if st != "GOOD":
                    ax2.broken_barh([(a, max(b - a, 0.005))], (y - 0.4, 0.8),
                                    color=STATE_COLOR.get(st, "k"))
        _fault_marks(ax2, t["faults"])
        ax2.set_ylabel(f"EV rows ({len(keys)} that left GOOD)")
        ax2.set_xlabel("seconds after the first write, the fabric's own at full speed")
        ax2.set_xlim(0, end)
        ax2.set_yticks([])
    fig.tight_layout()
    fig.savefig(dest, dpi=110)
    plt.close(fig)
