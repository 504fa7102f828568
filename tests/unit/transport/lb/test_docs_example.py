"""docs/load-balancing.md's worked example, as a researcher adds it: the page's code
block saved as one module in mrcemu/transport/lb/, found by name, driven with explicit
`now`, and run over the simulated network."""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
from pathlib import Path

import pytest

from mrcemu.transport import lb
from mrcemu.transport.config import TransportConfig
from tests.unit.transport.helpers import pair, write
from tests.unit.transport.lb.helpers import plane_evs, profile_with

DOC = Path(__file__).resolve().parents[4] / "docs" / "load-balancing.md"
MODULE = Path(lb.__file__).parent / "least_marked.py"


def example() -> str:
    m = re.search(r"<!-- lb-example -->\s*```python\n(.*?)```", DOC.read_text(), re.S)
    assert m, "docs/load-balancing.md lost its lb-example block"
    return m[1]


@pytest.fixture
def saved():
    assert not MODULE.exists(), f"{MODULE} is in the way"
    MODULE.write_text(example())
    try:
        yield lb.discover()
    finally:
        MODULE.unlink()
        sys.modules.pop("mrcemu.transport.lb.least_marked", None)
        importlib.invalidate_caches()
        lb.discover()
    assert "least-marked" not in lb.POLICIES


def test_the_worked_example_is_found_by_name_and_does_what_the_page_says(saved):
    assert list(saved) == ["mrc", "oblivious", "reps", "reps_ack", "bitmap",
                           "least-marked"]
    assert TransportConfig(load_balancing="least-marked").load_balancing == "least-marked"
    prof = profile_with("least-marked")
    pol, usable = prof.policy, plane_evs(prof, 3)
    assert type(pol).__name__ == "LeastMarked" and len(usable) == 4
    assert sorted(pol.choose(3, usable, 1.0)) == sorted(e.ev for e in usable)
    hot, warm = usable[2], usable[0]
    pol.hear(hot, lb.Feedback.ECN, 1.1, count=4)
    pol.hear(warm, lb.Feedback.TRIM, 1.1)
    pol.hear(usable[1], lb.Feedback.ACK, 1.1)  # not a mark
    # the most marked left out, the other marked one last; then the marks fade
    first = pol.choose(3, usable, 1.2)
    assert hot.ev not in first and first[-1] == warm.ev and len(first) == 3
    rotations = 1
    while hot.ev not in pol.choose(3, usable, 1.2 + rotations):
        rotations += 1
    # halved before each rotation: 2, 1 and 0.5 keep it out, 0.25 lets it back
    assert rotations == 3


def test_the_worked_example_delivers_a_write_in_the_simulated_network(saved):
    net, ca, cb = pair(seed=3, load_balancing="least-marked")
    net.path("h0", 1, 2).ce = 1.0
    data, mr = write(ca, cb, 8 << 20)
    net.run(30.0, stop=lambda: ca.idle)
    assert hashlib.sha256(mr.buf).digest() == hashlib.sha256(data).digest()
    on = {spine: sum(n for ev, n in ca.stats.per_ev.items()
                     if ca.profile.evs[ev].path.plane == 1
                     and ca.profile.evs[ev].path.spine == spine) for spine in range(4)}
    others = [on[s] for s in (0, 1, 3)]
    # the marked path sheds a good part of its quarter; the plane's others share it
    assert on[2] < 0.75 * min(others), on


def test_a_policy_module_that_does_not_import_is_one_line_naming_it(tmp_path):
    import subprocess

    broken = MODULE.with_name("broken_policy.py")
    assert not broken.exists()
    broken.write_text("raise RuntimeError('half written')\n")
    try:
        with pytest.raises(lb.PolicyModuleError, match="broken_policy.py does not import "
                           r"\(RuntimeError: half written\): fix it, or move it out"):
            lb.discover()
        r = subprocess.run([sys.executable, "-m", "mrcemu", "send", "h0", "h1"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert r.returncode == 2 and "broken_policy.py does not import" in r.stderr
        assert "Traceback" not in r.stderr
    finally:
        broken.unlink()
        sys.modules.pop("mrcemu.transport.lb.broken_policy", None)
        importlib.invalidate_caches()
        lb.discover()
    assert list(lb.POLICIES) == ["mrc", "oblivious", "reps", "reps_ack", "bitmap"]
