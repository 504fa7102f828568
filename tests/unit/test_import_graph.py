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
    "fabric": ("mrcemu.scenario", "mrcemu.cli", "mrcemu.capture", "mrcemu.faults",
               "mrcemu.study"),
    "nic": ("mrcemu.fabric", "mrcemu.scenario", "mrcemu.cli", "mrcemu.capture", "mrcemu.faults",
            "mrcemu.study"),
    "study": ("mrcemu.cli", "mrcemu.paper"),  # runs what it needs itself, as paper does
    "paper": ("mrcemu.cli",),  # runs scenarios through mrcemu.scenario, as `run` does
    # pure, with no clock: it draws its permutations as the scenario's workloads do
    # (scenario/patterns.py, itself pure), and runs nothing
    "atscale": tuple(m for m in SHELL if m != "mrcemu.scenario") + LINUX_LIBS + (
        "time", "mrcemu.study", "mrcemu.paper", "mrcemu.scenario.job",
        "mrcemu.scenario.runner"),
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


def module_graph() -> dict[str, set[str]]:
    """Every module of the package and the package modules it imports. `from a import b`
    names module a.b when b is one, else a itself (its __init__)."""
    mods = {".".join(f.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__"): f
            for f in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for m, f in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                subs = [f"{node.module}.{a.name}" for a in node.names]
                deps |= {n for n in subs if n in mods}
                if node.module in mods and not all(n in mods for n in subs):
                    deps.add(node.module)
        graph[m] = deps - {m}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): each is a
    circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# The per-server helper runs ops on its own server's nodes with the low-level modules
# (program, netns, netlink, bpf, sweep, state); the orchestration that calls it on every
# server never runs the other way.
ORCHESTRATION = tuple(f"mrcemu.fabric.{m}" for m in (
    "build", "clean", "inject", "servers", "launch", "manager", "remote", "cluster_local",
    "attach", "check", "mapper", "children"))


def test_no_circle_of_imports_anywhere_in_the_package():
    assert circles(module_graph()) == []


def test_the_agent_uses_low_level_modules_never_the_orchestration():
    names = [n for _, n in imports(PKG / "fabric" / "agent.py")]
    assert [n for n in names if banned(n, ORCHESTRATION)] == []


def test_the_circle_check_catches_an_arrow_back_from_the_agent_to_build():
    # What the two rules above are for: `build` reaches the agent (through `servers`),
    # so one import of `build` in the agent closes a circle, and both rules see it.
    graph = module_graph()
    assert "mrcemu.fabric.agent" in graph["mrcemu.fabric.servers"]
    graph["mrcemu.fabric.agent"] = graph["mrcemu.fabric.agent"] | {"mrcemu.fabric.build"}
    (circle,) = circles(graph)
    assert {"mrcemu.fabric.agent", "mrcemu.fabric.build", "mrcemu.fabric.servers"} <= set(
        circle)
    assert banned("mrcemu.fabric.build", ORCHESTRATION)


def test_the_two_transports_share_a_base_not_each_other():
    for a, b in (("roce", "mrc"), ("mrc", "roce")):
        names = [n for _, n in imports(PKG / "transport" / f"{a}.py")]
        assert f"mrcemu.transport.{b}" not in names
        assert "mrcemu.transport.base" in names


def c_graph() -> dict[str, set[str]]:
    """The compiled data path's files as units (a .c with its .h, by name) and the units
    each includes."""
    import re

    src = PKG / "datapath"
    units = {f.stem for f in src.iterdir() if f.suffix in (".c", ".h")}
    graph: dict[str, set[str]] = {u: set() for u in units}
    for f in src.iterdir():
        if f.suffix in (".c", ".h"):
            for name in re.findall(r'^#include "([^"]+)\.h"', f.read_text(), re.M):
                if name in units and name != f.stem:
                    graph[f.stem].add(name)
    return graph


def declared_elsewhere() -> list[str]:
    """Functions and type objects a data path header declares but its own .c does not
    define: an arrow hidden from the includes (a header of one unit whose code lives in
    another, as responder_type.h's once lived in _datapath.c)."""
    import re

    src = PKG / "datapath"
    out = []
    for h in sorted(src.glob("*.h")):
        c = h.with_suffix(".c")
        text = re.sub(r"/\*.*?\*/", "", h.read_text(), flags=re.S)
        names = re.findall(r"^(?!static|typedef|#)[A-Za-z_][\w \*]*?\b(\w+)\((?:[^;{]*)\);",
                           text, re.M)
        for decl in re.findall(r"^extern PyTypeObject ([^;]+);", text, re.M):
            names += [n.strip() for n in decl.split(",")]
        if not names:
            continue
        body = c.read_text() if c.exists() else ""
        out += [f"{h.name}: {n}" for n in names
                if not re.search(rf"^[^\s/#].*\b{n}\b(\(| =)(?!.*;\s*$)", body, re.M)]
    return out


def test_the_data_path_types_sit_on_shared_c_code_not_on_each_other():
    # The module (_datapath.c) sits on the types, the types on shared code (pyshared,
    # ports_ref) and the plain C beneath: arrows one way, no circle.
    graph = c_graph()
    assert circles(graph) == []
    assert declared_elsewhere() == []
    assert {"pyshared", "ports_ref"} <= graph["sender_type"] | graph["roce_type"]
    for t in ("sender_type", "roce_type", "responder_type", "nscc_type"):
        assert "ports_type" not in graph[t] and "_datapath" not in graph[t]
    # And the check sees an arrow back: a type that includes the module's file.
    graph["sender_type"].add("ports_type")
    assert circles(graph) == [["ports_type", "sender_type"]]
