"""The switch BPF program: load once, attach to every switch port's egress, configure
per port, read the counters. Maps and program are pinned under /sys/fs/bpf/mrcemu.

One program instance serves every port (one verifier run per fabric); each port's
config and counters are keyed by its MAC, which `mrcemu.topology` assigns.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mrcemu.errors import MrcemuError
from mrcemu.topology import Layout
from mrcemu.topology.addressing import Kind
from mrcemu.topology.layout import Interface

OBJ = Path(__file__).resolve().parents[1] / "bpf" / "switch.o"
# The End with next-csid, where the BPF engine performs it (fabric/usid_engine.py).
USID_END_OBJ = Path(__file__).resolve().parents[1] / "bpf" / "usid_end.o"
BPFFS = Path("/sys/fs/bpf")
PIN = BPFFS / "mrcemu"
PROG = PIN / "switch"
USID_END = PIN / "usid_end"
END_PORT = struct.Struct("<IIQQ")  # struct end_port: usid, pad, shifted, dropped
CFG = struct.Struct("<QIIII")  # struct port_cfg
STATE_FIELDS = ("vq_bytes", "last_ns", "packets", "bytes", "ecn_marked", "trimmed", "dropped",
                "trim_errors", "last_error")
# ... then struct bpf_spin_lock (4 bytes, padded to 8), which map updates leave alone.
STATE = struct.Struct("<" + "Q" * len(STATE_FIELDS) + "I4x")


def mac_key(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def _run(cmd: list[str], stdin: str | None = None) -> str:
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if r.returncode:
        raise MrcemuError(f"{' '.join(cmd[:3])} failed: {(r.stderr or r.stdout).strip()[:400]}")
    return r.stdout


def _hex(b: bytes) -> str:
    return " ".join(f"{x:02x}" for x in b)


def load(usid_end: bool = False) -> None:
    """The switch program, and with `usid_end` the BPF engine's End program, pinned."""
    if not OBJ.exists():
        raise MrcemuError(f"{OBJ} is missing: run 'make install' to build the switch program")
    if not os.path.ismount(BPFFS):
        _run(["mount", "-t", "bpf", "bpf", str(BPFFS)])
    unload()
    PIN.mkdir(parents=True)
    _run(["bpftool", "prog", "load", str(OBJ), str(PROG), "type", "classifier", "pinmaps",
          str(PIN)])
    if usid_end:
        load_usid_end(PIN, USID_END)


def load_usid_end(pins: Path, prog: Path) -> None:
    """The End program at `prog`, its port map (mrc_usid) in `pins`."""
    if not USID_END_OBJ.exists():
        raise MrcemuError(f"{USID_END_OBJ} is missing: run 'make install' to build it")
    _run(["bpftool", "prog", "load", str(USID_END_OBJ), str(prog), "type", "classifier",
          "pinmaps", str(pins)])


def configure_usid(ports: dict[str, int], pins: Path = PIN) -> None:
    """Each switch port (by MAC) that performs its switch's End, with that switch's uSID."""
    lines = [f"map update pinned {pins}/mrc_usid key hex "
             f"{_hex(struct.pack('<Q', mac_key(mac)))} value hex "
             f"{_hex(END_PORT.pack(u, 0, 0, 0))}" for mac, u in ports.items()]
    _batch(lines)


