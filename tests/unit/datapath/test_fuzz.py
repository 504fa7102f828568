"""The compiled parser and responder under libFuzzer with AddressSanitizer and UBSan: a
million inputs, no crash, no leak, no read outside the packet, no write outside the
memory region (the harness is mrcemu/datapath/fuzz.c)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "fuzz.py"


PLANTED = {
    # A parser that reads one byte past the packet, for a packet of the seeds' shape.
    "overread": ("wire.c", "--wire-c", "\tif (be16(udp + 4) != plen)",
                 "\tif (mlen > 60 && m[mlen - 1] == 0x5A) o->hlim = m[mlen];\n"
                 "\tif (be16(udp + 4) != plen)", 2_000_000),
    # A responder whose VA bound lets a payload end one byte past its region: the
    # harness's region is a heap block of exactly its size.
    "write_past_region": ("responder.c", "--responder-c", "plen > mr->len - (va - mr->base)",
                          "plen > mr->len + 1 - (va - mr->base)", 4_000_000),
}


MILLION = "million"


@pytest.fixture(scope="module")
def fuzz_runs(tmp_path_factory) -> Iterator[dict[str, tuple[subprocess.Popen, Path]]]:
    """The module's three fuzzer runs, started together: each is a build and a run of its
    own (a subprocess, one core at most), so on 2 cores they take about half their sum.
    Each test waits for its own; no verdict depends on how fast they ran."""
    runs: dict[str, tuple[subprocess.Popen, Path]] = {}

    def start(key: str, *args: str) -> Path:
        work = tmp_path_factory.mktemp(f"fuzz-{key}")
        # Into files, not pipes: a run no test is reading yet must never block on one.
        with open(work / "out", "w") as out, open(work / "err", "w") as err:
            runs[key] = (subprocess.Popen([sys.executable, str(SCRIPT), "--workdir",
                                           str(work / "w"), *args], stdout=out, stderr=err),
                         work)
        return work

    try:
        # A new seed each run, guided by coverage alone: value profiling (what the
        # planted bugs below need, to reach an exact bound from a fixed seed; `make fuzz`
        # keeps it) would take ~130 s for the million here instead of ~50.
        start(MILLION, "--runs", "1000000", "--no-value-profile")
        for bug, (name, option, old, new, n) in sorted(PLANTED.items()):
            # With libFuzzer's seed fixed the inputs are the same every run, so the
            # verdict is too (the million-input run keeps drawing a new seed). A fixed
            # seed still walks another path whenever the harness's code changes: without
            # value profiling (scripts/fuzz.py), a change to the sender alone left seed 1
            # four million inputs short of the planted write; with it, seeds 1-4 each
            # reach it in 11-80 s here.
            src = (SCRIPT.parents[1] / "mrcemu" / "datapath" / name).read_text()
            planted = src.replace(old, new, 1)
            assert planted != src, bug
            bad = tmp_path_factory.mktemp(f"planted-{bug}") / name
            bad.write_text(planted)
            start(bug, "--runs", str(n), option, str(bad), "--seed", "1")
        yield runs
    finally:
        for proc, _ in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _result(fuzz_runs: dict, key: str) -> tuple[int, str, str, Path]:
    proc, work = fuzz_runs[key]
    proc.wait(timeout=900)
    return (proc.returncode, (work / "out").read_text(), (work / "err").read_text(),
            work / "w")


def test_a_million_hostile_inputs_find_nothing(fuzz_runs):
    code, out, err, work = _result(fuzz_runs, MILLION)
    assert code == 0, err
    assert "1,000,000 inputs" in out and "no crash" in out
    assert not list(work.glob("crash-*")) and not list(work.glob("leak-*"))


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_the_harness_catches_a_planted_bug(fuzz_runs, bug):
    # The fuzzer is only evidence if it can fail.
    code, _, err, _ = _result(fuzz_runs, bug)
    assert code == 1, err[-2000:]
    assert "heap-buffer-overflow" in err
