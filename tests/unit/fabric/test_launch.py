"""The manager's environment (`launch.manager_env`)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from mrcemu.fabric import launch


def test_mininet_imports_the_standard_librarys_distutils_not_setuptools():
    if not Path(sysconfig.get_paths()["stdlib"], "distutils", "version.py").is_file():
        pytest.skip("this Python has no distutils of its own")
    probe = ("import sys, mininet.node, distutils.version as v; "
             "print(v.__file__); print('setuptools' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], env=launch.manager_env(),
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0].startswith(sysconfig.get_paths()["stdlib"]), out
    assert out[1] == "False"


def test_without_a_distutils_of_its_own_setuptools_shim_is_left_alone(monkeypatch, tmp_path):
    monkeypatch.delenv("SETUPTOOLS_USE_DISTUTILS", raising=False)
    monkeypatch.setattr(launch.sysconfig, "get_paths", lambda: {"stdlib": str(tmp_path)})
    assert "SETUPTOOLS_USE_DISTUTILS" not in launch.manager_env()
