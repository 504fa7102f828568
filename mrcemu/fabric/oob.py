"""The out-of-band network: what a real cluster has beside its RDMA fabric for ssh, job
launch and a program's own handshake (perftest exchanges QP numbers and keys over TCP
before it writes a byte). One bridge in a namespace of its own, a veth to each host
(`oob0`, IPv4 10.77.0.0/16), and a hosts file naming each host's address, so that
`ib_write_bw h3` on an emulated host finds h3. None of its traffic crosses the
emulated fabric, so none of it is in the fabric's counters or captures.

Made on first use (`mrcemu exec` on a host), removed with the fabric (`down`, `clean`).
"""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

from mrcemu import rundir
from mrcemu.errors import MrcemuError

NS = "mrcemu-oob"
BRIDGE = "oob"
DEV = "oob0"  # each host's end
PREFIX = 16
HOSTS = rundir.RUN_DIR / "hosts"
_LOCK = rundir.RUN_DIR / "oob.lock"


def address(host: int) -> str:
    """Host `host`'s out-of-band IPv4 address (10.77.0.1 for h0)."""
    n = host + 1
    if n >= 1 << 16:
        raise MrcemuError(f"h{host}: the out-of-band network numbers 65,535 hosts")
    return f"10.77.{n >> 8}.{n & 255}"


def _ip(*args: str, ns_pid: int | None = None) -> subprocess.CompletedProcess:
    pre = ["nsenter", f"--net=/proc/{ns_pid}/ns/net"] if ns_pid else []
    return subprocess.run([*pre, "ip", *args], capture_output=True, text=True, check=False)


def _must(r: subprocess.CompletedProcess, what: str) -> None:
    if r.returncode:
        raise MrcemuError(f"the out-of-band network: {what}: {r.stderr.strip()}")


def ensure(hosts: dict[str, int]) -> Path:
    """Every host of `hosts` (name -> its shell's PID) on the out-of-band network;
    the hosts file that names them. Idempotent, and safe from concurrent callers."""
    rundir.RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not Path(f"/run/netns/{NS}").exists():
            _must(_ip("netns", "add", NS), "its namespace")
            _must(_ip("-n", NS, "link", "add", BRIDGE, "type", "bridge"), "its bridge")
            _must(_ip("-n", NS, "link", "set", BRIDGE, "up"), "its bridge")
        for name, pid in hosts.items():
            if _ip("link", "show", DEV, ns_pid=pid).returncode == 0:
                continue
            peer = f"oob-{name}"[:15]
            _must(_ip("link", "add", peer, "netns", NS, "type", "veth", "peer", "name", DEV,
                      "netns", str(pid)), f"{name}'s link")
            _must(_ip("-n", NS, "link", "set", peer, "master", BRIDGE, "up"), f"{name}'s link")
            host = int(name[1:])
            _must(_ip("addr", "add", f"{address(host)}/{PREFIX}", "dev", DEV, ns_pid=pid),
                  f"{name}'s address")
            _must(_ip("link", "set", DEV, "up", ns_pid=pid), f"{name}'s link")
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
        lines += [f"{address(int(n[1:]))} {n}" for n in sorted(hosts, key=lambda n: int(n[1:]))]
        HOSTS.write_text("\n".join(lines) + "\n")
    return HOSTS


def remove() -> int:
    """The network gone (its veths go with its namespace); 1 if there was one."""
    HOSTS.unlink(missing_ok=True)
    if not Path(f"/run/netns/{NS}").exists():
        return 0
    _ip("netns", "del", NS)
    return 1
