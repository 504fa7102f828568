"""scripts/bench.py: a small runner over one module per section, whose titles are the
generated BENCHMARKS.md's sections, in order."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))


def test_each_section_is_a_module_and_their_titles_are_benchmarks_md_s_in_order():
    from benchmarks import SECTIONS

    mods = [importlib.import_module(f"benchmarks.{n}") for n in SECTIONS]
    assert all(callable(m.run) for m in mods)
    titles = [m.TITLE for m in mods]
    assert len(set(titles)) == len(titles)
    headings = re.findall(r"^## (.+)$", (ROOT / "BENCHMARKS.md").read_text(), re.M)
    assert headings == ["Targets", *titles]


def test_only_selects_sections_by_title_and_keeps_the_others_as_measured(tmp_path):
    # No title has this text: the runner runs nothing, and every section keeps what it
    # had, with when and at which commit it was measured.
    out, results = tmp_path / "b.md", tmp_path / "b.json"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench.py"), "--only",
                        "no such section", "--out", str(out), "--json", str(results)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(results.read_text()) == json.loads((ROOT / "BENCHMARKS.json").read_text())
    assert out.read_text() == (ROOT / "BENCHMARKS.md").read_text()


def test_only_takes_module_names_exactly_and_words_of_titles():
    import bench

    assert bench._chosen("failover", "failover", "Failover: MRC against RoCE")
    assert not bench._chosen("failover", "program_failover", "An RDMA program through a "
                             "spine failure")
    assert bench._chosen("wire_codec,bpf_cost", "bpf_cost", "Switch: per-packet cost")
    assert bench._chosen("scapy", "wire_codec", "Wire codec: fast struct path against Scapy")
