"""Probe each capability of `mrcemu.preflight` on this machine, for real where that is
cheap: the kernel's parts are made and used in a scratch network and mount namespace that
dies with the probe (`python -m mrcemu.fabric.preflight_probe`, run under unshare), the
End engines by fabric/usid_engine.py, the rest read from /proc and PATH. Kept once per
boot in the run directory, as the End engines are."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

from mrcemu import rundir
from mrcemu.fabric import bpf, scratch, usid_engine
from mrcemu.fabric.bootcache import per_boot
from mrcemu.preflight import CAPABILITIES, Found

CACHE = rundir.RUN_DIR / "preflight.json"
KEYS = tuple(c.key for c in CAPABILITIES)
# What the child in the scratch namespaces probes (`_inside`).
INSIDE = ("netns", "veth", "htb", "clsact", "cls_bpf", "vxlan", "nftables", "numgen")
TOOLS = ("mnexec", "bpftool", "tc", "ip")
# What a kernel that charges BPF maps to RLIMIT_MEMLOCK needs for the switch's maps.
MEMLOCK_NEEDED = 64 << 20


def _sh(*argv: str) -> str | None:
    """None if the command succeeds, else its complaint in one line."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{argv[0]}: {e}"
    if r.returncode == 0:
        return None
    return " ".join((r.stderr or r.stdout).split())[:160] or f"{argv[0]} exit {r.returncode}"


def _inside() -> Found:
    """The checks that make kernel objects: run inside the scratch namespaces."""
    out: Found = {"netns": None}
    out["veth"] = _sh("ip", "link", "add", "pf0", "type", "veth", "peer", "name", "pf1")
    if out["veth"] is None:
        _sh("ip", "link", "set", "pf0", "up")
    dev = "pf0" if out["veth"] is None else "lo"
    out["htb"] = _sh("tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb")
    out["clsact"] = _sh("tc", "qdisc", "add", "dev", "lo", "clsact")
    pins = scratch.BPFFS
    why = _sh("mount", "-t", "bpf", "bpf", str(pins))  # the child's own bpffs (scratch.py)
    if why is None and bpf.OBJ.exists():
        why = _sh("bpftool", "prog", "load", str(bpf.OBJ), str(pins / "switch"), "type",
                  "classifier", "pinmaps", str(pins))
    elif why is None:
        why = f"{bpf.OBJ} is missing: run 'make install'"
    out["cls_bpf"] = why or (
        "needs clsact first" if out["clsact"] else
        _sh("tc", "filter", "add", "dev", "lo", "egress", "bpf", "da", "object-pinned",
            str(pins / "switch")))
    out["vxlan"] = _sh("ip", "link", "add", "pfx", "type", "vxlan", "id", "42", "dstport",
                       "4789")
    out["nftables"] = (_sh("nft", "add", "table", "inet", "pf") or
                       _sh("nft", "add", "chain", "inet", "pf", "c",
                           "{ type filter hook postrouting priority 0; }"))
    out["numgen"] = "needs nftables" if out["nftables"] else _sh(
        "nft", "add", "rule", "inet", "pf", "c", "numgen", "random", "mod", "100", "<", "5",
        "counter", "drop")
    return out


def _jit() -> str | None:
    try:
        on = Path("/proc/sys/net/core/bpf_jit_enable").read_text().strip()
    except OSError:
        return "net.core.bpf_jit_enable is absent (no BPF JIT in this kernel)"
    return None if on in ("1", "2") else f"net.core.bpf_jit_enable = {on}"


def _memfd() -> str | None:
    try:
        fd = os.memfd_create("mrcemu-preflight", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except OSError as e:
        return f"memfd_create: {e.strerror}"
    os.close(fd)
    return None


def _memlock() -> str | None:
    if tuple(int(x) for x in os.uname().release.split(".")[:2] if x.isdigit()) >= (5, 11):
        return None  # maps are charged to their memory cgroup
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY or soft >= MEMLOCK_NEEDED:
        return None
    return f"RLIMIT_MEMLOCK is {soft >> 10} KiB"


def _perf() -> str | None:
    if not shutil.which("perf"):
        return "perf is not installed"
    return _sh("perf", "stat", "-x,", "-e", "task-clock", "true")


def _idle_group() -> str | None:
    """Whether programs' idle CPU group can be made: made, and removed again unless it
    was there before (a fabric's programs in it)."""
    from mrcemu.fabric import idlegroup

    if os.geteuid() != 0:
        return "not probed: needs root (run 'sudo mrcemu doctor')"
    there = idlegroup.exists()
    _procs, why = idlegroup.ensure()
    if not there:
        idlegroup.remove()
    return why


def _which(*names: str) -> str | None:
    gone = [n for n in names if not shutil.which(n) and not Path("/usr/sbin", n).exists()]
    return f"not found: {', '.join(gone)}" if gone else None


def probe(refresh: bool = False) -> Found:
    """Every capability, probed now (as root: namespaces and tc need it); the End
    engines as fabric/usid_engine.py keeps them (probed again with `refresh`)."""
    if os.geteuid() != 0:
        why = "not probed: needs root (run 'sudo mrcemu doctor')"
        got: Found = dict.fromkeys(INSIDE, why) | {"usid_kernel": why, "usid_bpf": why}
    else:
        got = scratch.run("mrcemu.fabric.preflight_probe", INSIDE)
        engines = usid_engine.found(refresh)
        got |= {"usid_kernel": engines["kernel"], "usid_bpf": engines["bpf"]}
    got |= {"bpf_jit": _jit(), "memfd": _memfd(), "memlock": _memlock(), "perf": _perf(),
            "idle_group": _idle_group(), "sshd": _which("sshd"),
            "perftest": _which("ib_write_bw", "ib_write_lat"),
            "tools": _which(*TOOLS), "tshark": _which("tshark", "dumpcap")}
    return {k: got.get(k, "not probed") for k in KEYS}


def found(refresh: bool = False) -> Found:
    """Every capability: probed once per boot, as root (a probe without root is not kept)."""
    if os.geteuid() != 0:
        return probe(refresh)
    return per_boot(CACHE, KEYS, lambda: probe(refresh), refresh)


def main() -> int:
    print(json.dumps(_inside()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
