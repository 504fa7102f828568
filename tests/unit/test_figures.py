"""scripts/figures.py: every generated region of README.md and docs/ is what its committed
result file gives, a planted wrong figure is named, and the README is a front door."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import figures  # noqa: E402


def test_every_generated_region_is_what_its_source_gives():
    problems = [p for page in figures.pages() for p in
                figures.stale(page.read_text(), str(page.relative_to(ROOT)))]
    assert problems == [], "\n".join(problems) + "\n(run: python scripts/figures.py)"
    names = {m.group(2) for page in figures.pages()
             for m in figures.REGION.finditer(page.read_text())}
    # the README's three, and docs/paper.md's table, at least
    assert {"demo-time", "demo-table", "paper-verdicts", "paper-table"} <= names


def test_a_wrong_figure_planted_in_the_readme_is_named_with_its_line():
    text = (ROOT / "README.md").read_text()
    good = re.search(r"\| RTOs \| (\d+) \|", text)
    assert good, "the demo table's RTOs row"
    planted = text.replace(good.group(0), f"| RTOs | {int(good.group(1)) + 7} |", 1)
    (problem,) = figures.stale(planted, "README.md")
    line = planted[:planted.index(f"| RTOs | {int(good.group(1)) + 7} |")].count("\n") + 1
    assert problem.startswith(f"README.md:{line}: region 'demo-table' differs from "
                              "mrcemu/scenarios/example/report.json")
    assert f"| RTOs | {int(good.group(1)) + 7} |" in problem and good.group(0) in problem


def test_the_check_command_exits_1_on_a_stale_page(tmp_path, monkeypatch):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "figures.py"), "--check"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_benchmarks_md_is_benchmarks_json_rendered_and_says_when_each_was_measured():
    doc = json.loads(figures.BENCH.read_text())
    assert (ROOT / "BENCHMARKS.md").read_text() == figures.bench_markdown(doc)
    for s in doc["sections"]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", s["measured"]["date"]), s["title"]
        assert s["measured"]["commit"], s["title"]


def _prose(text: str) -> str:
    """The README without its generated regions and code blocks."""
    text = figures.REGION.sub("", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # a link's address is no figure
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 200
    assert max(len(x) for x in lines) <= 120
    prose = _prose(text)
    # no target codes, issue numbers or commit hashes: a reader has no key to them
    assert re.findall(r"\bissues? #?\d+\b|\b[BLNRDSPTVG]\d{1,2}\b", prose) == []
    assert re.findall(r"`[0-9a-f]{7,40}`|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7}\b",
                      text) == []
    # every measured figure is in a generated region: no decimal number in the prose
    assert re.findall(r"(?<![\w.-])\d+\.\d+\b", prose) == []  # a version (OCP-MRC-1.0) is none
    # links to what it emulates and compares against
    for url in ("arxiv.org/abs/2605.04333", "opencompute.org", "ultraethernet/uet-htsim",
                "arxiv.org/abs/2407.21625"):
        assert url in text, url


@pytest.mark.parametrize("name", sorted(figures.REGIONS))
def test_each_region_renders_from_its_committed_source(name):
    src, fn = figures.REGIONS[name]
    out = fn(json.loads(src.read_text()) if src else {})
    assert out.strip()


# ---- BENCHMARKS.json and .md ---------------------------------------------------------------
def test_every_section_keeps_its_machine_commit_date_command_and_targets():
    from benchmarks import SECTIONS

    doc = json.loads(figures.BENCH.read_text())
    assert [s["module"] for s in doc["sections"]] == list(SECTIONS)
    for s in doc["sections"]:
        assert set(s["measured"]) >= {"date", "commit", "machine", "command"}, s["module"]
    assert figures.bench_stale(figures.BENCH.read_text()) == []
    targets = [t for s in doc["sections"] for t in s["targets"]]
    assert len(targets) >= 40
    for t in targets:  # the flag is the threshold's verdict on the value
        ok = {"<=": t["value"] <= t["threshold"], ">=": t["value"] >= t["threshold"],
              "~": abs(t["value"] - 1) <= t["threshold"]}[t["op"]]
        assert t["met"] == ok, t


def test_a_wrong_number_planted_in_benchmarks_json_is_named_with_its_line_and_source():
    text = figures.BENCH.read_text()
    doc = json.loads(text)
    (sec,) = [s for s in doc["sections"] if s["module"] == "wire_codec"]
    (target,) = [t for t in sec["targets"] if t["what"].startswith("the compiled codec")]
    good = f"compiled / Python codec** | **{target['text']}**"
    assert good in sec["markdown"]
    planted = text.replace(good, good.replace(target["text"], "38.5"), 1)
    before = figures.bench_stale(text)
    (problem,) = [p for p in figures.bench_stale(planted) if p not in before]
    lines = planted.splitlines()
    what = next(i + 1 for i, x in enumerate(lines) if json.dumps(target["what"]) in x)
    table = next(i + 1 for i, x in enumerate(lines) if "compiled / Python codec** | **38.5" in x)
    assert problem.startswith(f"BENCHMARKS.json:{what}: section 'wire_codec' target "
                              f"{target['what']!r} stores {target['text']}")
    assert f"its table (BENCHMARKS.json:{table}) gives 38.5 (met: True)" in problem


def test_benchmarks_md_has_no_codes_issue_numbers_hashes_or_outside_files():
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert re.findall(r"\b[BDGLNPRSV]\d{1,2}\b", text) == []  # T0, T1: switch tiers
    assert re.findall(r"\b[Ii]ssues? #?\d+|\bthe issue\b", text) == []
    assert re.findall(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text) == []
    assert re.findall(r"DESIGN\.md|PAPER\.md|SCALE\.md|MRC-WIRE\.md|\.\./shared", text) == []
    # each target is shown with its verdict, at a glance and in its section
    doc = json.loads(figures.BENCH.read_text())
    n = sum(len(s["targets"]) for s in doc["sections"])
    assert len(re.findall(r"\| (?:met|\*\*missed\*\*) \|$", text, re.M)) == 2 * n


# ---- prose: every page of docs/ held as the README is ---------------------------------
def _pages_but_history():
    return [p for p in figures.pages() if p.name != "history.md"]


def test_no_page_states_a_decimal_figure_from_no_source():
    problems = [x for p in _pages_but_history()
                for x in figures.unsourced(p.read_text(), str(p.relative_to(ROOT)))]
    assert problems == [], "\n".join(problems)


def test_a_figure_planted_in_the_prose_of_docs_paper_md_is_named_with_line_and_source():
    page = ROOT / "docs" / "paper.md"
    text = page.read_text()
    # a generated figure changed by hand: named with its line and its source
    m = re.search(r"<!-- fig:paper-ecmp-slowdown -->(\d+)<!-- /fig -->", text)
    assert m, "docs/paper.md states `ecmp`'s slowdown from the committed run"
    planted = text.replace(m.group(0), m.group(0).replace(f">{m.group(1)}<", ">32<"), 1)
    line = planted[:m.start()].count("\n") + 1
    (problem,) = figures.stale(planted, "docs/paper.md")
    assert problem == (f"docs/paper.md:{line}: figure 'paper-ecmp-slowdown' differs from "
                       f"mrcemu/paper/example/paper.json: the page has '32', the source "
                       f"gives '{m.group(1)}'")
    # a figure typed into the prose, from no source at all
    anchor = "**E9 and E10, collectives against RoCE.**"
    planted = text.replace(anchor, anchor + " MRC is ahead by 1.35 here.", 1)
    line = planted[:planted.index(anchor)].count("\n") + 1
    (problem,) = figures.unsourced(planted, "docs/paper.md")
    assert problem.startswith(f"docs/paper.md:{line}: '1.35' is a figure from no source")


def test_docs_have_no_codes_issue_numbers_or_outside_files_in_prose():
    for p in _pages_but_history():
        prose = _prose(p.read_text())
        where = str(p.relative_to(ROOT))
        assert re.findall(r"\b[BDGLNPRSVW]\d{1,2}\b", prose) == [], where
        assert re.findall(r"\b[Ii]ssues? #?\d+|\bthe issue\b|\bsketch\b", prose) == [], where
        assert re.findall(r"DESIGN\.md|PAPER\.md|SCALE\.md|MRC-WIRE\.md|\.\./shared",
                          prose) == [], where
        assert re.findall(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b",
                          prose) == [], where


def test_each_inline_figure_renders_from_its_source():
    import inline_figures

    cache: dict = {}
    for name in inline_figures.FIGURES:
        assert inline_figures.value(name, cache).strip(), name


def test_history_is_dated_entry_by_entry():
    text = (ROOT / "docs" / "history.md").read_text()
    heads = re.findall(r"^## (.+)$", text, re.M)
    assert len(heads) > 20
    assert [h for h in heads if not re.search(r"\d{4}-\d\d-\d\d", h)] == []
