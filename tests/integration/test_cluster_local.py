"""`mrcemu cluster local`: extra "servers" on this machine, for real (namespaces, sshd)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrcemu.fabric import cluster_local as local
from mrcemu.topology.cluster import load
from tests.integration.conftest import mrcemu

pytestmark = pytest.mark.skipif(not Path(local.SSHD).exists(),
                                reason="needs Debian's openssh-server ('make install')")


def nothing_left() -> None:
    assert local.leftovers() == {"namespaces": [], "devices": [], "sshd": []}
    assert not local.DIR.exists()


@pytest.fixture
def servers() -> Iterator[None]:
    local.down()
    yield
    local.down()
    nothing_left()


def ssh(k: int, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(local.ssh_args(k, *command), capture_output=True, text=True,
                          timeout=30)


def test_two_servers_answer_ssh_on_their_own_underlay_and_down_leaves_nothing(servers,
                                                                             tmp_path):
    out = tmp_path / "c.yaml"
    r = mrcemu("cluster", "local", "3", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    c = load(out)
    assert [s.name for s in c.servers] == ["local", "srv1", "srv2"]
    assert c.placement == "plane" and c.servers[0].local
    assert [s.address for s in c.servers[1:]] == [local.address(1), local.address(2)]
    # Each server is its own network namespace: sshd answers the key made for it, and
    # the host key checked is the one made for it (StrictHostKeyChecking).
    for k in (1, 2):
        r = ssh(k, "cat", f"/sys/class/net/{local.INNER}/mtu", ";", "ip", "-o", "-6",
                "addr", "show", "dev", local.INNER)
        assert r.returncode == 0, r.stderr
        mtu, addr = r.stdout.split("\n", 1)
        assert int(mtu) == local.UNDERLAY_MTU and f"{local.address(k)}/64" in addr
    # A second cluster is refused while one is up, and nothing is made.
    r = mrcemu("cluster", "local", "2")
    assert r.returncode != 0 and "already up" in r.stderr
    r = mrcemu("cluster", "local", "--down")
    assert r.returncode == 0 and "removed 2 sshd, 2 namespaces" in r.stdout
    nothing_left()
    assert not out.exists()  # it named servers that are gone


def test_down_finds_what_a_kill_left_unrecorded(servers):
    local.up(2)
    local.RECORD.unlink()  # as if killed before it wrote its record
    done = local.down()
    assert done["sshd"] == 1 and done["namespaces"] == 1
    nothing_left()


def test_one_server_alone_is_one_clear_error_and_makes_nothing(servers):
    r = mrcemu("cluster", "local", "1")
    assert r.returncode == 2 and "1 is not in the range 2<=x<=65" in r.stderr
    assert "Traceback" not in r.stderr
    nothing_left()
