"""Clustermapper over a whole fabric, on one server or split over several.

This machine's hosts are probed here (`fabric/link_probes.py`). On a split fabric each
other server's hosts are probed there, by the same prober its agent runs in the
background, and read back when the map is: a probe returns to the host that sent it,
so each server judges the links its own hosts' probes crossed, and the judgements are
merged (`topology.selfprobe.merge`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from mrcemu.fabric.link_probes import TIMEOUT_S, WINDOW_S, LinkProbes
from mrcemu.topology import Layout
from mrcemu.topology.selfprobe import LinkHealth, merge

__all__ = ["TIMEOUT_S", "WINDOW_S", "Mapper"]


class Mapper:
    """Self-probes every `interval` seconds from every host; `links(now)`/`bad(now)`
    read the map. `servers` (a split fabric's `fabric.servers.Servers`): the hosts on
    other servers are probed there. Use as a context manager: everything it opened,
    here and there, closes on exit."""

    def __init__(self, layout: Layout, pids: dict[str, int], interval: float = 0.05,
                 window: float = WINDOW_S, timeout: float = TIMEOUT_S,
                 servers: Any = None) -> None:
        local, self.remote = (servers.hosts_by_server(layout.topo.hosts)
                              if servers is not None else (list(range(layout.topo.hosts)), {}))
        self.servers = servers
        self.here = LinkProbes(layout, pids, interval, window, timeout, hosts=local)
        self._counts: dict[Any, tuple[int, int]] = {}
        opened = []
        try:
            for srv, hosts in self.remote.items():
                servers.call(srv, "map_open", topology=asdict(layout.topo),
                             pids={f"h{h}": pids[f"h{h}"] for h in hosts}, hosts=hosts,
                             interval=interval, window=window, timeout=timeout)
                opened.append(srv)
        except BaseException:
            self.remote = {s: self.remote[s] for s in opened}
            self.close()
            raise

    def __enter__(self) -> Mapper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def interval(self) -> float:
        return self.here.interval

    @property
    def window(self) -> float:
        return self.here.map.window

    @property
    def sent(self) -> int:
        """Probes sent: here, and there as of the last read."""
        return self.here.sent + sum(c[0] for c in self._counts.values())

    @property
    def answered(self) -> int:
        return self.here.answered + sum(c[1] for c in self._counts.values())

    def step(self) -> float:
        """This server's probing: a round if one is due, and what came back."""
        return self.here.step()

    def links(self, now: float) -> dict[str, LinkHealth]:
        """Every link's health over the window: this server's probes as of `now`, each
        other server's as its agent answers."""
        parts = [self.here.map.links(now)]
        for srv in self.remote:
            got = self.servers.call(srv, "map_read")
            self._counts[srv] = (got["sent"], got["answered"])
            parts.append({x[0]: LinkHealth(*x) for x in got["links"]})
        return merge(parts)

    def bad(self, now: float) -> list[str]:
        return sorted(n for n, h in self.links(now).items() if h.bad)

    def run(self, duration: float | None, on_tick: Callable[[float], None] | None = None,
            tick: float = 0.25) -> None:
        """Probe for `duration` seconds (forever if None), `on_tick(now)` every `tick`;
        the other servers probe meanwhile on their own."""
        self.here.run(duration, on_tick, tick)

    def report(self) -> dict:
        """Every link with its loss and RTT over the window, and the bad ones."""
        links = self.links(time.monotonic())
        return {"interval_ms": round(self.interval * 1e3, 3), "window_s": self.window,
                "probes_sent": self.sent, "probes_answered": self.answered,
                "links": [h.to_json() for h in links.values()],
                "bad": sorted(n for n, h in links.items() if h.bad)}

    def close(self) -> None:
        self.here.close()
        remote, self.remote = self.remote, {}
        for srv in remote:
            try:
                self.servers.call(srv, "map_close")
            except Exception:  # noqa: BLE001 - closing: a server gone has nothing open
                pass
