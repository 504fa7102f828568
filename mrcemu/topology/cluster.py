"""A cluster file: the servers a fabric is split over, and how its nodes are placed.

Pure: YAML in, a validated `Cluster` out, and a placement (node name -> server name)
from a topology. Nothing here opens a connection. Planes share no switches, so the
`plane` placement keeps the hosts on the first server and gives each plane's switches
a server of their own: only host-leaf links cross servers. The `rack` placement gives
each leaf group (leaf i of every plane) and its hosts a server, and spreads the spines
(docs/scale-out.md).

    servers:
      - {name: local, address: localhost}
      - {name: srv1, address: "fd6d:7263:656d::2", user: root, underlay: u0,
         python: /opt/mrcemu/.venv/bin/python}   # optional: mrcemu's Python there
    placement: plane
    ssh_key: /run/mrcemu/cluster/id_ed25519        # optional
    known_hosts: /run/mrcemu/cluster/known_hosts   # optional
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from mrcemu import yamlfile
from mrcemu.errors import ConfigError
from mrcemu.topology.layout import host_name, leaf_name, spine_name
from mrcemu.topology.model import Topology

PLACEMENTS = ("plane", "rack")
LOCAL = "localhost"  # the address of the server mrcemu runs on (no ssh)
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,14}$")
_HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
_TOP = ("servers", "placement", "ssh_key", "known_hosts")
_SERVER = ("name", "address", "user", "underlay", "python")


@dataclass(frozen=True)
class Server:
    name: str
    address: str  # an IP address or a host name; LOCAL for this machine
    user: str = "root"
    underlay: str = ""  # the device VXLAN tunnels are bound to ("" = the route's)
    # The Python with mrcemu installed on that server, for its agent ("" = the path of
    # the one mrcemu runs under here).
    python: str = ""

    @property
    def local(self) -> bool:
        return self.address == LOCAL


@dataclass(frozen=True)
class Cluster:
    source: str
    servers: tuple[Server, ...]
    placement: str = "plane"
    ssh_key: str | None = None
    known_hosts: str | None = None

    def server(self, name: str) -> Server:
        return next(s for s in self.servers if s.name == name)


def _text(source: str, field: str, value: Any, fix: str, pattern: re.Pattern | None = None,
          problem: str = "must be text") -> str:
    if not isinstance(value, str) or not value or (pattern and not pattern.match(value)):
        raise ConfigError(source, field, value, problem, fix)
    return value


def _address(source: str, field: str, value: Any) -> str:
    fix = f"an IP address or a host name of the server, or {LOCAL} for this machine"
    a = _text(source, field, value, fix)
    if a == LOCAL:
        return a
    try:
        ip_address(a)
    except ValueError:
        _text(source, field, a, fix, _HOSTNAME, "is neither an IP address nor a host name")
    return a


def from_mapping(data: Any, source: str) -> Cluster:
    if not isinstance(data, dict):
        raise ConfigError(source, "<file>", type(data).__name__, "must be a mapping",
                          "start with servers: and placement:")
    yamlfile.refuse_unknown(source, "", data, _TOP)
    raw = data.get("servers")
    if not isinstance(raw, list) or len(raw) < 1:
        raise ConfigError(source, "servers", raw, "must be a list of servers",
                          f"e.g. servers: [{{name: local, address: {LOCAL}}}, "
                          "{name: srv1, address: 10.0.0.2}]")
    servers: list[Server] = []
    for i, s in enumerate(raw):
        where = f"servers[{i}]"
        s = yamlfile.fields(source, where, s, _SERVER, "e.g. {name: srv1, address: 10.0.0.2}")
        name = _text(source, f"{where}.name", s.get("name"),
                     "a short lowercase name: a letter, then letters, digits or '-' (15 at "
                     "most)", _NAME)
        if any(x.name == name for x in servers):
            raise ConfigError(source, f"{where}.name", name, "names a server twice",
                              "give every server its own name")
        address = _address(source, f"{where}.address", s.get("address"))
        if any(x.address == address for x in servers):
            raise ConfigError(source, f"{where}.address", address, "is another server's too",
                              "give every server its own address")
        user = _text(source, f"{where}.user", s.get("user", "root"),
                     "the ssh user, root or one that may run sudo without a password")
        underlay = s.get("underlay", "")
        if underlay != "":
            _text(source, f"{where}.underlay", underlay,
                  "the network device the server reaches the others through, e.g. eth0",
                  re.compile(r"^[^/\s]{1,15}$"), "is not a device name")
        python = s.get("python", "")
        if python != "":
            _text(source, f"{where}.python", python,
                  "the absolute path of the Python that has mrcemu installed on that "
                  "server, e.g. /opt/mrcemu/.venv/bin/python", re.compile(r"^/\S+$"),
                  "is not an absolute path")
        servers.append(Server(name, address, user, underlay, python))
    if sum(s.local for s in servers) > 1:
        raise ConfigError(source, "servers", [s.address for s in servers],
                          f"names {LOCAL} more than once", "one server is this machine")
    placement = data.get("placement", "plane")
    if placement not in PLACEMENTS:
        raise ConfigError(source, "placement", placement, "is not a placement",
                          "plane (hosts on the first server, each plane's switches on "
                          "another) or rack (each leaf group and its hosts on a server)")
    paths = {}
    for k in ("ssh_key", "known_hosts"):
        v = data.get(k)
        if v is not None:
            v = _text(source, k, v, "a file path, e.g. ~/.ssh/id_ed25519")
        paths[k] = v
    return Cluster(source, tuple(servers), placement, **paths)


def load(path: str | Path) -> Cluster:
    data, source, _ = yamlfile.read(path, None, "cluster")
    return from_mapping(data, source)


def to_mapping(c: Cluster) -> dict:
    """What `load` reads back: the file `mrcemu cluster local` writes."""
    out: dict[str, Any] = {"servers": [
        {"name": s.name, "address": s.address, "user": s.user,
         **({"underlay": s.underlay} if s.underlay else {}),
         **({"python": s.python} if s.python else {})} for s in c.servers],
        "placement": c.placement}
    for k in ("ssh_key", "known_hosts"):
        if getattr(c, k):
            out[k] = getattr(c, k)
    return out


def place(topo: Topology, cluster: Cluster) -> dict[str, str]:
    """Every node's server: node name -> server name.

    plane: hosts on the first server; plane p's leaves and spines on server
    1 + p mod (n - 1) (all on the first when it is alone). Only host-leaf links cross.
    rack: leaf i of every plane, and the hosts under it, on server i mod n; plane p's
    spine j on server (p * spines + j) mod n."""
    names = [s.name for s in cluster.servers]
    n = len(names)
    out: dict[str, str] = {}
    if cluster.placement == "plane":
        for h in range(topo.hosts):
            out[host_name(h)] = names[0]
        for p in range(topo.planes):
            home = names[0] if n == 1 else names[1 + p % (n - 1)]
            for i in range(topo.leaves_per_plane):
                out[leaf_name(p, i)] = home
            for j in range(topo.spines_per_plane):
                out[spine_name(p, j)] = home
        return out
    for h in range(topo.hosts):
        out[host_name(h)] = names[topo.leaf_of(h) % n]
    for p in range(topo.planes):
        for i in range(topo.leaves_per_plane):
            out[leaf_name(p, i)] = names[i % n]
        for j in range(topo.spines_per_plane):
            out[spine_name(p, j)] = names[(p * topo.spines_per_plane + j) % n]
    return out
