"""Which server owns each node of a running fabric, and how to reach its agent.

A fabric on one machine has one server, this one, whose agent (`fabric/agent.py`) runs
in-process. A fabric split over a cluster (`up --cluster`) has one per server in the
cluster file; a remote server's agent runs over that server's shared ssh connection
(`ssh_control`), one request a call, and answers in JSON.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mrcemu import rundir
from mrcemu.errors import MrcemuError
from mrcemu.fabric import agent, state
from mrcemu.topology.cluster import Cluster, Server

# One ssh master connection per server, shared by every command mrcemu runs there
# (node shells, VXLAN set-up, the agent): OpenSSH's connection multiplexing.
CONTROL_DIR = rundir.SSH_CONTROL
THIS = "local"  # the name of this machine's server when there is no cluster
TIMEOUT = 300
RELAY_SLACK = 30.0  # seconds a relayed NIC batch may take beyond the daemons' own limit


def control_path() -> str:
    return rundir.ssh_control_path()


def ssh_base(cluster: Cluster, master: bool = False) -> list[str]:
    """ssh with the cluster file's key and pinned host keys, over the server's shared
    connection when its master is up (`start_masters`), directly otherwise; `master`:
    the master itself."""
    out = ["ssh", "-q", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=5",
           "-o", f"ControlPath={control_path()}",
           "-o", f"ControlMaster={'yes' if master else 'no'}"]
    if cluster.ssh_key:
        out += ["-i", cluster.ssh_key, "-o", "IdentitiesOnly=yes"]
    if cluster.known_hosts:
        out += ["-o", f"UserKnownHostsFile={cluster.known_hosts}",
                "-o", "StrictHostKeyChecking=yes"]
    return out


def dest(server: Server) -> str:
    return f"{server.user}@{server.address}"


def start_masters(cluster: Cluster) -> None:
    """Open each remote server's master connection, in the background until
    `stop_masters`. Its stdio is /dev/null: a master that kept a caller's pipe open
    would hang the caller waiting for end of file."""
    CONTROL_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    for s in cluster.servers:
        if s.local:
            continue
        r = subprocess.run([*ssh_base(cluster, master=True), "-o", "ControlPersist=yes",
                            "-f", "-N", dest(s)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        if r.returncode:
            raise MrcemuError(f"cannot reach server {s.name} ({dest(s)}) over ssh: "
                              f"{r.stderr.strip()[-300:] or f'exit {r.returncode}'}")


def stop_masters(cluster: Cluster, timeout: float = 10.0) -> None:
    """Close each server's master connection, and return once its process is gone (a
    caller that looks right after must not find it still exiting)."""
    for s in cluster.servers:
        if s.local:
            continue
        check = subprocess.run([*ssh_base(cluster), "-O", "check", dest(s)],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=30)
        m = re.search(r"pid=(\d+)", check.stderr + check.stdout)
        subprocess.run([*ssh_base(cluster), "-O", "exit", dest(s)],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        if m:
            pid, deadline = int(m[1]), time.monotonic() + timeout
            while state.pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.02)


def agent_command(server: Server) -> list[str]:
    """The agent on a server: the Python mrcemu runs under here, at the same path there
    (a server is installed as this one is)."""
    return [server.python or sys.executable, "-m", "mrcemu.fabric.agent"]


def exec_argv(servers: Servers, server: Server, cmd: list[str], tty: bool = False) -> list[str]:
    """`cmd` as run on `server`: itself here; over its shared connection elsewhere (with a
    terminal when ours is one, so an interactive command behaves)."""
    if server.local:
        return cmd
    assert servers.cluster is not None
    return [*ssh_base(servers.cluster), *(["-t"] if tty else []), dest(server),
            shlex.join(cmd)]


_RUNNING: dict[str, Any] = {}
_RUNNING_LOCK = threading.Lock()


def of_running(st: Any) -> Servers:
    """The servers of the running fabric `st` (its state), one object a process for the
    fabric's life: its agent sessions are shared by every caller here, and closed when
    another fabric's state is asked for."""
    key = (st.manager_pid, st.cluster, tuple(sorted(st.placement.items())))
    with _RUNNING_LOCK:
        if _RUNNING.get("key") != key:
            old = _RUNNING.get("servers")
            if old is not None:
                old.close()
            _RUNNING.update(key=key, servers=Servers.of_state(st))
        return _RUNNING["servers"]


