"""Reading a user's YAML file (topology or scenario): a bare name means a built-in one,
and an unreadable file or bad YAML is a ConfigError naming the file, never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mrcemu.errors import ConfigError


def read(path: str | Path, builtin_dir: Path, what: str) -> tuple[Any, str, str]:
    """(parsed data, source as the user wrote it, the file's stem)."""
    p = Path(path)
    if not p.exists() and not p.suffix and (builtin_dir / f"{p.name}.yaml").exists():
        p = builtin_dir / f"{p.name}.yaml"
    source = str(path)
    try:
        text = p.read_text()
    except OSError as e:
        known = ", ".join(sorted(x.stem for x in builtin_dir.glob("*.yaml")))
        raise ConfigError(source, "<file>", str(path), f"cannot be read ({e.strerror})",
                          f"give a path to a {what} YAML file, or one of: {known}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "the file"
        why = getattr(e, "problem", e)
        raise ConfigError(source, "<yaml>", where, f"is not valid YAML ({why})",
                          "fix the YAML syntax at that line") from None
    return data, source, p.stem
