"""Topology files: load, validate, and hold the numbers everything else derives from.

A topology is pure data. Every address, name and route in the emulator is
computed from it (see `addressing`, `paths`, `routes`), so nothing else
invents an address.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from mrcemu import yamlfile
from mrcemu.errors import ConfigError
from mrcemu.topology.latency import (
    NIC_LATENCY_US,
    SWITCH_LATENCY_US,
    delay_line_bytes,
    time_scale,
)

# The uSID is plane(4) | kind(2) | index(10): these bounds come from that layout.
MAX_PLANES = 16
MAX_INDEX = 1023
# Spine index 1023 is reserved: it marks the same-leaf path in an EV.
MAX_SPINES = 1022
# How switches forward host traffic. "usid": static SRv6 uSID source routes, the path
# chosen by the sending NIC (MRC's fabric). "ecmp": also one multipath route per remote
# host, the kernel hashing each packet's flow onto a spine (the white paper's RoCE
# baseline: a single-plane fabric of routers doing ECMP).
ROUTINGS = ("usid", "ecmp")
# What performs each switch's End with next-csid: "kernel", Linux's seg6local; "bpf",
# mrcemu's tc ingress program (mrcemu/bpf/usid_end.c), for kernels built without
# seg6local; "auto", the kernel's where it works (fabric/usid_engine.py decides at `up`).
USID_ENGINES = ("auto", "kernel", "bpf")
# A NIC's or switch's fixed latency, in the paper's microseconds: a hundred times the
# paper's own is room for any what-if, and bounds the delay line's memory.
MAX_LATENCY_US = 500.0

# Built-in topologies: inside the package when installed from a wheel, else the
# source tree's top-level topologies/ (an editable install, or a checkout).
_PACKAGED = Path(__file__).resolve().parents[1] / "topologies"
TOPOLOGY_DIR = _PACKAGED if _PACKAGED.is_dir() else (
    Path(__file__).resolve().parents[2] / "topologies")


@dataclass(frozen=True)
class Topology:
    """A multi-plane leaf-spine fabric. Planes share no switches."""

    planes: int
    leaves_per_plane: int
    spines_per_plane: int
    hosts: int
    host_link_mbps: float = 20.0
    fabric_link_mbps: float = 20.0
    mtu: int = 1500
    buffer_bytes: int = 200_000
    ecn_threshold_bytes: int = 30_000
    trim_threshold_bytes: int = 60_000
    nic_memory_mib: int = 1024  # per NIC daemon: registered regions + unfinished sources
    # The scale model (topology/latency.py): how many times slower than the paper's
    # fabric this one runs (None: its 100 Gb/s plane over host_link_mbps), and the
    # paper's fixed latencies, in its microseconds, that the NICs add times that scale.
    # 0 turns a latency off.
    scale: float | None = None
    nic_latency_us: float = NIC_LATENCY_US
    switch_latency_us: float = SWITCH_LATENCY_US
    routing: str = "usid"  # see ROUTINGS
    usid_engine: str = "auto"  # see USID_ENGINES
    name: str = "topology"
    source: str = "<memory>"

    def __post_init__(self) -> None:
        _validate(self)

    def slowed(self, k: float) -> Topology:
        """The same fabric with every link k times slower (`mrcemu run --slowdown`), and
        so every fixed latency k times longer."""
        return replace(self, host_link_mbps=self.host_link_mbps / k,
                       fabric_link_mbps=self.fabric_link_mbps / k,
                       scale=time_scale(self) * k)

    @property
    def has_latency(self) -> bool:
        """Whether the scale model's fixed latency is on (either latency set)."""
        return bool(self.nic_latency_us or self.switch_latency_us)

    def without_latency(self) -> Topology:
        """The same fabric with no fixed latency (`--latency off`): serialization and
        queueing alone, for comparison with the scale model."""
        return replace(self, nic_latency_us=0.0, switch_latency_us=0.0)

    @property
    def ecmp(self) -> bool:
        return self.routing == "ecmp"

    @property
    def hosts_per_leaf(self) -> int:
        return self.hosts // self.leaves_per_plane

    def leaf_of(self, host: int) -> int:
        return host // self.hosts_per_leaf

    @property
    def switch_count(self) -> int:
        return self.planes * (self.leaves_per_plane + self.spines_per_plane)

    @property
    def link_count(self) -> int:
        return self.planes * (self.hosts + self.leaves_per_plane * self.spines_per_plane)

    def paths_between(self, a: int, b: int) -> int:
        if a == b:
            return 0
        return self.planes * (1 if self.leaf_of(a) == self.leaf_of(b) else self.spines_per_plane)


_USER_FIELDS = {f.name: f for f in fields(Topology) if f.name not in ("name", "source")}
_REQUIRED = ("planes", "leaves_per_plane", "spines_per_plane", "hosts")


