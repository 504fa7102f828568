"""The hash census on a running fabric: each draw's probes (study/census.py builds them)
sent from the hosts' namespaces through their kernels' routes, and what every switch
port counted of them.

The hosts' NIC daemons take it for a QP they do not have, count it and drop it
(`unknown_qp`), as a RoCE NIC does; nothing answers it, so the counters hold the probes
alone (the fabric's neighbours are permanent: no discovery traffic either).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from mrcemu.errors import MrcemuError
from mrcemu.fabric.netns import inside
from mrcemu.topology import Layout, Topology
from mrcemu.topology.addressing import host_address

# How long a draw's probes may take to be counted at every hop: they cross an idle
# fabric in milliseconds even slowed, so a draw not counted by then lost a probe.
COUNTED_WITHIN_S = 5.0
POLL_S = 0.002
# A fabric just up still carries its NICs' first packets: a census starts, and a draw
# counted wrong is counted again, once nothing has moved for QUIET_S.
QUIET_S = 0.5
QUIET_WITHIN_S = 20.0


Send = tuple[int, int, bytes]  # source host, destination host, the packet


class Census:
    """Raw IPv6 sockets in every host's namespace, and the switch ports' packet counters
    read through `read` (a function giving {port MAC: {"packets": n, ...}})."""

    def __init__(self, topo: Topology, pids: dict[str, int],
                 read: Callable[[], dict[str, dict]]) -> None:
        self.topo, self.read = topo, read
        lay = Layout(topo)
        self.port_of = {i.mac: i.name for ifs in lay.interfaces.values() for i in ifs}
        # the leaf ports facing the hosts: a probe counted there has crossed every hop
        self.host_ports = {lay.interfaces[f"h{h}"][0].peer_name for h in range(topo.hosts)}
        self.senders: dict[int, socket.socket] = {}
        try:
            for h in range(topo.hosts):
                with inside(pids[f"h{h}"]):
                    self.senders[h] = socket.socket(socket.AF_INET6, socket.SOCK_RAW,
                                                    socket.IPPROTO_RAW)
        except BaseException:
            self.close()
            raise
        self.last = self._packets()

    def __enter__(self) -> Census:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        for s in self.senders.values():
            s.close()
        self.senders.clear()

    def _packets(self) -> dict[str, int]:
        return {self.port_of[mac]: int(c.get("packets", 0))
                for mac, c in self.read().items() if mac in self.port_of}

    def quiet(self) -> None:
        """Wait until no port has sent anything for QUIET_S."""
        deadline = time.monotonic() + QUIET_WITHIN_S
        before = self._packets()
        while time.monotonic() < deadline:
            time.sleep(QUIET_S)
            now = self._packets()
            if now == before:
                self.last = now
                return
            before = now
        raise MrcemuError(f"the fabric did not fall quiet within {QUIET_WITHIN_S:g} s: "
                          "something else is sending; a census needs an idle fabric")

    def run(self, probes: list[Send]) -> dict[str, int]:
        """Send one draw's probes; the packets each port sent until the hosts got them
        all (a draw counted short after COUNTED_WITHIN_S is an error: an idle fabric
        loses nothing)."""
        for src, dst, packet in probes:
            self.senders[src].sendto(packet, (str(host_address(0, dst)), 0))
        deadline = time.monotonic() + COUNTED_WITHIN_S
        while True:
            now = self._packets()
            if sum(now.get(k, 0) - self.last.get(k, 0) for k in self.host_ports) >= len(probes):
                break
            if time.monotonic() > deadline:
                raise MrcemuError(f"a census draw's {len(probes)} probes were not all "
                                  f"delivered within {COUNTED_WITHIN_S:g} s: the fabric "
                                  "is not healthy; see 'mrcemu status'")
            time.sleep(POLL_S)
        # Read again: the switches are read one after another, so the read that saw the
        # last delivery may have read an earlier hop before the probe crossed it.
        now = self._packets()
        delta = {k: n - self.last.get(k, 0) for k, n in now.items()}
        self.last = now
        return {k: n for k, n in delta.items() if n}


SEED = "/proc/sys/net/ipv4/fib_multipath_hash_seed"


def hash_seeds(pids: dict[str, int], nodes: list[str]) -> dict[str, str]:
    """Each node's multipath hash seed, as its sysctl reads."""
    out = {}
    for n in nodes:
        with inside(pids[n]), open(SEED) as f:  # /proc/sys/net is the opener's netns
            out[n] = f.read().strip()
    return out


def set_hash_seeds(pids: dict[str, int], seeds: dict[str, str]) -> None:
    for n, seed in seeds.items():
        with inside(pids[n]), open(SEED, "w") as f:
            f.write(seed)
