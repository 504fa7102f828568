"""The package's build backend: setuptools, extended in one place. A wheel
(`pip install .`) carries the built-in topologies, the compiled switch and End programs
and the verbs shim inside the package, so a non-editable install works without this source tree.

pyproject.toml names this module as the backend (from scripts/, its backend-path)
and `BuildPy` as setuptools' build_py; everything else is setuptools' own."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from setuptools.build_meta import *  # noqa: F403 - the backend is setuptools' own
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parents[1]


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # an editable install reads both straight from the tree
        pkg = Path(self.build_lib) / "mrcemu"
        topo = pkg / "topologies"
        topo.mkdir(parents=True, exist_ok=True)
        for f in (ROOT / "topologies").glob("*.yaml"):
            shutil.copy2(f, topo / f.name)
        # the switch program and the BPF engine's End: the Makefile's recipes, with the
        # machine's clang
        objs = [Path("mrcemu") / "bpf" / name for name in ("switch.o", "usid_end.o")]
        subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *map(str, objs)],
                       check=True)
        (pkg / "bpf").mkdir(parents=True, exist_ok=True)
        for obj in objs:
            shutil.copy2(ROOT / obj, pkg / obj.relative_to("mrcemu"))

        # the verbs shim programs on emulated hosts preload: the Makefile's one recipe
        shim = Path("mrcemu") / "verbs" / "shim" / "libmrcverbs.so"
        subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), str(shim)],
                       check=True)
        (pkg / shim.parent.relative_to("mrcemu")).mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / shim, pkg / shim.relative_to("mrcemu"))