def _batch(lines: list[str]) -> None:
    """bpftool commands in one process (a map update each is a process each otherwise)."""
    with tempfile.NamedTemporaryFile("w", suffix=".bpftool", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        _run(["bpftool", "batch", "file", f.name])
    finally:
        os.unlink(f.name)


def read_usid(pins: Path = PIN) -> dict[str, dict[str, int]]:
    """Per port MAC: the uSID its End is for, and how many packets it shifted and dropped
    (empty where the kernel engine forwards)."""
    if not (pins / "mrc_usid").exists():
        return {}
    return _dump("mrc_usid", END_PORT, ("usid", "pad", "shifted", "dropped"), pins)


def unload() -> None:
    if PIN.exists():
        shutil.rmtree(PIN, ignore_errors=True)


@dataclass(frozen=True)
class PortConfig:
    rate_bps: int
    ecn_threshold: int
    trim_threshold: int
    buffer: int
    lasthop: bool

    def pack(self) -> bytes:
        return CFG.pack(self.rate_bps, self.ecn_threshold, self.trim_threshold, self.buffer,
                        int(self.lasthop))


def port_config(layout: Layout, i: Interface) -> PortConfig:
    """The switch config of one egress port. A leaf's host-facing port is the last hop:
    it trims to TRIMMED_LASTHOP, and it never marks ECN (the white paper, 2.1): the queue there
    is the receiver's incast, which no choice of path avoids, so a mark would only
    push senders off good paths. An ECMP fabric's switches are the RoCE baseline's,
    which mark everywhere: DCQCN's notification point needs the incast's marks."""
    t = layout.topo
    node = layout.nodes[i.node]
    peer = layout.nodes[i.peer_node]
    lasthop = node.kind is Kind.LEAF and peer.kind is Kind.HOST
    return PortConfig(int(i.mbps * 1e6),
                      0 if lasthop and not t.ecmp else t.ecn_threshold_bytes,
                      t.trim_threshold_bytes, t.buffer_bytes, lasthop)


def configure(ports: dict[str, PortConfig], reset_counters: bool = True) -> None:
    """Write (or rewrite) the config of ports given by MAC; new ports start at zero."""
    lines = []
    for mac, cfg in ports.items():
        key = _hex(struct.pack("<Q", mac_key(mac)))
        lines.append(f"map update pinned {PIN}/mrc_cfg key hex {key} value hex {_hex(cfg.pack())}")
        if reset_counters:
            lines.append(f"map update pinned {PIN}/mrc_state key hex {key} value hex "
                         f"{_hex(bytes(STATE.size))}")
    _batch(lines)


def attach(pid: int | None, ifnames: list[str], netns_path: str | None = None,
           egress: Path | None = PROG, ingress: Path | None = None) -> None:
    """clsact, then on each interface the pinned `egress` program (the switch's) and the
    `ingress` one (the BPF engine's End), in one tc process.

    Enters the node's network namespace only (not its mount namespace), so the pinned
    program under /sys/fs/bpf stays visible."""
    batch = "".join(f"qdisc add dev {n} clsact\n"
                    + (f"filter add dev {n} egress bpf da object-pinned {egress}\n"
                       if egress else "")
                    + (f"filter add dev {n} ingress bpf da object-pinned {ingress}\n"
                       if ingress else "") for n in ifnames)
    path = netns_path or f"/proc/{pid}/ns/net"
    _run(["nsenter", f"--net={path}", "tc", "-batch", "-"], stdin=batch)


CFG_FIELDS = ("rate_bps", "ecn_threshold", "trim_threshold", "buffer", "lasthop")


def _mac(key: int) -> str:
    """A map key (mac_key) back to the port's MAC."""
    return ":".join(f"{(key >> s) & 0xFF:02x}" for s in range(40, -1, -8))


def _dump(name: str, layout: struct.Struct, names: tuple[str, ...], pins: Path = PIN
          ) -> dict[str, dict[str, int]]:
    """One pinned map's entries, per port MAC, as {field: value}."""
    out = json.loads(_run(["bpftool", "-j", "map", "dump", "pinned", f"{pins}/{name}"]))
    res = {}
    for entry in out:
        key, value = entry.get("key"), entry.get("value")
        if isinstance(key, list):  # raw hex bytes (no BTF)
            k = struct.unpack("<Q", bytes(int(x, 16) for x in key))[0]
            raw = layout.unpack(bytes(int(x, 16) for x in value))
            v = dict(zip(names, raw[:len(names)], strict=True))
        else:
            k, v = int(key), {f: int(value[f]) for f in names}
        res[_mac(k)] = v
    return res


def read_state() -> dict[str, dict[str, int]]:
    """Counters (and the virtual queue) per port MAC."""
    return _dump("mrc_state", STATE, STATE_FIELDS)


def read_config() -> dict[str, dict[str, int]]:
    """What each port's switch program runs with, per port MAC (a re-rated port's rate)."""
    return _dump("mrc_cfg", CFG, CFG_FIELDS)


# struct ploss_key / ploss_val: one path's loss on one port (switch.c, fault path-loss).
PLOSS_KEY = struct.Struct("<Q16s16sI4x")
PLOSS_VAL = struct.Struct("<I4xQQ")


@dataclass(frozen=True)
class PathLossKey:
    port_mac: str  # the egress port
    src: bytes  # the path's inner source address (16 bytes)
    dst: bytes  # and destination
    ev_hi: int  # the EV's high half: plane and spine

    def pack(self) -> bytes:
        return PLOSS_KEY.pack(mac_key(self.port_mac), self.src, self.dst, self.ev_hi)


def set_path_loss(key: PathLossKey, percent: float) -> None:
    """Drop `percent` of the path's packets on its port from now on (counters restart)."""
    value = PLOSS_VAL.pack(round(percent * 10_000), 0, 0)
    _run(["bpftool", "map", "update", "pinned", f"{PIN}/mrc_ploss", "key", "hex",
          *_hex(key.pack()).split(), "value", "hex", *_hex(value).split()])


def clear_path_loss(key: PathLossKey) -> None:
    """The path's packets pass again (a missing entry is no error: healing is idempotent)."""
    r = subprocess.run(["bpftool", "map", "delete", "pinned", f"{PIN}/mrc_ploss", "key",
                        "hex", *_hex(key.pack()).split()], capture_output=True, text=True)
    if r.returncode and "No such file" not in r.stderr:
        raise MrcemuError(f"bpftool map delete failed: {r.stderr.strip()[:400]}")


def read_path_loss() -> dict[PathLossKey, dict[str, float]]:
    """Each active path loss: its percent and how many packets it matched and dropped."""
    out = json.loads(_run(["bpftool", "-j", "map", "dump", "pinned", f"{PIN}/mrc_ploss"]))
    res = {}
    for entry in out:
        key, value = entry.get("key"), entry.get("value")
        if isinstance(key, list):  # raw hex bytes (no BTF)
            port, src, dst, ev_hi = PLOSS_KEY.unpack(bytes(int(x, 16) for x in key))
            ppm, matched, dropped = PLOSS_VAL.unpack(bytes(int(x, 16) for x in value))
        else:
            port, ev_hi = int(key["port"]), int(key["ev_hi"])
            src, dst = bytes(int(x) for x in key["src"]), bytes(int(x) for x in key["dst"])
            ppm, matched, dropped = (int(value[f]) for f in ("per_million", "matched",
                                                              "dropped"))
        res[PathLossKey(_mac(port), src, dst, ev_hi)] = {"percent": ppm / 10_000,
                                                  "matched": matched, "dropped": dropped}
    return res
