"""The verbs tests' shim, test program and loopback NIC."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.verbs.fakenic import LoopNic

ROOT = Path(__file__).resolve().parents[3]
SHIM = ROOT / "mrcemu" / "verbs" / "shim" / "libmrcverbs.so"
HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def shim() -> Path:
    if not SHIM.exists():
        pytest.skip(f"{SHIM} is not built: run `make install`")
    return SHIM


@pytest.fixture(scope="session")
def verbs_write(tmp_path_factory) -> Path:
    if not Path("/usr/include/infiniband/verbs.h").exists() or not shutil.which("gcc"):
        pytest.skip("rdma-core's headers (libibverbs-dev) or gcc are missing: make install")
    out = tmp_path_factory.mktemp("verbs") / "verbs_write"
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-o", str(out),
                    str(HERE / "verbs_write.c"), "-libverbs"], check=True)
    return out


@pytest.fixture
def nic(tmp_path):
    n = LoopNic(tmp_path / "nic-h0.verbs")
    yield n
    n.stop()


def env_for(nic: LoopNic, shim: Path, transport: str = "mrc") -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(shim),
            "MRCEMU_VERBS_SOCKET": str(nic.programs.path), "MRCEMU_TRANSPORT": transport}
