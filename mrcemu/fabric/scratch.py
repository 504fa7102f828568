"""A probe's child in a network and mount namespace of its own: whatever it makes there
(interfaces, routes, qdiscs, nftables, a bpffs and its pins) goes with it, even after
kill -9, and nothing of it is seen outside."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BPFFS = Path("/sys/fs/bpf")


def run(module: str, keys: tuple[str, ...], timeout: float = 120) -> dict[str, str | None]:
    """`python -m module` in the scratch namespaces; its last line of output, a JSON
    object with every one of `keys`. Where the child cannot run or answer, every key
    gets the reason."""
    argv = ["unshare", "--net", "--mount", "--propagation", "private", sys.executable,
            "-m", module]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return dict.fromkeys(keys, f"the probe could not run ({e})")
    try:
        out = json.loads(r.stdout.strip().splitlines()[-1])
        return {k: out[k] for k in keys}
    except (ValueError, IndexError, KeyError, TypeError):
        return dict.fromkeys(keys, f"the probe failed: {(r.stderr or r.stdout).strip()[-300:]}")


def bpffs() -> Path:
    """A fresh bpffs over /sys/fs/bpf, for the child alone (its mount namespace is
    private): pins made there go with the child."""
    subprocess.run(["mount", "-t", "bpf", "bpf", str(BPFFS)], check=True,
                   capture_output=True, text=True)
    return BPFFS
