#!/usr/bin/env python3
"""Put a newer `mrcemu paper ID...` run's rows into the committed full run.

    sudo .venv/bin/mrcemu paper E6 --out /tmp/e6
    .venv/bin/python scripts/paper_rows.py /tmp/e6     # then: make figures

Each experiment the newer run holds replaces its row in mrcemu/paper/example/paper.json
(and paper.md), the row saying when and at which commit it was measured again; the
rest of the committed run is unchanged. A full run takes over an hour here; one
experiment's fix is measured again in minutes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mrcemu.errors import MrcemuError  # noqa: E402
from mrcemu.paper.run import markdown, with_rows  # noqa: E402

EXAMPLE = ROOT / "mrcemu" / "paper" / "example"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / "paper.json").is_file():
        print("usage: paper_rows.py DIR  (DIR: a `mrcemu paper --out DIR` folder with "
              "paper.json)", file=sys.stderr)
        return 2
    newer = json.loads((Path(argv[0]) / "paper.json").read_text())
    doc = json.loads((EXAMPLE / "paper.json").read_text())
    try:
        doc = with_rows(doc, newer)
    except MrcemuError as e:
        print(f"paper_rows.py: {argv[0]}/paper.json: {e}", file=sys.stderr)
        return 2
    (EXAMPLE / "paper.json").write_text(json.dumps(doc, indent=1, default=str))
    (EXAMPLE / "paper.md").write_text(markdown(doc))
    print("replaced " + ", ".join(r["id"] for r in newer["experiments"])
          + " in mrcemu/paper/example; now run `make figures`")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
