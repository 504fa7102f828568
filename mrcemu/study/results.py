"""A study's results file: one JSON file a study folder, a section a part of the study
(`census`, ...), each written as its part finishes, with when, where and from what
commit it was measured."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from mrcemu.errors import MrcemuError

FILE = "study.json"


class NotAResultsFile(MrcemuError):
    """--out names a folder whose study.json is no results file: bad input, refused."""

    exit_code = 2


class MissingSection(MrcemuError):
    """A part of the study needs another's results, and the file has none: bad input."""

    exit_code = 2


def load(folder: Path) -> dict:
    path = folder / FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise NotAResultsFile(f"{path}: not a study's results file ({e}): move it away, or "
                              "give --out another folder") from e


def write(folder: Path, section: str, result: dict) -> Path:
    """`result` as the file's `section`, the others kept; atomic."""
    from mrcemu.scenario.job import machine, source_commit

    folder.mkdir(parents=True, exist_ok=True)
    doc = load(folder)
    doc[section] = {**result, "measured": datetime.datetime.now().isoformat(timespec="seconds"),
                    "machine": machine(), "commit": source_commit()}
    path = folder / FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)
    return path
