"""`mrcemu cluster local N`: N-1 extra "servers" on this machine (docs/scale-out.md).

Each is a network namespace `mrcemu-srvK` running Debian's sshd on a private underlay:
a veth whose root end sits on the bridge `mrcemu-ul` with this machine's own underlay
address, MTU 9100 (a VXLAN over IPv6 adds 70 bytes to a 9000-byte frame). Each sshd has
its own host key, config, PID file and authorized key, all under
/run/mrcemu/cluster/srvK/, and answers only the key this command made. A cluster file
for them (`plane` placement, or `rack`) is written for `--cluster`.

Everything made is recorded in /run/mrcemu/cluster/servers.json as it is made, and
`down` also finds what a kill -9 left unrecorded by its names, so `--down` always leaves
nothing: no namespace, device, sshd or file.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import yaml
from pyroute2 import IPRoute, NetlinkError, NetNS, netns

from mrcemu import rundir
from mrcemu.errors import MrcemuError
from mrcemu.fabric.sweep import cmdline
from mrcemu.topology.cluster import LOCAL, Cluster, Server, to_mapping

DIR = rundir.RUN_DIR / "cluster"
RECORD = DIR / "servers.json"
CLUSTER_FILE = DIR / "local.yaml"
KEY = DIR / "id_ed25519"
KNOWN_HOSTS = DIR / "known_hosts"
BRIDGE = "mrcemu-ul"
UNDERLAY_MTU = 9100
PREFIX = "fd6d:7263:656d::"  # ULA; this machine is ::1, server K is ::K+1
SSHD = "/usr/sbin/sshd"
PRIVSEP = Path("/run/sshd")  # sshd's privilege separation directory: must exist
NS = re.compile(r"^mrcemu-srv\d+$")
VETH = re.compile(r"^mrcemu-s\d+$")
INNER = "u0"  # the underlay device inside each server
HEADER = "# mrcemu cluster local"  # the first words of the file it writes


def ns_name(k: int) -> str:
    return f"mrcemu-srv{k}"


def address(k: int) -> str:
    """This machine's underlay address (k = 0) and server k's."""
    return f"{PREFIX}{k + 1:x}"


def _record() -> dict:
    try:
        return json.loads(RECORD.read_text())
    except (OSError, ValueError):
        return {"servers": [], "made_privsep": False}


def _save(rec: dict) -> None:
    DIR.mkdir(parents=True, exist_ok=True)
    tmp = RECORD.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1))
    tmp.replace(RECORD)


def _run(*args: str, timeout: float = 20) -> str:
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise MrcemuError(f"{args[0]} failed: {(r.stderr or r.stdout).strip()[-300:]}")
    return r.stdout


def ssh_args(k: int, *command: str) -> list[str]:
    """ssh to local server k with the key and host keys this command made."""
    return ["ssh", "-i", str(KEY), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", f"UserKnownHostsFile={KNOWN_HOSTS}", "-o", "StrictHostKeyChecking=yes",
            "-o", "ConnectTimeout=5", f"root@{address(k)}", *command]


def _sshd_config(k: int, d: Path) -> str:
    return "\n".join([
        f"ListenAddress [{address(k)}]:22",
        f"HostKey {d / 'ssh_host_ed25519_key'}",
        f"PidFile {d / 'sshd.pid'}",
        f"AuthorizedKeysFile {d / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",  # the files live under /run/mrcemu, not a home directory
        "PrintMotd no",
        # A command over ssh runs as `$SHELL -c`, and bash then reads root's ~/.bashrc
        # when no shell is above it (SHLVL unset): on this machine a pyenv set-up there
        # took 0.17 s of every session, a node shell's and the agent's included. A
        # server kept for mrcemu has no such rc; these stand-ins skip it.
        "SetEnv SHLVL=1",
        # Mininet's cluster sends many commands over one connection per server
        "MaxSessions 64",
        "MaxStartups 64",
        "",
    ])


def _bridge(ipr: IPRoute) -> int:
    found = ipr.link_lookup(ifname=BRIDGE)
    if found:
        return found[0]
    ipr.link("add", ifname=BRIDGE, kind="bridge")
    (idx,) = ipr.link_lookup(ifname=BRIDGE)
    ipr.link("set", index=idx, mtu=UNDERLAY_MTU)
    # no DAD: the address is usable at once, and this is a private segment
    ipr.addr("add", index=idx, address=address(0), prefixlen=64, flags=0x02)  # IFA_F_NODAD
    ipr.link("set", index=idx, state="up")
    return idx


def _pid_in(path: Path) -> int | None:
    """The PID a daemon wrote to `path`; None while it is missing or not yet written."""
    try:
        words = path.read_text().split()
    except FileNotFoundError:
        return None
    return int(words[0]) if words and words[0].isdigit() else None


def _server(k: int, rec: dict, ipr: IPRoute, bridge: int) -> None:
    name, d = ns_name(k), DIR / f"srv{k}"
    rec["servers"].append({"k": k, "ns": name, "veth": f"mrcemu-s{k}", "pid": None})
    _save(rec)  # recorded before it exists: a kill -9 from here on is still cleaned up
    netns.create(name)
    ipr.link("add", ifname=f"mrcemu-s{k}", kind="veth", peer={"ifname": INNER,
                                                             "net_ns_fd": name})
    (idx,) = ipr.link_lookup(ifname=f"mrcemu-s{k}")
    ipr.link("set", index=idx, mtu=UNDERLAY_MTU, master=bridge)
    ipr.link("set", index=idx, state="up")
    with NetNS(name) as ns:
        (lo,) = ns.link_lookup(ifname="lo")
        ns.link("set", index=lo, state="up")
        (u,) = ns.link_lookup(ifname=INNER)
        ns.link("set", index=u, mtu=UNDERLAY_MTU)
        ns.addr("add", index=u, address=address(k), prefixlen=64, flags=0x02)
        ns.link("set", index=u, state="up")
    d.mkdir(parents=True, exist_ok=True)
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"mrcemu {name}", "-f",
         str(d / "ssh_host_ed25519_key"))
    shutil.copy(KEY.with_suffix(".pub"), d / "authorized_keys")
    (d / "sshd_config").write_text(_sshd_config(k, d))
    host_key = (d / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    with KNOWN_HOSTS.open("a") as f:
        f.write(f"{address(k)} {' '.join(host_key)}\n")
    _run("ip", "netns", "exec", name, SSHD, "-f", str(d / "sshd_config"))
    pid_file = d / "sshd.pid"
    deadline = time.monotonic() + 10
    # sshd creates its PID file, then writes it: wait for the number, not the file
    while (pid := _pid_in(pid_file)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid is None:
        raise MrcemuError(f"sshd in {name} did not start (no PID in {pid_file})")
    rec["servers"][-1]["pid"] = pid
    _save(rec)


def _wait_ssh(k: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        r = subprocess.run(ssh_args(k, "true"), capture_output=True, text=True, timeout=15)
        if r.returncode == 0:
            return
        last = r.stderr.strip()
        time.sleep(0.2)
    raise MrcemuError(f"ssh to local server {k} ({address(k)}) failed: {last[-300:]}")


def up(n: int, out: Path | None = None, placement: str = "plane") -> tuple[Path, Cluster]:
    """N-1 local servers, each answering ssh; the cluster file (`placement`: plane or
    rack)."""
    if n < 2:
        raise MrcemuError("a local cluster needs at least 2 servers (this machine and one "
                          "more): e.g. 'mrcemu cluster local 2'")
    if n > 65:
        raise MrcemuError("a local cluster has at most 65 servers (one per plane is 9)")
    if not Path(SSHD).exists():
        raise MrcemuError(f"{SSHD} is missing: install Debian's openssh-server "
                          "('make install' does)")
    if _record()["servers"] or any(leftovers().values()):
        raise MrcemuError("a local cluster is already up: remove it first with "
                          "'sudo mrcemu cluster local --down'")
    rec = {"servers": [], "made_privsep": False, "file": None}
    try:
        DIR.mkdir(parents=True, exist_ok=True)
        if not PRIVSEP.exists():
            PRIVSEP.mkdir(mode=0o755)
            rec["made_privsep"] = True
        _save(rec)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mrcemu cluster local",
             "-f", str(KEY))
        KNOWN_HOSTS.write_text("")
        with IPRoute() as ipr:
            bridge = _bridge(ipr)
            for k in range(1, n):
                _server(k, rec, ipr, bridge)
        for k in range(1, n):
            _wait_ssh(k)
        cluster = Cluster(
            str(out or CLUSTER_FILE),
            (Server("local", LOCAL, "root", BRIDGE),
             *(Server(f"srv{k}", address(k), "root", INNER) for k in range(1, n))),
            placement, str(KEY), str(KNOWN_HOSTS))
        path = Path(out) if out else CLUSTER_FILE
        path.write_text(f"{HEADER} {n}: this machine and {n - 1} server(s) "
                        "in namespaces; remove with 'sudo mrcemu cluster local --down'\n"
                        + yaml.safe_dump(to_mapping(cluster), sort_keys=False))
        rec["file"] = str(path)
        _save(rec)
        return path, cluster
    except BaseException:
        down()
        raise


def leftovers() -> dict[str, list]:
    """What a local cluster left, found by name (whatever the record says)."""
    with IPRoute() as ipr:
        links = [x.get_attr("IFLA_IFNAME") for x in ipr.get_links()]
    return {"namespaces": sorted(x for x in netns.listnetns() if NS.match(x)),
            "devices": sorted(x for x in links if x == BRIDGE or VETH.match(x)),
            "sshd": _our_sshds()}


def _our_sshds() -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        args = cmdline(int(p.name))
        # sshd rewrites its title: "sshd: /usr/sbin/sshd -f CONFIG [listener] ..."
        prog = args[0].split(" ")[0].rstrip(":") if args else ""
        if prog.endswith("sshd") and any(str(DIR) in a for a in args):
            out.append(int(p.name))
    return out


def _in_namespaces(names: list[str]) -> set[int]:
    inodes = set()
    for name in names:
        try:
            inodes.add(os.stat(f"/run/netns/{name}").st_ino)
        except OSError:
            pass
    out = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.stat(p / "ns" / "net").st_ino in inodes:
                    out.add(int(p.name))
            except OSError:
                pass
    return out


def _descendants(roots: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(p.name))
    out: set[int] = set()
    todo = list(roots)
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def down() -> dict[str, int]:
    """Remove every local server and what they used; counts of what was removed."""
    rec = _record()
    listeners = set(_our_sshds()) | {s["pid"] for s in rec["servers"] if s.get("pid")}
    # and every process in a server's namespace (the sessions each sshd forked), with
    # what they started (a node's shell, in a namespace of its own): they outlive their
    # listener
    inside = _in_namespaces(sorted(x for x in netns.listnetns() if NS.match(x)))
    pids = listeners | inside | _descendants(listeners | inside)
    killed = 0
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in sorted(pids):
            try:
                os.kill(pid, sig)
                killed += sig == signal.SIGTERM and pid in listeners
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.05)
    spaces = set(netns.listnetns())
    names = {s["ns"] for s in rec["servers"]} | {x for x in spaces if NS.match(x)}
    removed = 0
    for name in sorted(names & spaces):
        netns.remove(name)  # takes its veth end, and so the pair, with it
        removed += 1
    devices = 0
    with IPRoute() as ipr:
        for x in ipr.get_links():
            ifname = x.get_attr("IFLA_IFNAME")
            if ifname == BRIDGE or VETH.match(ifname or ""):
                try:
                    ipr.link("del", index=x["index"])
                    devices += 1
                except NetlinkError as e:
                    if e.code != errno.ENODEV:  # gone with its namespace meanwhile
                        raise
    if rec.get("made_privsep"):
        try:
            PRIVSEP.rmdir()
        except OSError:
            pass
    f = Path(rec["file"]) if rec.get("file") else None
    if f and f.parent != DIR and f.exists() and f.read_text().startswith(HEADER):
        f.unlink()  # the file it wrote names servers that are gone
    shutil.rmtree(DIR, ignore_errors=True)
    return {"sshd": killed, "namespaces": removed, "devices": devices}
