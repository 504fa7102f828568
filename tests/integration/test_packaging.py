"""A non-editable install (`pip install .`) works on its own: the built-in topologies,
the compiled switch program and the verbs shim ship inside the package."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from mrcemu.fabric.clean import clean
from tests.integration.conftest import assert_clean

ROOT = Path(__file__).resolve().parents[2]


def test_a_wheel_installed_elsewhere_brings_up_a_fabric(tmp_path):
    # The package build itself (build isolation: setuptools from the registry).
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path / "dist"), str(ROOT)], check=True, cwd=tmp_path, timeout=600)
    (whl,) = (tmp_path / "dist").glob("mrcemu-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert {"mrcemu/topologies/small.yaml", "mrcemu/topologies/default.yaml",
            "mrcemu/bpf/switch.o", "mrcemu/wireshark/mrc.lua",
            "mrcemu/scenarios/failover.yaml", "mrcemu/verbs/shim/libmrcverbs.so"} <= set(names)
    # A fresh venv with the wheel; its dependencies are borrowed from ours by a path
    # entry (which runs no .pth of ours, so our editable mrcemu stays out of it).
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig;print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True,
                          check=True).stdout.strip()
    Path(site, "mrcemu-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    str(whl)], check=True, timeout=300)
    where = subprocess.run([str(py), "-c", "import mrcemu;print(mrcemu.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path).stdout
    assert where.startswith(str(venv)), where
    shim = subprocess.run([str(py), "-c", "from mrcemu.verbs import SHIM;print(SHIM.exists())"],
                          capture_output=True, text=True, cwd=tmp_path).stdout
    assert shim.strip() == "True"  # `mrcemu exec` finds the shim it preloads
    mrcemu = str(venv / "bin" / "mrcemu")
    clean()
    try:
        r = subprocess.run([mrcemu, "up", "small"], capture_output=True, text=True,
                           cwd=tmp_path, timeout=300)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([mrcemu, "check", "--json"], capture_output=True, text=True,
                           cwd=tmp_path, timeout=120)
        out = json.loads(r.stdout)
        assert r.returncode == 0 and out["probes"] == out["delivered"] > 0
        r = subprocess.run([mrcemu, "down"], capture_output=True, text=True, cwd=tmp_path,
                           timeout=120)
        assert r.returncode == 0, r.stderr
    finally:
        clean()
    assert_clean()
