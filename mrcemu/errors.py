"""Errors the CLI turns into one clear line and an exit code, never a traceback."""

from __future__ import annotations


class MrcemuError(Exception):
    """A failure the user can act on. `exit_code` is what the CLI exits with."""

    exit_code = 1


class ConfigError(MrcemuError):
    """A malformed topology or scenario file: names the file, the field and the fix."""

    exit_code = 2

    def __init__(self, source: str, field: str, value: object, problem: str, fix: str) -> None:
        self.source, self.field, self.value, self.problem, self.fix = (
            source, field, value, problem, fix,
        )
        super().__init__(f"{source}: field '{field}' = {value!r}: {problem}; fix: {fix}")


class NeedsRoot(MrcemuError):
    exit_code = 1

    def __init__(self, what: str) -> None:
        super().__init__(f"'{what}' needs root: run it as 'sudo .venv/bin/mrcemu {what} ...'")


class FabricStateError(MrcemuError):
    """No fabric running, or one already running."""

    exit_code = 1
