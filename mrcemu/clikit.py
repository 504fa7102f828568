"""What every `mrcemu` command shares: the consoles, and errors as one clear line."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from mrcemu.errors import MrcemuError, NeedsRoot

console = Console()
err = Console(stderr=True)


def friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn our errors into `mrcemu: <message>` and the error's exit code."""

    @functools.wraps(fn)
    def wrapper(*a: Any, **kw: Any) -> Any:
        try:
            return fn(*a, **kw)
        except MrcemuError as e:
            err.print(f"[bold red]mrcemu:[/] {e}", highlight=False, soft_wrap=True)
            sys.exit(e.exit_code)

    return wrapper


def need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise NeedsRoot(what)


class SlowdownType(click.ParamType):
    """`--slowdown`: a factor of at least 1, or `auto` (mrcemu/slowdown.py)."""

    name = "K|auto"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float | str:
        if value == "auto" or isinstance(value, float):
            return value
        try:
            k = float(value)
        except ValueError:
            self.fail(f"{value!r} is neither 'auto' nor a number", param, ctx)
        if not k >= 1.0:
            self.fail(f"{value!r} is below 1: a run can be slowed, not sped up", param, ctx)
        return k


SLOWDOWN = SlowdownType()
