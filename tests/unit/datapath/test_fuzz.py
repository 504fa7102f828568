"""The compiled parser and responder under libFuzzer with AddressSanitizer and UBSan (and
the event loop under both, driven from Python: scripts/fuzz_loop.py): a
million inputs, no crash, no leak, no read outside the packet, no write outside the
memory region (the harness is mrcemu/datapath/fuzz.c; the runs: fuzzing.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.datapath.fuzzing import LOOP, LOOP_INPUTS, MILLION, PLANTED

# The runs themselves (the fixture `fuzz_runs`) are started by tests/unit/conftest.py with
# the first unit test, and tests marked so run last.
pytestmark = pytest.mark.fuzz


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


def test_the_event_loop_takes_hostile_frames_on_both_ends_under_the_sanitizers(fuzz_runs):
    # scripts/fuzz_loop.py: the data path built with ASan and UBSan, an armed MRC pair's
    # loops fed mutants of a real write's frames; a memory error aborts the run.
    code, out, err, _ = _result(fuzz_runs, LOOP)
    assert code == 0, err[-3000:]
    r = json.loads(out.splitlines()[-1])
    assert r["inputs"] == LOOP_INPUTS, r
    # the mutants reached both ends: refused there (counted by the daemon's reasons),
    # and the valid frames among them placed and acknowledged
    for end in ("sender_end", "receiver_end"):
        assert sum(r["refused"][end].values()) > 0, r
    assert r["rx_data"] > 0 and r["sacks_rx"] > 0 and r["rx_bytes_placed"] > 0, r
