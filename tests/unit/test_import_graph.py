"""The house rules, enforced: no import runs back up.

The pure model (topology, wire, transport) touches no Linux module of ours and no
library that does; the Linux shell (fabric, nic) never imports what drives it
(scenario, the CLI, capture); a NIC never imports the fabric that starts it. Every
import counts, including those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "mrcemu"
SHELL = ("mrcemu.fabric", "mrcemu.nic", "mrcemu.scenario", "mrcemu.cli", "mrcemu.capture")
LINUX_LIBS = ("pyroute2", "mininet", "subprocess", "select", "fcntl")

RULES: dict[str, tuple[str, ...]] = {
    "topology": SHELL + LINUX_LIBS + ("time",),  # and no clock
    "wire": SHELL + LINUX_LIBS,
    "transport": SHELL + LINUX_LIBS + ("time",),
    "datapath": SHELL + LINUX_LIBS + ("time", "mrcemu.transport"),
    "fabric": ("mrcemu.scenario", "mrcemu.cli", "mrcemu.capture", "mrcemu.faults"),
    "nic": ("mrcemu.fabric", "mrcemu.scenario", "mrcemu.cli", "mrcemu.capture", "mrcemu.faults"),
    "paper": ("mrcemu.cli",),  # runs scenarios through mrcemu.scenario, as `run` does
}


def imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
            # `from mrcemu import faults` names a module too
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def banned(name: str, rules: tuple[str, ...]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in rules)


@pytest.mark.parametrize("package", sorted(RULES))
def test_no_import_runs_back_up(package):
    files = sorted((PKG / package).rglob("*.py"))
    assert files
    bad = [f"{f.relative_to(PKG.parent)}:{line} imports {name}"
           for f in files for line, name in imports(f) if banned(name, RULES[package])]
    assert bad == []


def test_the_rules_catch_a_back_arrow(tmp_path):
    # The checker itself: a lazy import inside a function is still an arrow.
    f = tmp_path / "x.py"
    f.write_text("def g():\n    from mrcemu.fabric import state\n    import subprocess\n")
    names = [n for _, n in imports(f)]
    assert banned("mrcemu.fabric.state", RULES["nic"]) and "mrcemu.fabric" in names
    assert any(banned(n, RULES["transport"]) for n in names)


def test_the_two_transports_share_a_base_not_each_other():
    for a, b in (("roce", "mrc"), ("mrc", "roce")):
        names = [n for _, n in imports(PKG / "transport" / f"{a}.py")]
        assert f"mrcemu.transport.{b}" not in names
        assert "mrcemu.transport.base" in names
