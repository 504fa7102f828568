"""Reading a user's YAML file (topology or scenario): a bare name means a built-in one,
and an unreadable file or bad YAML is a ConfigError naming the file, never a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from mrcemu.errors import ConfigError


def read(path: str | Path, builtin_dir: Path | None, what: str) -> tuple[Any, str, str]:
    """(parsed data, source as the user wrote it, the file's stem). `builtin_dir`: where
    the built-in files a bare name means are (None: there are none)."""
    p = Path(path)
    if (builtin_dir is not None and not p.exists() and not p.suffix
            and (builtin_dir / f"{p.name}.yaml").exists()):
        p = builtin_dir / f"{p.name}.yaml"
    source = str(path)
    try:
        text = p.read_text()
    except OSError as e:
        fix = f"give a path to a {what} YAML file"
        if builtin_dir is not None:
            fix += ", or one of: " + ", ".join(sorted(x.stem for x in builtin_dir.glob("*.yaml")))
        raise ConfigError(source, "<file>", str(path), f"cannot be read ({e.strerror})",
                          fix) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "the file"
        why = getattr(e, "problem", e)
        raise ConfigError(source, "<yaml>", where, f"is not valid YAML ({why})",
                          "fix the YAML syntax at that line") from None
    return data, source, p.stem


def refuse_unknown(source: str, where: str, data: dict, known: Iterable[str]) -> None:
    """A ConfigError for the first key of `data` not in `known`, at `where` + key: the
    closest known one if there is one, and every known one."""
    known = list(known)
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            fix = (f"did you mean '{close[0]}'? " if close else "remove it; ") + (
                "known fields are " + ", ".join(known))
            raise ConfigError(source, f"{where}{key}", data[key], "unknown field", fix)


def fields(source: str, where: str, data: Any, known: Iterable[str], fix: str) -> dict:
    """`data` as a mapping of known fields at `where` (e.g. `faults[2]`): a ConfigError
    that it must be a mapping (with `fix`), or naming its first unknown field."""
    if not isinstance(data, dict):
        raise ConfigError(source, where, data, "must be a mapping", fix)
    refuse_unknown(source, f"{where}.", data, known)
    return data
