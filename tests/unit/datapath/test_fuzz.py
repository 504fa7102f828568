"""The compiled parser and responder under libFuzzer with AddressSanitizer and UBSan: a
million inputs, no crash, no leak, no read outside the packet, no write outside the
memory region (the harness is mrcemu/datapath/fuzz.c; the runs: fuzzing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.datapath.fuzzing import MILLION, PLANTED

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
