"""The Python API: script an experiment the way Mininet users do.

    from mrcemu import Fabric
    with Fabric.up("small") as fab:            # a topology name or path; down() on exit
        assert fab.check().ok                  # every path of every pair
        r = fab.send("h0", "h3", size="4MiB")  # transport="mrc" by default
        print(r.intact, r.goodput_mbps)
        fab.fail("link-down", "p0l0-p0s0"); fab.heal()

The CLI's fabric commands are this API with a table printed around it. It needs
root, as they do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING

from mrcemu.errors import MrcemuError, NeedsRoot
from mrcemu.topology import Layout, Topology, load
from mrcemu.topology.faults import Fault

if TYPE_CHECKING:
    from mrcemu.fabric.check import CheckResult


@dataclass(frozen=True)
class SendResult:
    """One RDMA WRITE, as measured: `intact` is the SHA-256 of the destination region
    equal to the source's, after a completion."""

    src: str
    dst: str
    transport: str
    size: int
    completed: bool
    intact: bool
    completion_s: float | None
    goodput_mbps: float | None
    paths_used: int
    retransmits: int
    report: dict  # everything `mrcemu send --json` prints


@dataclass(frozen=True)
class EvEvents:
    """A connection's EV state changes, as libmrc's event queue gives them: `events`
    (each an EvChange: t, ev, old, new, why, lost_sent), `next` (pass it as `since` to
    get only later ones) and `dropped` (changes let go before they were asked for)."""

    events: list
    next: int
    dropped: int


@dataclass(frozen=True)
class EvProfile:
    """A connection's EV profile: `evs` (each an EvRow: ev, state, active, plane,
    spine) and `min_active`."""

    evs: list
    min_active: int


