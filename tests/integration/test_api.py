"""The Python API as a user scripts it: the README's example as written, teardown on an
error inside `with`, the seed reaching every NIC daemon, attach leaving the fabric up."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mrcemu import Fabric
from mrcemu.fabric import state
from mrcemu.fabric.clean import clean
from mrcemu.nic.control import request
from tests.integration.conftest import assert_clean, mrcemu

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    text = README.read_text()
    m = re.search(r"<!-- api-example[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert m, "README.md lost its api-example block"
    return m[1]


@pytest.fixture
def tidy():
    clean()
    yield
    clean()


def test_readme_example_runs_as_written_and_leaves_nothing(tmp_path, tidy):
    script = tmp_path / "example.py"
    script.write_text(readme_example())
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert re.search(r"Mb/s over [1-9]\d* paths", r.stdout), r.stdout
    assert_clean()


def test_an_error_inside_with_still_tears_down_and_the_seed_reaches_the_daemons(tidy):
    seeds: list[int] = []
    with pytest.raises(RuntimeError, match="inside the block"):
        with Fabric.up("small", seed=7) as fab:
            seeds = [request(f"h{i}", "ping")["transport"]["seed"]
                     for i in range(fab.topology.hosts)]
            raise RuntimeError("inside the block")
    assert seeds == [7, 7, 7, 7]
    assert_clean()


def test_attach_leaves_a_cli_fabric_running(tidy):
    r = mrcemu("up", "small", "--seed", "3")
    assert r.returncode == 0, r.stderr
    with Fabric.attach() as fab:
        res = fab.send("h1", "h2", size="256KiB")
        assert res.completed and res.intact and res.size == 256 * 1024
    assert state.STATE.exists()  # attach does not own the fabric
    assert request("h0", "ping")["transport"]["seed"] == 3
    assert mrcemu("down").returncode == 0
    assert_clean()


def test_a_bad_host_is_one_clear_error(tidy):
    r = mrcemu("up", "small")
    assert r.returncode == 0, r.stderr
    from mrcemu.errors import MrcemuError

    with Fabric.attach() as fab, pytest.raises(MrcemuError, match=r"h0\.\.h3"):
        fab.send("h0", "h9")
    mrcemu("down")
    assert_clean()
