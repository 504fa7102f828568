"""`mrcemu check`: one Scapy-crafted probe on every path of every ordered host pair,
sent and caught by `fabric/path_probes.py`, and judged here: delivered at the right
port, with the right outer DA and hop limit.

A split fabric checks a server at a time where its hosts are: each server's agent
opens its hosts' sockets, then each sends its hosts' probes, then each reports what
arrived at its hosts; this machine judges every path.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from mrcemu.fabric.path_probes import HOP_LIMIT, Arrival, Key, Probes, expected_paths
from mrcemu.topology import Topology


@dataclass
class PairResult:
    src: int
    dst: int
    total: int
    ok: int = 0
    failures: list[dict] = field(default_factory=list)


@dataclass
class CheckResult:
    pairs: list[PairResult]
    seconds: float
    # every probe as it arrived (port, outer DA, hop limit): what two engines compare
    arrivals: list[Arrival] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(p.ok == p.total for p in self.pairs)

    @property
    def probes(self) -> int:
        return sum(p.total for p in self.pairs)

    def to_json(self) -> dict:
        return {"ok": self.ok, "probes": self.probes,
                "delivered": sum(p.ok for p in self.pairs), "seconds": round(self.seconds, 3),
                "pairs": [p.__dict__ for p in self.pairs]}


def judge(topo: Topology, unsendable: dict[Key, str], arrivals: list[Arrival],
          seconds: float) -> CheckResult:
    """Each pair's paths: delivered at the right port, with the right DA and hop limit,
    or what went wrong."""
    expected = expected_paths(topo, range(topo.hosts))
    results = {(a, b): PairResult(a, b, 0) for a in range(topo.hosts)
               for b in range(topo.hosts) if a != b}
    for a, b, _ in expected:
        results[(a, b)].total += 1
    seen: set[Key] = set()
    for src, dst, ev, h, iface, da, hlim in arrivals:
        key = (src, dst, ev)
        path = expected.get(key)
        if path is None or key in seen:
            continue
        seen.add(key)
        res = results[(src, dst)]
        problems = []
        if h != dst or iface != path.dst_port:
            problems.append(f"arrived at {iface}, expected {path.dst_port}")
        if bytes.fromhex(da) != path.delivered.packed:
            problems.append(f"delivered DA {socket.inet_ntop(socket.AF_INET6, bytes.fromhex(da))},"
                            f" expected {path.delivered}")
        if hlim != HOP_LIMIT - path.switch_hops:
            problems.append(f"hop limit {hlim}, expected {HOP_LIMIT - path.switch_hops}")
        if problems:
            res.failures.append({"ev": f"0x{ev:08x}", "why": "; ".join(problems)})
        else:
            res.ok += 1
    for key, p in expected.items():
        if key not in seen:
            why = unsendable.get(key, f"lost (container {p.container})")
            results[(key[0], key[1])].failures.append({"ev": f"0x{p.ev:08x}", "why": why})
    return CheckResult(list(results.values()), seconds, sorted(arrivals))


def run_check(topo: Topology, pids: dict[str, int], timeout: float = 5.0,
              progress: Callable[[int, int], None] | None = None,
              servers: Any = None) -> CheckResult:
    """Every path checked. `servers` (a split fabric's `fabric.servers.Servers`): the
    hosts on another server are probed there, by its agent."""
    t0 = time.monotonic()
    nonce = time.monotonic_ns() & 0xFFFFFFFF
    local, remote = (servers.hosts_by_server(topo.hosts) if servers is not None
                     else (list(range(topo.hosts)), {}))
    topology = asdict(topo) if remote else {}
    opened = []
    with Probes(topo, pids, local) as here:
        try:
            for srv, hosts in remote.items():
                servers.call(srv, "check_open", topology=topology,
                             pids={f"h{h}": pids[f"h{h}"] for h in hosts}, hosts=hosts)
                opened.append(srv)
            unsendable = here.send(nonce, progress)
            for srv in remote:
                unsendable.update({(a, b, ev): why for a, b, ev, why in
                                   servers.call(srv, "check_send", nonce=nonce)})
            expect = expected_paths(topo, range(topo.hosts))

            def arriving(hosts: list[int]) -> int:
                mine = set(hosts)
                return sum(1 for k in expect if k[1] in mine and k not in unsendable)

            with ThreadPoolExecutor(max_workers=1 + len(remote)) as pool:
                futs = [pool.submit(servers.call, srv, "check_collect",
                                    within=timeout + 60, nonce=nonce,
                                    expect=arriving(hosts), timeout=timeout)
                        for srv, hosts in remote.items()]
                arrivals = here.collect(nonce, arriving(local), timeout)
                for f in futs:
                    arrivals += [tuple(a) for a in f.result()]
            opened.clear()  # each agent closed its share as it answered
        finally:
            for srv in opened:
                try:
                    servers.call(srv, "check_close")
                except Exception:  # noqa: BLE001 - the check's own error is the one to see
                    pass
    return judge(topo, unsendable, arrivals, time.monotonic() - t0)

