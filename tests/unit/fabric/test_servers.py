"""Which server owns a node, and how its agent is reached (mrcemu/fabric/servers.py)."""

from __future__ import annotations

import sys

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.fabric import servers
from mrcemu.fabric.servers import Servers
from mrcemu.topology import load as load_topology
from mrcemu.topology.cluster import LOCAL, Cluster, Server, place

CLUSTER = Cluster("c.yaml", (Server("local", LOCAL), Server("srv1", "fd00::2"),
                             Server("srv2", "10.0.0.3", python="/opt/m/bin/python")),
                  "plane", "/k/id", "/k/known")


def test_without_a_cluster_every_node_is_this_machines_and_its_agent_runs_here():
    s = Servers()
    (only,) = s.all()
    assert only.local and s.of("p1l0") == only and s.of("h0") == only
    assert s.call(only, "ping") == "pong"
    with pytest.raises(MrcemuError, match="server local: nope: unknown op"):
        s.call(only, "nope")


def test_nodes_are_grouped_by_the_server_the_placement_gives_them():
    topo = load_topology("small")
    s = Servers(CLUSTER, place(topo, CLUSTER))
    groups = s.group(["h0", "p0l0", "h1", "p1s0"])
    assert {k.name: v for k, v in groups.items()} == {"local": ["h0", "h1"],
                                                      "srv1": ["p0l0"], "srv2": ["p1s0"]}


def test_hosts_split_into_this_machines_and_each_other_servers_for_the_probers():
    topo = load_topology("small")  # four hosts, two racks
    rack = Cluster("c.yaml", CLUSTER.servers[:2], "rack", "/k/id", "/k/known")
    here, there = Servers(rack, place(topo, rack)).hosts_by_server(topo.hosts)
    assert here == [0, 1] and {k.name: v for k, v in there.items()} == {"srv1": [2, 3]}
    assert Servers().hosts_by_server(3) == ([0, 1, 2], {})  # one machine: all here


def test_remote_commands_ride_the_shared_connection_with_the_files_key_and_known_hosts():
    base = servers.ssh_base(CLUSTER)
    assert f"ControlPath={servers.control_path()}" in base and "ControlMaster=no" in base
    assert base[base.index("-i") + 1] == "/k/id"
    assert "UserKnownHostsFile=/k/known" in base and "StrictHostKeyChecking=yes" in base
    assert "-tt" not in base  # the agent speaks JSON lines: no terminal to mangle them
    assert servers.dest(CLUSTER.servers[1]) == "root@fd00::2"
    # a server's own Python, or the one mrcemu runs under here
    assert servers.agent_command(CLUSTER.servers[2])[0] == "/opt/m/bin/python"
    assert servers.agent_command(CLUSTER.servers[1]) == [sys.executable, "-m",
                                                         "mrcemu.fabric.agent"]


def test_an_unreachable_server_is_one_error_naming_it(monkeypatch, tmp_path):
    # ssh that fails as a refused connection does: nothing on stdout
    fake = tmp_path / "ssh"
    fake.write_text("#!/bin/sh\necho 'connect to host fd00::2 port 22: refused' >&2\nexit 255\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with pytest.raises(MrcemuError, match=r"server srv1: the agent gave no answer to ping "
                                          r"\(exit 255\): connect to host fd00::2"):
        Servers(CLUSTER, {}).call(CLUSTER.servers[1], "ping")


def test_counters_merge_every_servers_ports(monkeypatch):
    parts = {"local": {"state": {"m1": {"packets": 1}}, "config": {}, "path_loss": []},
             "srv1": {"state": {"m2": {"packets": 2}}, "config": {"m2": {}},
                      "path_loss": [["m2", "aa", "bb", 1, {"dropped": 3}]]},
             "srv2": {"state": {}, "config": {}, "path_loss": []}}
    monkeypatch.setattr(Servers, "call", lambda self, s, op, **a: parts[s.name])
    out = Servers(CLUSTER, {}).counters()
    assert out["state"] == {"m1": {"packets": 1}, "m2": {"packets": 2}}
    assert out["path_loss"] == [["m2", "aa", "bb", 1, {"dropped": 3}]]


def fake_ssh(tmp_path, monkeypatch) -> tuple[list, object]:
    """An `ssh` that runs its last word (the remote command) here and notes each start."""
    starts = tmp_path / "starts"
    fake = tmp_path / "ssh"
    fake.write_text(f'#!/bin/bash\necho start >> {starts}\neval "${{@: -1}}"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    return starts


def test_a_remote_servers_agent_is_one_session_kept_for_every_call(monkeypatch, tmp_path):
    starts = fake_ssh(tmp_path, monkeypatch)
    s = Servers(CLUSTER, {})
    srv1 = CLUSTER.servers[1]
    try:
        assert [s.call(srv1, "ping") for _ in range(5)] == ["pong"] * 5
        with pytest.raises(MrcemuError, match="server srv1: nope: unknown op"):
            s.call(srv1, "nope")
        assert s.call(srv1, "ping") == "pong"  # an op's error leaves the session as it was
        assert starts.read_text().count("start") == 1
        # a session that died is started again at the next call
        s._channel(srv1).proc.kill()
        s._channel(srv1).proc.wait()
        assert s.call(srv1, "ping") == "pong"
        assert starts.read_text().count("start") == 2
    finally:
        s.close()
    assert s._channels == {}


def test_an_agent_that_dies_mid_session_is_one_error_with_what_it_said(monkeypatch, tmp_path):
    fake_ssh(tmp_path, monkeypatch)
    monkeypatch.setattr(servers, "agent_command",
                        lambda _s: ["sh", "-c", "read x; echo 'agent: out of memory' >&2; exit 3"])
    s = Servers(CLUSTER, {})
    try:
        with pytest.raises(MrcemuError, match=r"server srv1: the agent gave no answer to "
                                              r"ping \(exit 3\): agent: out of memory"):
            s.call(CLUSTER.servers[1], "ping")
    finally:
        s.close()


def test_an_agent_that_does_not_answer_in_time_is_an_error_naming_the_server_and_op(
        monkeypatch, tmp_path):
    fake_ssh(tmp_path, monkeypatch)
    monkeypatch.setattr(servers, "agent_command", lambda _s: ["sleep", "30"])
    s = Servers(CLUSTER, {})
    try:
        with pytest.raises(MrcemuError, match=r"server srv1: ping took over 0.2 s"):
            s.call(CLUSTER.servers[1], "ping", within=0.2)
        assert s._channel(CLUSTER.servers[1]).proc is None  # ended, not left behind
    finally:
        s.close()