def _check_int(t: Topology, name: str, lo: int, hi: int | None, why: str, fix: str) -> None:
    value = getattr(t, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(t.source, name, value, "must be a whole number", fix)
    if value < lo or (hi is not None and value > hi):
        raise ConfigError(t.source, name, value, why, fix)


def _validate(t: Topology) -> None:
    _check_int(t, "planes", 1, MAX_PLANES,
               f"must be 1..{MAX_PLANES}: the plane is a 4-bit field of the uSID",
               f"use at most {MAX_PLANES} planes")
    _check_int(t, "leaves_per_plane", 1, MAX_INDEX + 1,
               f"must be 1..{MAX_INDEX + 1}: a leaf index is a 10-bit field of the uSID",
               f"use at most {MAX_INDEX + 1} leaves per plane")
    _check_int(t, "spines_per_plane", 1, MAX_SPINES,
               f"must be 1..{MAX_SPINES}: a spine index is a 10-bit field of the uSID "
               f"and indices {MAX_SPINES}-{MAX_INDEX} are reserved (ECMP, same-leaf paths)",
               f"use at most {MAX_SPINES} spines per plane")
    _check_int(t, "hosts", 1, MAX_INDEX + 1,
               f"must be 1..{MAX_INDEX + 1}: a host index is a 10-bit field of the uSID",
               f"use at most {MAX_INDEX + 1} hosts")
    if t.hosts % t.leaves_per_plane:
        raise ConfigError(t.source, "hosts", t.hosts,
                          f"is not divisible by leaves_per_plane ({t.leaves_per_plane}): "
                          "hosts are spread evenly over the leaves",
                          f"use a multiple of {t.leaves_per_plane}, such as "
                          f"{(t.hosts // t.leaves_per_plane + 1) * t.leaves_per_plane}")
    for name in ("host_link_mbps", "fabric_link_mbps"):
        value = getattr(t, name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(t.source, name, value, "must be a number of Mb/s",
                              f"set {name} to a positive number such as 20")
        if not value > 0:
            raise ConfigError(t.source, name, value, "a link rate must be positive",
                              f"set {name} to a positive number such as 20")
    if t.scale is not None and (isinstance(t.scale, bool)
                                or not isinstance(t.scale, int | float)
                                or not 1 <= t.scale < float("inf")):
        raise ConfigError(t.source, "scale", t.scale,
                          "must be a number >= 1: how many times slower than the paper's "
                          "fabric this one runs",
                          "remove it (the paper's 100 Gb/s plane over host_link_mbps: "
                          "5000 at 20 Mb/s), or set it such as 5000")
    for name in ("nic_latency_us", "switch_latency_us"):
        value = getattr(t, name)
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not 0 <= value <= MAX_LATENCY_US):
            raise ConfigError(t.source, name, value,
                              f"must be 0 (off) to {MAX_LATENCY_US:g} microseconds, on the "
                              "paper's fabric (the scale multiplies it)",
                              f"remove it (the paper's fit: {getattr(Topology, name):.3f}), "
                              "or set 0 to turn it off")
    if t.routing not in ROUTINGS:
        raise ConfigError(t.source, "routing", t.routing,
                          f"must be one of {', '.join(ROUTINGS)}",
                          "use usid (MRC's source routes) or ecmp (a single-plane fabric "
                          "that hashes flows over its spines)")
    if t.usid_engine not in USID_ENGINES:
        raise ConfigError(t.source, "usid_engine", t.usid_engine,
                          f"must be one of {', '.join(USID_ENGINES)}",
                          "remove it (auto: the kernel's seg6local where it works, else "
                          "the BPF program), or set kernel or bpf")
    if t.ecmp and t.planes != 1:
        raise ConfigError(t.source, "routing", t.routing,
                          f"an ECMP fabric has one plane, not {t.planes}: a host's flows "
                          "are hashed over the spines of its one plane",
                          "set planes: 1 (and host_link_mbps to the planes' sum), as "
                          "topologies/ecmp.yaml does")
    _check_int(t, "mtu", 1280, 9000, "must be 1280..9000 (IPv6 needs at least 1280)",
               "set mtu to 1500")
    _check_int(t, "nic_memory_mib", 1, None,
               "must be a positive number of MiB: each NIC's memory budget",
               "set nic_memory_mib to 1024")
    # The delay line is held from a NIC's start, within its budget.
    held = delay_line_bytes(t)
    if held > t.nic_memory_mib << 20:
        raise ConfigError(t.source, "nic_memory_mib", t.nic_memory_mib,
                          f"is below the {held:,} bytes each NIC's delay line holds for "
                          "the fixed latency at this scale and line rate",
                          f"set nic_memory_mib to at least {-(-held >> 20)}, or lower "
                          "scale, nic_latency_us or switch_latency_us")
    for name in ("buffer_bytes", "ecn_threshold_bytes", "trim_threshold_bytes"):
        _check_int(t, name, 0, None, "must be zero (disabled) or positive",
                   f"set {name} to 0 or a byte count")
    for name in ("ecn_threshold_bytes", "trim_threshold_bytes"):
        value = getattr(t, name)
        if t.buffer_bytes and value > t.buffer_bytes:
            raise ConfigError(t.source, name, value,
                              f"is above buffer_bytes ({t.buffer_bytes}), so it could never fire",
                              f"set {name} below {t.buffer_bytes}, or 0 to disable it")


def from_mapping(data: Any, source: str, name: str) -> Topology:
    """Build a Topology from parsed YAML, with errors that name the source and field."""
    if not isinstance(data, dict):
        raise ConfigError(source, "<document>", type(data).__name__,
                          "the file must be a YAML mapping of field: value",
                          "start from topologies/default.yaml")
    yamlfile.refuse_unknown(source, "", data, _USER_FIELDS)
    for key in _REQUIRED:
        if key not in data:
            raise ConfigError(source, key, None, "is required", f"add '{key}: <number>'")
    return Topology(**data, name=name, source=source)


def load(path: str | Path) -> Topology:
    """Load a topology file. A bare name such as 'small' means topologies/small.yaml."""
    data, source, stem = yamlfile.read(path, TOPOLOGY_DIR, "topology")
    return from_mapping(data, source, stem)