class Fabric:
    """A running fabric. Make one with `Fabric.up(...)`; `down()` (or leaving the
    `with` block, even on an error) tears it down."""

    def __init__(self) -> None:
        from mrcemu.fabric import state

        st = state.require_state()
        self.topology: Topology = st.topo()  # the snapshot taken at `up`
        self.nodes: dict[str, int] = st.nodes
        self.layout = Layout(self.topology)
        self._owned = False

    @classmethod
    def up(cls, topology: str = "default", seed: int = 1,
           progress: Callable[[str, int, int], None] | None = None,
           cluster: str | None = None, usid_engine: str | None = None) -> Fabric:
        """Bring `topology` up (a built-in name or a YAML path), split over the servers
        of the `cluster` file if given. `usid_engine` (auto, kernel or bpf) overrides the
        topology's: what performs the switches' End. A bad file raises a ConfigError
        before anything is made; a failed start leaves nothing behind."""
        topo = load(topology)
        if usid_engine is not None:
            topo = replace(topo, usid_engine=usid_engine)  # validated again: ConfigError
        if cluster:
            from mrcemu.topology.cluster import load as load_cluster

            load_cluster(cluster)
        if os.geteuid() != 0:
            raise NeedsRoot("up")
        from mrcemu.fabric.launch import launch

        launch(topo, progress, seed=seed, cluster=cluster)
        fab = cls()
        fab._owned = True
        return fab

    @classmethod
    def attach(cls) -> Fabric:
        """The fabric already running (from `mrcemu up`); leaving `with` keeps it up."""
        return cls()

    def down(self) -> None:
        from mrcemu.fabric.launch import stop

        stop()
        self._owned = False

    def __enter__(self) -> Fabric:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._owned:
            self.down()

    def _host(self, name: str | int) -> int:
        i = name if isinstance(name, int) else (
            int(name[1:]) if name[:1] == "h" and name[1:].isdigit() else -1)
        if not 0 <= i < self.topology.hosts:
            raise MrcemuError(f"{name!r} is not a host of this fabric: use "
                              f"h0..h{self.topology.hosts - 1}")
        return i

    def check(self, timeout: float = 5.0,
              progress: Callable[[int, int], None] | None = None) -> CheckResult:
        """Probe every path between every ordered host pair; `.ok` if all arrived."""
        from mrcemu.fabric.check import run_check
        from mrcemu.fabric.servers import split_servers

        return run_check(self.topology, self.nodes, timeout, progress, split_servers())

    def map(self, duration: float = 2.0, interval: float = 0.05) -> dict:
        """Clustermapper: self-probe every link for `duration` seconds; returns every link
        with its loss and RTT, and the links judged bad (as `mrcemu map --json`)."""
        from mrcemu.fabric.mapper import Mapper
        from mrcemu.fabric.servers import split_servers

        with Mapper(self.layout, self.nodes, interval, window=duration,
                    servers=split_servers()) as m:
            m.run(duration)
            return m.report()

    def send(self, src: str | int, dst: str | int, size: str | int = "4MiB",
             transport: str = "mrc", seed: int = 1, timeout: float | None = None,
             progress: Callable[[int, int], None] | None = None,
             load_balancing: str | None = None) -> SendResult:
        """One RDMA WRITE of `size` bytes (4MiB, 512KiB, or an int) from `src` to `dst`.
        `load_balancing` (MRC): the policy that chooses each packet's EV, one of
        transport.lb.POLICIES; None, the fabric's (`mrc` unless its scenario says).
        The pair's connection is made again if it was made with another."""
        from mrcemu.fabric.servers import split_servers
        from mrcemu.nic import transfer
        from mrcemu.nic.client import NicClient
        from mrcemu.units import parse_size

        a, b = self._host(src), self._host(dst)
        if a == b:
            raise MrcemuError("src and dst must be different hosts")
        if transport not in ("mrc", "roce"):
            raise MrcemuError(f"transport {transport!r}: use mrc or roce")
        settings = None
        if load_balancing is not None:
            from mrcemu.transport.lb import POLICIES

            if transport != "mrc":
                raise MrcemuError("load_balancing is MRC's: a RoCE QP takes one path")
            if load_balancing not in POLICIES:
                raise MrcemuError(f"load_balancing {load_balancing!r}: use one of "
                                  f"{', '.join(POLICIES)}")
            settings = {"load_balancing": load_balancing}
        with NicClient(range(self.topology.hosts), split_servers()) as client:
            r = transfer.send(client, self.topology, a, b, parse_size(size), transport, seed,
                              progress, timeout, settings)
        return SendResult(r["src"], r["dst"], transport, r["size"], r["completed"],
                          r["integrity_ok"], r["completion_s"], r["goodput_mbps"],
                          r["paths_used"], r["retransmits"], r)

    def ev_events(self, host: str | int, peer: str | int, since: int = 0,
                  transport: str = "mrc") -> EvEvents:
        """`host`'s EV state changes on its connection to `peer`, from the `since`-th
        (GOOD, ASSUMED_BAD, ... as the policy core set them)."""
        from mrcemu.nic.control import request
        from mrcemu.nic.ops import EvChange

        a, b = self._host(host), self._host(peer)
        r = request(f"h{a}", "events", peer=b, transport=transport, since=since)
        return EvEvents([EvChange(*row) for row in r["events"]], r["next"], r["dropped"])

    def ev_profile(self, host: str | int, peer: str | int, evs: list[int] | None = None,
                   min_active: int | None = None) -> EvProfile:
        """The EV profile of `host`'s MRC connection to `peer` (libmrc's), after setting
        what is given: `evs`, those EVs alone (each other one denied; a denied one
        listed comes back through probes); `min_active`, the fewest usable EVs the
        policy keeps in use. With neither, it is only read."""
        from mrcemu.nic.control import request
        from mrcemu.nic.ops import EvRow

        a, b = self._host(host), self._host(peer)
        args: dict = {"peer": b}
        if evs is not None:
            args["evs"] = list(evs)
        if min_active is not None:
            args["min_active"] = min_active
        r = request(f"h{a}", "ev_profile", **args)
        return EvProfile([EvRow(*row) for row in r["evs"]], r["min_active"])

    def probe(self, host: str | int, peer: str | int, ev: int) -> int:
        """A probe now on EV `ev` of `host`'s MRC connection to `peer` (libmrc's EV
        probe); its probe id. What its answer changes shows in `ev_events`."""
        from mrcemu.nic.control import request

        a, b = self._host(host), self._host(peer)
        return int(request(f"h{a}", "probe", peer=b, ev=ev)["probe_id"])

    def fail(self, kind: str, target: str, value: float | None = None, one_way: bool = False,
             period: float | None = None, duty: float | None = None) -> Fault:
        """Inject a fault now (the kinds and targets of `mrcemu fail`); returns it."""
        from mrcemu.fabric import inject

        return inject.inject(self.layout, self.nodes, Fault(kind, target, value, one_way,
                                                            period=period, duty=duty))

    def heal(self, fault: str | None = None) -> list[Fault]:
        """Heal `fault` ("kind:target") or every active fault; returns what was healed."""
        from mrcemu.fabric import inject

        return inject.heal(self.layout, self.nodes, fault)
