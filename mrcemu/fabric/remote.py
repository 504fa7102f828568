"""Mininet's cluster edition, extended in this one place for mrcemu (docs/scale-out.md).

`mininet.examples.cluster` runs a node on another server over one ssh connection, in
the same `mnexec` namespaces mrcemu's nodes are, and links nodes on two servers with
tunnels. What it assumes that does not hold here, and what this module changes:

- Its cross-server links are GRE (this kernel has none) or `ssh -w` taps, and its GRE
  MTU is 1450. `VxlanLink` makes a VXLAN device on each server instead, one VNI a link,
  bound to the server's underlay device, with the layout's MAC and MTU 9000 (the
  underlay carries 9,070 bytes for IPv6), then moves it into its node.
- It reaches servers by IPv4 address (`getent ahostsv4`), with the user's own ssh
  setup, puts `sudo` in front of ssh and of every remote command, and hands ssh a
  command's words unquoted (the remote shell splits them again). `RemoteNode` takes
  the cluster file's address (an IPv6 literal too), its key and known_hosts, runs as
  root with no sudo (a machine may not have it), and quotes what it sends.
- Its shared connection (ControlMaster=auto, ControlPersist=1) is opened by whichever
  ssh comes first and lingers a second after the last. Here the manager opens each
  server's master for the fabric's life (`servers.start_masters`) and every ssh,
  node shells included, rides on it.
- It makes each link as it is added: three shell round trips for a veth pair, ssh
  sessions for a tunnel. `PlannedLink` only writes down each end's `ip` commands in a
  `LinkPlan`, one list a server; `LinkPlan.make` hands each server's list to its agent,
  which runs it in one `ip -batch` there (0.18 s a link over two servers before).
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import signal
import socket
import subprocess
import tty
from collections.abc import Callable
from typing import Any

from mininet.examples.cluster import RemoteLink, RemoteMixin
from mininet.node import Node

from mrcemu.fabric import servers
from mrcemu.topology.cluster import Cluster, Server

VXLAN_PORT = 4789
LINK_MTU = 9000


def ssh_base(cluster: Cluster) -> list[str]:
    """ssh as Mininet's cluster edition runs a node's shell (-tt), over the server's
    shared connection (`servers.ssh_base`)."""
    return [*servers.ssh_base(cluster), "-tt"]


class RemoteNode(RemoteMixin, Node):  # type: ignore[misc]
    """A node on one of the cluster's servers (or this one), reached as root over the
    cluster's ssh: `cluster` and `on` (a Server) are passed as node parameters."""

    def __init__(self, name: str, cluster: Cluster, on: Server, **kwargs: Any) -> None:
        self.sshbase = ssh_base(cluster)
        self.on = on
        super().__init__(name, server="localhost" if on.local else on.address,
                         user="root", serverIP=None if on.local else on.address, **kwargs)

    def startShell(self, *args: Any, **kwargs: Any) -> None:  # noqa: N802
        # Node.__init__ starts the shell: ssh's command is set by then, with
        # `sudo -E -u root` in front, which is not needed as root and not always there.
        if self.isRemote:
            self.sshcmd = [*self.sshbase, self.dest]
        super().startShell(*args, **kwargs)

    def root(self, *cmd: str) -> str:
        """Run a command in the server's root namespace (not the node's); its output, or
        an error naming the server. (The cluster edition's rcmd mixes bytes and text
        under Python 3.)"""
        full = list(cmd) if not self.isRemote else [
            *[x for x in self.sshcmd if x != "-tt"], shlex.join(cmd)]
        r = subprocess.run(full, capture_output=True, text=True, timeout=60)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd)} on {self.on.name}: "
                               f"{(r.stderr or r.stdout).strip()[-300:]}")
        return r.stdout

    def underlay_ip(self, toward: RemoteNode) -> str:
        """This server's address on the underlay toward `toward`'s server: a remote
        server's own, this machine's the source of its route there."""
        if not self.on.local:
            return _ip(self.on.address)
        route = self.root("ip", "-o", "route", "get", _ip(toward.on.address))
        return route.split(" src ")[1].split()[0]

    def terminate(self) -> None:
        """Mininet hangs up a node's shell (SIGHUP) and waits for it. A remote node's
        shell process is ssh, which a parent started under nohup leaves ignoring
        SIGHUP: that wait never ended. TERM, then KILL, and the session (and its shell)
        ends on the server."""
        shell = self.shell
        if shell is not None and self.isRemote and shell.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(shell.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    shell.wait(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    continue
        super().terminate()

    def _popen(self, cmd: Any, sudo: bool = True, tt: bool = True, **params: Any) -> Any:
        # As the cluster edition's, less sudo: we are root on every server.
        if isinstance(cmd, str):
            cmd = cmd.split()
        if self.isRemote:
            raw_if_tty(params.get("stdin"))
            # ssh hands its arguments, joined by spaces, to the remote shell to parse
            # again: quoted, so that `python3 -c "..."` arrives as it left.
            base = self.sshcmd if tt else [x for x in self.sshcmd if x != "-tt"]
            cmd = [*base, shlex.join(cmd)]
        params.update(preexec_fn=self._ignoreSignal)
        return Node._popen(self, cmd, **params)


def raw_if_tty(fd: Any) -> None:
    """Put a node shell's local terminal (the pty Mininet hands ssh as its stdin) in raw
    mode before ssh starts. ssh -tt makes it raw itself, but over the shared connection
    not always before Mininet types: `echo $$` once came back as
    'echo $$\\r\\n19402\\r\\r\\n' (the command echoed, and the output's newline
    translated once more: this pty, cooked), and the node's PID failed to parse (CI, once
    in three runs). The remote shell's own pty is Mininet's `stty -echo`."""
    if isinstance(fd, int) and os.isatty(fd):
        tty.setraw(fd)


class VxlanLink(RemoteLink):  # type: ignore[misc]
    """A link whose ends may be on two servers: a veth pair when both are on one, else a
    VXLAN device on each server (VNI `vni`), moved into its node."""

    def __init__(self, node1: RemoteNode, node2: RemoteNode, vni: int, **kwargs: Any) -> None:
        self.vni = vni
        super().__init__(node1, node2, **kwargs)

    def stop(self) -> None:
        # Deleting one end in its node is enough: the VXLAN device goes with it.
        self.intf1.delete()
        self.intf2.delete()


def veth_line(name1: str, addr1: str | None, pid1: int, name2: str, addr2: str | None,
              pid2: int) -> str:
    """The `ip -batch` line of a veth pair made with each end in its node at once."""
    return shlex.join(["link", "add", "name", name1, *(["address", addr1] if addr1 else []),
                       "netns", str(pid1), "type", "veth", "peer", "name", name2,
                       *(["address", addr2] if addr2 else []), "netns", str(pid2)])


class LinkPlan:
    """The `ip -batch` lines that make a fabric's links, by the server that runs them."""

    def __init__(self) -> None:
        self.lines: dict[Server, list[str]] = {}
        self._underlay: dict[tuple[str, str], str] = {}

    def add(self, server: Server, *lines: str) -> None:
        self.lines.setdefault(server, []).extend(lines)

    def underlay_ip(self, me: RemoteNode, toward: RemoteNode) -> str:
        """`me`'s server's underlay address toward `toward`'s, asked once a pair."""
        key = (me.on.name, toward.on.name)
        if key not in self._underlay:
            self._underlay[key] = me.underlay_ip(toward)
        return self._underlay[key]

    def make(self, servers: servers.Servers,
             progress: Callable[[int, int], None] | None = None) -> None:
        """Each server's links, made there by its agent in one request."""
        done, total = 0, sum(len(x) for x in self.lines.values())
        for server, lines in self.lines.items():
            servers.call(server, "make_links", lines=lines)
            done += len(lines)
            if progress:
                progress(done, total)


class PlannedLink(VxlanLink):
    """A `VxlanLink` made later, with the others of its server (`LinkPlan.make`): a veth
    pair when both ends are on one server, else a VXLAN port on each."""

    def __init__(self, node1: RemoteNode, node2: RemoteNode, vni: int, plan: LinkPlan,
                 **kwargs: Any) -> None:
        self.plan = plan
        super().__init__(node1, node2, vni, **kwargs)

    def makeIntfPair(self, intfname1: str, intfname2: str, addr1: str | None = None,  # noqa: N802
                     addr2: str | None = None, node1: RemoteNode | None = None,
                     node2: RemoteNode | None = None, deleteIntfs: bool = True) -> bool:
        a = self.node1 if node1 is None else node1
        b = self.node2 if node2 is None else node2
        if a.on == b.on:
            self.plan.add(a.on, veth_line(intfname1, addr1, a.pid, intfname2, addr2, b.pid))
            return True
        for me, peer, intf, addr in ((a, b, intfname1, addr1), (b, a, intfname2, addr2)):
            # Made in its node at once (`netns`), bound to the server's underlay in the
            # namespace that runs the batch: a device moved after it is made costs the
            # kernel a namespace change each, 17 ms here.
            make = ["link", "add", intf, *(["address", addr] if addr else []), "mtu",
                    str(LINK_MTU), "netns", str(me.pid), "type", "vxlan", "id", str(self.vni),
                    "remote", self.plan.underlay_ip(peer, me),
                    "local", self.plan.underlay_ip(me, peer), "dstport", str(VXLAN_PORT),
                    "nolearning"]
            if me.on.underlay:
                make += ["dev", me.on.underlay]
            self.plan.add(me.on, shlex.join(make))
        self.tunnel = None
        return True


def _ip(address: str) -> str:
    """An IP literal as it is; a host name resolved (IPv6 first, as the underlay is)."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        pass
    infos = socket.getaddrinfo(address, None)
    infos.sort(key=lambda i: i[0] != socket.AF_INET6)
    return str(infos[0][4][0])
