"""Where a running fabric keeps its files: one place for every process to find them.

Only paths: the fabric manager, the NIC daemons, fault injection and the CLI all
meet here without importing one another.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

RUN_DIR = Path(os.environ.get("MRCEMU_RUN_DIR", "/run/mrcemu"))
LOGS = RUN_DIR / "logs"
STATE = RUN_DIR / "state.json"
LOCK = RUN_DIR / "lock"
SOCKET = RUN_DIR / "manager.sock"
MANAGER_LOG = RUN_DIR / "manager.log"
# what a packet through each topology's fabric cost here, for `--slowdown auto`: a
# tmpfs, so a reboot (perhaps onto other hardware) measures again
CALIBRATION = RUN_DIR / "calibration.json"
CHILDREN = RUN_DIR / "children.json"  # helper processes `down` and `clean` must end
FAULTS = RUN_DIR / "faults.json"  # the active faults
# The node shells (PIDs) that ever had fault drop rules: the nodes with drop counters.
NFT_NODES = RUN_DIR / "nft-nodes"
FAULT_LOG = LOGS / "faults.jsonl"
# The cluster file of the last fabric split over servers: `clean` cleans its servers.
LAST_CLUSTER = RUN_DIR / "cluster-last"
REMOTE_CAPTURES = RUN_DIR / "capture"  # where another server's dumpcap writes, there
SSH_CONTROL = RUN_DIR / "ssh"  # each server's shared ssh connection (fabric/servers.py)


def nic_socket(host: str) -> Path:
    return RUN_DIR / f"nic-{host}.sock"


def nic_log(host: str) -> Path:
    return LOGS / f"nic-{host}.jsonl"


def ssh_control_path() -> str:
    """OpenSSH's ControlPath of each server's shared connection (%C: a hash of the host)."""
    return str(SSH_CONTROL / "%C")


def rotate_logs() -> None:
    """A new fabric's logs start empty; the last fabric's are kept beside them, as
    `logs.prev/` and `manager.log.prev`, and the one before that is gone. The run
    directory is a tmpfs: logs kept for every fabric since boot grew without bound in
    memory, and every reader of a whole log slowed with them."""
    prev = LOGS.with_name(LOGS.name + ".prev")
    shutil.rmtree(prev, ignore_errors=True)
    if LOGS.exists():
        LOGS.rename(prev)
    if MANAGER_LOG.exists():
        MANAGER_LOG.replace(MANAGER_LOG.with_name(MANAGER_LOG.name + ".prev"))
