"""`mrcemu cluster local`: extra "servers" on this machine, for real (namespaces, sshd)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from mrcemu import rundir
from mrcemu.fabric import bpf, state
from mrcemu.fabric import cluster_local as local
from mrcemu.fabric.sweep import IFNAME, cmdline, our_processes
from mrcemu.topology.cluster import load
from mrcemu.topology.paths import ev_fields
from tests.integration.conftest import alive, mrcemu, wait_for

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
    # a session on the server, whose sshd outlives its listener
    client = subprocess.Popen(local.ssh_args(1, "sleep", "300"), stdin=subprocess.DEVNULL)
    try:
        # (a short-lived sshd child may be gone by the time its cmdline is read)
        wait_for(lambda: any("sleep" in cmdline(p)
                             for p in local._in_namespaces([local.ns_name(1)])))
        session = local._in_namespaces([local.ns_name(1)])
        assert len(session) >= 3  # the listener, the session's sshd, sleep
        listener = int((local.DIR / "srv1" / "sshd.pid").read_text())
        os.kill(listener, signal.SIGKILL)
        local.RECORD.unlink()  # as if killed before it wrote its record
        done = local.down()
        assert done["namespaces"] == 1
        assert not [p for p in session if alive(p)]
        assert client.wait(timeout=10) != 0  # its session was ended under it
    finally:
        client.kill()
    nothing_left()


def test_one_server_alone_is_one_clear_error_and_makes_nothing(servers):
    r = mrcemu("cluster", "local", "1")
    assert r.returncode == 2 and "1 is not in the range 2<=x<=65" in r.stderr
    assert "Traceback" not in r.stderr
    nothing_left()


def test_a_fabric_split_over_two_local_servers_carries_an_mrc_write(servers, tidy):
    """`up --cluster` with plane placement: plane 1's switches on the second server, its
    host links VXLAN; every path checks, and a write uses the remote plane intact."""
    path, _ = local.up(2)
    r = mrcemu("up", "small", "--cluster", str(path), timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    try:
        st = state.load_state()
        assert st is not None and st.cluster == str(path)
        assert st.placement["h0"] == "local" and st.placement["p1l0"] == "srv1"
        assert st.placement["p0l0"] == "srv1"  # one extra server: every plane on it
        detail = subprocess.run(["mnexec", "-a", str(st.nodes["p1l0"]), "ip", "-d", "link",
                                 "show", "p1l0-h0"], capture_output=True, text=True).stdout
        assert "vxlan id" in detail and "mtu 9000" in detail, detail
        r = mrcemu("check", timeout=120)
        assert r.returncode == 0 and "40/40 paths delivered" in r.stdout, r.stdout + r.stderr
        # exec, routes and status reach a node on its own server (over its connection)
        r = mrcemu("exec", "p1l0", "--", "ip", "-d", "link", "show", "p1l0-h0")
        assert r.returncode == 0 and "vxlan id" in r.stdout, r.stdout + r.stderr
        routes = json.loads(mrcemu("routes", "p1l0", "--json").stdout)
        assert sum(r["end_next_csid"] for r in routes) == 1 and len(routes) == 5, routes
        engine = st.topo().usid_engine
        assert [r["engine"] for r in routes if r["end_next_csid"]] == [engine]
        assert ("action End flavors next-csid" if engine == "kernel" else
                "End next-csid lblen 32 nflen 16: engine bpf") in mrcemu("routes", "p1l0").stdout
        nodes = {n["name"]: n for n in json.loads(mrcemu("status", "--json").stdout)["nodes"]}
        assert nodes["p1l0"]["server"] == "srv1" and nodes["h0"]["server"] == "local"
        assert nodes["p1l0"]["alive"] and {i["state"] for i in nodes["p1l0"]["interfaces"]} \
            == {"UNKNOWN", "UP"}  # VXLAN ports to the hosts, veths to the spines
        # One shared ssh connection to the other server, for the fabric's life.
        assert len(masters()) == 1
        # Each server runs its own switch program: none here (plane placement puts no
        # switch on this machine), so `stats` below reads the other server's.
        assert not bpf.PROG.exists()
        before = json.loads(mrcemu("stats", "p1l1", "--json").stdout)["p1l1"]["p1l1-h3"]
        r = mrcemu("send", "h0", "h3", "--size", "1MiB", "--json", timeout=120)
        sent = json.loads(r.stdout)
        assert sent["integrity_ok"] and sent["packets_per_plane"]["1"] > 0
        after = json.loads(mrcemu("stats", "p1l1", "--json").stdout)["p1l1"]["p1l1-h3"]
        # the remote leaf's switch program counted plane 1's share on its way to h3
        assert after["packets"] - before["packets"] >= sent["packets_per_plane"]["1"]
        # A host port down on this server takes its leaf's end, a VXLAN port on the
        # other server, down with it (a VXLAN port has no carrier to lose): exactly
        # h0's plane-1 paths stop, and come back on heal.
        assert mrcemu("fail", "host-port-down", "h0-p1").returncode == 0
        ports = {i["name"]: i["state"] for n in json.loads(mrcemu("status", "--json").stdout)
                 ["nodes"] for i in n["interfaces"]}
        assert ports["h0-p1"] == ports["p1l0-h0"] == "DOWN"
        assert ports["h0-p0"] == ports["p1l0-h1"] == "UNKNOWN"  # VXLAN ports, up
        pairs = json.loads(mrcemu("check", "--json", timeout=120).stdout)["pairs"]
        lost = {(p["src"], p["dst"]): len(p["failures"]) for p in pairs if p["failures"]}
        # h0's plane-1 paths: one to h1 on its leaf, two (one a spine) to h2 and h3
        assert lost == {(0, 1): 1, (1, 0): 1, (0, 2): 2, (2, 0): 2, (0, 3): 2, (3, 0): 2}
        assert {ev_fields(int(f["ev"], 16))[0] for p in pairs for f in p["failures"]} == {1}
        assert mrcemu("heal", "host-port-down:h0-p1").returncode == 0
        r = mrcemu("check", timeout=120)
        assert r.returncode == 0 and "40/40 paths delivered" in r.stdout, r.stdout
        # A path loss is written into the map of the server that owns its port, and
        # counted there: every packet of that path is dropped, and the write is intact.
        assert mrcemu("fail", "path-loss", "h0-h3/p1s1", "--value", "100").returncode == 0
        r = mrcemu("send", "h0", "h3", "--size", "1MiB", "--json", timeout=120)
        assert r.returncode == 0 and json.loads(r.stdout)["integrity_ok"], r.stderr
        stats = json.loads(mrcemu("stats", "--json").stdout)
        (row,) = [r for ports in stats.values() for c in ports.values()
                  for r in c.get("path_loss", [])]
        assert row["path"] == "h0-h3/p1s1" and row["dropped"] == row["matched"] >= 1, row
        assert mrcemu("heal").returncode == 0
    finally:
        assert mrcemu("down", timeout=120).returncode == 0
    assert masters() == []


def masters() -> list[int]:
    """The shared ssh connections (fabric/servers.py) alive on this machine: the masters,
    not the sessions (node shells) riding on them."""
    return [p for p in our_processes() if "ControlMaster=yes" in cmdline(p)]


def test_clean_after_a_kill_9_cleans_the_other_server_too(servers, tidy):
    path, _ = local.up(2)
    r = mrcemu("up", "small", "--cluster", str(path), timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    st = state.load_state()
    assert st is not None
    remote = [st.nodes[n] for n, where in st.placement.items() if where == "srv1"]
    os.kill(st.manager_pid, signal.SIGKILL)
    wait_for(lambda: not alive(st.manager_pid))
    r = mrcemu("clean", timeout=120)
    assert r.returncode == 0 and "not cleaned" not in r.stdout, r.stdout + r.stderr
    # the local server itself outlives the fabric, and clean says how to remove it
    assert "1 local server(s)" in r.stdout and "cluster local --down" in r.stdout, r.stdout
    # the other server's node shells, its VXLAN ports (gone with its nodes or removed),
    # the shared connection: nothing of the fabric is left on either server
    wait_for(lambda: not [p for p in remote if alive(p)])
    assert not [p for p in remote if alive(p)]
    assert masters() == [] and not rundir.LAST_CLUSTER.exists()
    links = ssh(1, "ip", "-o", "link", "show").stdout
    assert not [x for x in links.splitlines() if IFNAME.match(x.split(":")[1].strip()
                                                               .split("@")[0])], links


def test_run_over_two_local_servers_writes_what_a_run_on_one_does(servers, tidy, tmp_path):
    """`run --cluster`: the short failover on small, its faults on the other server's
    switches (applied there by its agent), with the files and keys of a run on one
    server (test_scenarios.py), and where the nodes ran."""
    from tests.integration.test_scenarios import shrink, tshark

    path, _ = local.up(2)
    scenario = shrink("failover", tmp_path)
    # a port here and a port on the other server, captured where each is
    data = yaml.safe_load(scenario.read_text())
    data["capture"] = {"interfaces": ["h0-p0", "p0l1-h3"], "snaplen": 128, "max_mb": 5}
    scenario.write_text(yaml.safe_dump(data))
    out = tmp_path / "runs"
    r = mrcemu("run", str(scenario), "--cluster", str(path), "--slowdown", "1", "--out", str(out),
               timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (folder,) = list(out.iterdir())
    rep = json.loads((folder / "report.json").read_text())
    for f in ("report.json", "report.md", "goodput.png", "ev-states.png", "capture.pcapng"):
        assert (folder / f).stat().st_size > 0, f
    assert list((folder / "logs").glob("nic-h*.jsonl"))
    assert rep["cluster"] == {"file": str(path), "nodes_per_server": {"local": 4, "srv1": 8},
                              "hosts": {f"h{h}": "local" for h in range(4)}}
    assert set(rep["transports"]) == {"mrc", "roce"} and not rep["partial"]
    for t in rep["transports"].values():
        assert t["faults"] and all(f["error"] is None for f in t["faults"]), t["faults"]
    mrc = rep["transports"]["mrc"]
    assert mrc["integrity_ok"] and mrc["messages_ok"] == mrc["messages"] > 0
    assert masters() == []  # the run's fabric is down, its connection closed
    # The merged capture has both ports, each with MRC on it, and opens in tshark.
    got = tshark(folder / "capture.pcapng", "frame.interface_name")
    assert set(got) == {"h0-p0", "p0l1-h3"}, set(got)
    assert not list(rundir.REMOTE_CAPTURES.glob("*"))  # fetched, then removed there


def test_rack_placement_runs_each_hosts_nic_daemon_on_its_own_server(servers, tidy):
    """`rack` over two local servers: leaf 1 and its hosts (h2, h3) on srv1, their NIC
    daemons started there by srv1's agent; every path checks, a write between hosts on
    the two servers is intact, and a kill -9 of the manager then `clean` leaves nothing
    of ours on either server."""
    from mrcemu.fabric.servers import Servers

    path, _ = local.up(2, placement="rack")
    r = mrcemu("up", "small", "--cluster", str(path), timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    st = state.load_state()
    assert st is not None
    assert {h: st.placement[h] for h in ("h0", "h1", "h2", "h3")} == {
        "h0": "local", "h1": "local", "h2": "srv1", "h3": "srv1"}
    srv1 = load(path).server("srv1")
    daemon, shell = st.nics["h2"], st.nodes["h2"]
    # Read on srv1 itself: the daemon runs in h2's namespace, started by srv1's agent
    # (forked by its spawner, nic/spawner.py): it has the environment of srv1's ssh
    # session, whose server end is srv1's underlay address.
    there = ssh(1, "readlink", f"/proc/{daemon}/ns/net", f"/proc/{shell}/ns/net", ";",
                "tr", "'\\0'", "'\\n'", "<", f"/proc/{daemon}/environ")
    assert there.returncode == 0, there.stderr
    ns_daemon, ns_shell, *env = there.stdout.splitlines()
    assert ns_daemon == ns_shell and ns_daemon.startswith("net:[")
    (conn,) = [e for e in env if e.startswith("SSH_CONNECTION=")]
    assert conn.split()[2] == local.address(1), conn
    s = Servers.of_state(st)
    try:
        assert s.call(srv1, "alive", pids=[daemon]) == {str(daemon): True}
    finally:
        s.close()
    nics = json.loads(mrcemu("status", "--json").stdout)["nics"]
    assert nics["h2"] == {"pid": daemon, "alive": True, "server": "srv1"}
    r = mrcemu("check", timeout=120)
    assert r.returncode == 0 and "40/40 paths delivered" in r.stdout, r.stdout + r.stderr
    # h0 here to h3 there, and back: both ends' daemons asked through their servers
    for a, b in (("h0", "h3"), ("h3", "h0")):
        r = mrcemu("send", a, b, "--size", "1MiB", "--json", timeout=120)
        assert r.returncode == 0, r.stderr
        sent = json.loads(r.stdout)
        assert sent["integrity_ok"] and sent["completed"], sent
        assert set(sent["packets_per_plane"]) == {"0", "1"}
    remote = [st.nodes[n] for n, where in st.placement.items() if where == "srv1"]
    remote += [st.nics[h] for h in ("h2", "h3")]
    os.kill(st.manager_pid, signal.SIGKILL)
    wait_for(lambda: not alive(st.manager_pid))
    r = mrcemu("clean", timeout=120)
    assert r.returncode == 0 and "not cleaned" not in r.stdout, r.stdout + r.stderr
    wait_for(lambda: not [p for p in remote if alive(p)])
    assert masters() == []
    left = ssh(1, "ps", "-eo", "args=").stdout
    assert "mrcemu.nic.daemon" not in left and "mininet:" not in left, left
    links = ssh(1, "ip", "-o", "link", "show").stdout
    assert not [x for x in links.splitlines() if IFNAME.match(x.split(":")[1].strip()
                                                               .split("@")[0])], links
