"""What a running fabric leaves in /run/mrcemu/: a lock, a state file, a socket.

The state file is rewritten as each node shell starts, so `mrcemu clean` can
find every PID even after a `kill -9` in the middle of `up`.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mrcemu import rundir
from mrcemu.errors import FabricStateError
from mrcemu.topology import Topology
from mrcemu.transport.config import TransportConfig

RUN_DIR = rundir.RUN_DIR
STATE = rundir.STATE
LOCK = rundir.LOCK
SOCKET = rundir.SOCKET
LOG = rundir.MANAGER_LOG


@dataclass
class FabricState:
    topology: str
    manager_pid: int
    phase: str = "starting"  # starting | up | stopping
    nodes: dict[str, int] = field(default_factory=dict)  # node name -> shell PID
    nics: dict[str, int] = field(default_factory=dict)  # host name -> NIC daemon PID
    started_at: float = 0.0
    summary: dict = field(default_factory=dict)
    # The validated topology as it was at `up`: every process of the fabric works from
    # this snapshot, so a file edited while the fabric runs changes nothing.
    topology_snapshot: dict = field(default_factory=dict)
    transport_snapshot: dict = field(default_factory=dict)  # likewise, the TransportConfig
    # Split over servers (`up --cluster`): the cluster file, and each node's server.
    cluster: str | None = None
    placement: dict[str, str] = field(default_factory=dict)

    def topo(self) -> Topology:
        return Topology(**self.topology_snapshot)

    def transport(self) -> TransportConfig:
        return TransportConfig.from_json(self.transport_snapshot)

    def save(self) -> None:
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        tmp = STATE.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(STATE)  # atomic: a reader never sees half a file


def load_state() -> FabricState | None:
    try:
        data = json.loads(STATE.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None
    return FabricState(**data)


def require_state() -> FabricState:
    st = load_state()
    if st is None or not pid_alive(st.manager_pid):
        raise FabricStateError("no fabric is running: start one with 'sudo mrcemu up'")
    if st.phase != "up":
        raise FabricStateError(f"the fabric is {st.phase}, not up: wait, or run 'mrcemu clean'")
    return st


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


class Lock:
    """An flock on /run/mrcemu/lock held for the manager's whole life. A context
    manager: leaving it closes the descriptor (and so drops the lock)."""

    def __init__(self) -> None:
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def acquire(self) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            st = load_state()
            who = f" (manager PID {st.manager_pid}, {st.topology})" if st else ""
            raise FabricStateError(
                f"a fabric is already running{who}: run 'mrcemu down' first") from None

    def held_by_other(self) -> bool:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        return False