def split_servers() -> Servers | None:
    """The running fabric's servers when it is split: their agents relay requests to the
    NIC daemons there (`nic/control.Relay`) and probe their hosts for `check` and
    Clustermapper. None when the fabric is on this machine alone."""
    st = state.load_state()
    return of_running(st) if st is not None and st.cluster else None


class Channel:
    """One long-lived agent session on a remote server: requests go one at a time (a
    lock), each a JSON line in and a JSON line out. When this process ends, ssh's stdin
    closes and the agent there ends with it."""

    def __init__(self, cluster: Cluster, server: Server) -> None:
        self.server = server
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.cmd = [*ssh_base(cluster), dest(server), shlex.join(agent_command(server))]

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            # its errors into a file, not a pipe nobody reads while it works
            self.err = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.err, bufsize=0)
            self.buf = b""
        return self.proc

    def ask(self, request: dict, timeout: float) -> dict:
        name, op = self.server.name, request["op"]
        with self.lock:
            p = self._start()
            assert p.stdin is not None and p.stdout is not None
            try:
                p.stdin.write(json.dumps(request).encode() + b"\n")
            except OSError:
                pass  # the session is gone: reported below with its error output
            deadline = time.monotonic() + timeout
            while b"\n" not in self.buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.close(kill=True)  # a stuck agent: its session ends with ssh
                    raise MrcemuError(f"server {name}: {op} took over {timeout:g} s")
                ready, _, _ = select.select([p.stdout], [], [], left)
                chunk = os.read(p.stdout.fileno(), 1 << 20) if ready else b""
                if ready and not chunk:
                    err = self._error_text()
                    self.close()
                    raise MrcemuError(f"server {name}: the agent gave no answer to {op} "
                                      f"(exit {p.poll()}): {err}")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise MrcemuError(f"server {name}: the agent's answer to {op} is not JSON: "
                              f"{line[:200]!r}")
        return answer

    def _error_text(self) -> str:
        p = self.proc
        if p is None:
            return ""
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.err.seek(0)
        return self.err.read().decode(errors="replace").strip()[-300:]

    def close(self, kill: bool = False) -> None:
        """End the session: the agent ends at its end of input (or at once: `kill`)."""
        p, self.proc = self.proc, None
        if p is None:
            return
        if kill:
            p.kill()
        for f in (p.stdin, p.stdout, self.err):
            if f is not None:
                f.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Servers:
    """The servers of a fabric, each node's, and a call to each one's agent."""

    def __init__(self, cluster: Cluster | None = None,
                 placement: dict[str, str] | None = None) -> None:
        self.cluster = cluster
        self.placement = placement or {}
        # One agent session a remote server, opened at its first call and kept: a call
        # is then one JSON line each way over the shared connection, not an ssh session
        # and a Python start (a NIC request relayed there takes milliseconds).
        self._channels: dict[str, Channel] = {}
        self._lock = threading.Lock()

    @classmethod
    def of_state(cls, st: Any) -> Servers:
        """A running fabric's, from its state (`fabric/state.py`)."""
        if not st.cluster:
            return cls()
        from mrcemu.topology.cluster import load

        return cls(load(st.cluster), st.placement)

    def all(self) -> list[Server]:
        return list(self.cluster.servers) if self.cluster else [Server(THIS, "localhost")]

    def of(self, node: str) -> Server:
        if not self.cluster:
            return self.all()[0]
        return self.cluster.server(self.placement[node])

    def group(self, nodes: Iterable[str]) -> dict[Server, list[str]]:
        """The nodes given, by the server that owns each, in the order given."""
        out: dict[Server, list[str]] = {}
        for n in nodes:
            out.setdefault(self.of(n), []).append(n)
        return out

    def hosts_by_server(self, n: int) -> tuple[list[int], dict[Server, list[int]]]:
        """Hosts 0..n-1 split into this machine's and each other server's (by number):
        what a prober runs here and what it asks each other server's agent to run."""
        here: list[int] = []
        there: dict[Server, list[int]] = {}
        for srv, names in self.group(f"h{h}" for h in range(n)).items():
            hosts = [int(name[1:]) for name in names]
            if srv.local:
                here += hosts
            else:
                there[srv] = hosts
        return here, there

    def call(self, server: Server, op: str, within: float = TIMEOUT, **args: Any) -> Any:
        """Run one agent op on a server; its result, or an error naming the server."""
        request = {"op": op, "args": args}
        if server.local:
            answer = agent.handle(request)
        else:
            answer = self._channel(server).ask(request, within)
        if not answer.get("ok"):
            raise MrcemuError(f"server {server.name}: {op}: {answer.get('error')}")
        return answer.get("result")

    def _channel(self, server: Server) -> Channel:
        with self._lock:
            ch = self._channels.get(server.name)
            if ch is None:
                assert self.cluster is not None
                ch = self._channels[server.name] = Channel(self.cluster, server)
            return ch

    def close(self) -> None:
        """End every agent session this object opened (they end with this process too)."""
        with self._lock:
            for ch in self._channels.values():
                ch.close()
            self._channels.clear()

    # -- the NIC side's relay (nic/control.Relay): daemons on other servers are asked
    # through their server's agent, one batch a server --

    def via(self, host: str) -> Server | None:
        server = self.of(host)
        return None if server.local else server

    def relay(self, via: Server, batches: dict[str, list[dict]], timeout: float
              ) -> dict[str, dict]:
        replies = self.call(via, "nic", within=timeout + RELAY_SLACK, batches=batches,
                            timeout=timeout)
        return {h: r if r.get("ok") else {**r, "error": f"server {via.name}: {r['error']}"}
                for h, r in replies.items()}

    def fetch(self, server: Server, path: str, to: Path) -> None:
        """Move a file the server wrote (a capture) here: copied over the shared
        connection, then removed there."""
        assert self.cluster is not None and not server.local
        there = f"{shlex.join(['cat', path])} && {shlex.join(['rm', '-f', path])}"
        with open(to, "wb") as f:
            r = subprocess.run([*ssh_base(self.cluster), dest(server), there],
                               stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.PIPE,
                               timeout=TIMEOUT)
        if r.returncode:
            raise MrcemuError(f"server {server.name}: cannot fetch {path}: "
                              f"{r.stderr.decode(errors='replace').strip()[-300:]}")

    def kernel_drops(self, nodes: dict[str, int]) -> dict[str, dict[str, int]]:
        """The kernel's drops at every interface of these nodes (name -> PID), each asked
        of the server the node is on, merged by port name (unique in a fabric)."""
        out: dict[str, dict[str, int]] = {}
        for server, names in self.group(nodes).items():
            out.update(self.call(server, "kernel_drops", nodes={n: nodes[n] for n in names}))
        return out

    def counters(self) -> dict[str, Any]:
        """Every server's switch counters, configs and path losses, merged: port MACs
        are unique across the fabric, so no server's entry hides another's."""
        out: dict[str, Any] = {"state": {}, "config": {}, "path_loss": []}
        for s in self.all():
            part = self.call(s, "counters")
            out["state"].update(part["state"])
            out["config"].update(part["config"])
            out["path_loss"] += part["path_loss"]
        return out
