"""Answers about this kernel that hold until the next boot (what it can run), kept in the
run directory: a tmpfs, and the boot's id is checked as well."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def per_boot(path: Path, keys: tuple[str, ...], compute: Callable[[], dict],
             refresh: bool = False) -> dict:
    """`compute()`'s answer, computed once per boot: read from `path` while it holds this
    boot's answer with every one of `keys`, else computed and written there."""
    boot = boot_id()
    if not refresh:
        try:
            cached = json.loads(path.read_text())
            if cached.get("boot_id") == boot and set(keys) <= set(cached["found"]):
                return {k: cached["found"][k] for k in keys}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    got = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"boot_id": boot, "found": got}))
    tmp.replace(path)
    return got
