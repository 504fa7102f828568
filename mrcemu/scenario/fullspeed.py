"""A slowed run's figures in the fabric's own time at full speed.

`mrcemu run --slowdown k` runs every link k times slower and every clock k times longer,
so the NICs measure k times the fabric's times and 1/k of its rates. A report gives one
clock, whatever k was: every time is divided by k and every rate multiplied, here, once,
before anything reads the figures (report.md, the terminal, the plots, `mrcemu paper`,
the benchmarks). The wall time the slowed run took is the report's `wall_clock_s`.

Which figures are times and rates is read from their names, the report's one
convention: a key with the word `s` in it (`at_s`, `iteration_s_p50`, `rto_s_max`) holds
seconds, one with `mbps` a rate; `goodput_series.t` and the first column of
`ev_states.changes` are times too. The `fidelity` block is left as measured: it judges
the host (how late its timers and sends ran on the wall clock), against limits that are
the slowed clocks' own. `counters` are counts.
"""

from __future__ import annotations

from typing import Any

# Left as measured (see above).
AS_MEASURED = frozenset({"fidelity", "counters"})


def _words(key: str) -> list[str]:
    return key.split("_")


def is_time(key: str) -> bool:
    return key == "t" or "s" in _words(key)


def is_rate(key: str) -> bool:
    return "mbps" in _words(key)


def _scaled(value: Any, f: float) -> Any:
    """Every number in `value` (a number, or lists and dicts of them) times `f`; None,
    and anything not a number, as it is."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return round(value * f, 6)
    if isinstance(value, list):
        return [_scaled(v, f) for v in value]
    if isinstance(value, dict):
        return {k: _scaled(v, f) for k, v in value.items()}
    return value


def _walk(d: dict, k: float) -> dict:
    out: dict = {}
    for key, v in d.items():
        if key in AS_MEASURED:
            out[key] = v
        elif is_time(key):
            out[key] = _scaled(v, 1 / k)
        elif is_rate(key):
            out[key] = _scaled(v, k)
        elif key == "changes" and isinstance(v, list):  # ev_states: [t, src, dst, ...]
            out[key] = [[_scaled(row[0], 1 / k), *row[1:]] for row in v]
        elif isinstance(v, dict):
            out[key] = _walk(v, k)
        elif isinstance(v, list):
            out[key] = [_walk(x, k) if isinstance(x, dict) else x for x in v]
        else:
            out[key] = v
    return out


def at_full_speed(summary: dict, slowdown: float) -> dict:
    """A transport's summary (analysis.summarize) of a run slowed `slowdown` times, in
    full-speed seconds and Mb/s. A run at full speed is returned as it is."""
    if slowdown == 1:
        return summary
    return _walk(summary, slowdown)
