"""Real fabrics: bring-up, every path probed, routes read back, clean teardown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mrcemu.fabric import state
from mrcemu.fabric.clean import clean
from mrcemu.fabric.netlink import bpf_end_ports, end_dev, read_routes
from mrcemu.fabric.netns import iproute
from mrcemu.topology import Layout, load
from mrcemu.topology.addressing import usid_prefix
from mrcemu.topology.routes import tables
from tests.integration.conftest import assert_clean, mrcemu, wait_for


def test_small_fabric_routes_match_the_model(fabric):
    st = state.load_state()
    engine = st.topo().usid_engine
    assert engine in ("kernel", "bpf")  # `auto` was decided at `up`
    layout = Layout(load("small"))
    model = tables(layout)
    for name, pid in st.nodes.items():
        with iproute(pid) as ipr:
            kernel = {(r.dst, r.dev, r.gateway, r.end_next_csid, r.engine)
                      for r in read_routes(ipr)}
        want = {(r.dst, end_dev(engine) if r.end else r.dev, r.gateway, r.end,
                 engine if r.end else None) for r in model[name].routes}
        assert kernel == want, name
    for sw in layout.switches:
        with iproute(st.nodes[sw.name]) as ipr:
            ends = [r for r in read_routes(ipr) if r.end_next_csid]
            ports = bpf_end_ports(ipr)
        assert len(ends) == 1 and (ends[0].lblen, ends[0].nflen) == (32, 16)
        assert ends[0].dst == usid_prefix(layout.node_usid(sw.name))
        # the BPF engine's program runs on every port of the switch, and nowhere else
        want_ports = sorted(i.name for i in layout.interfaces[sw.name])
        assert ports == (want_ports if engine == "bpf" else []), sw.name


def test_routes_command_shows_the_end_with_its_engine_and_no_routing_daemon(fabric):
    # A spine, and a leaf: the source leaf is on every path now, by its own End.
    engine = state.load_state().topo().usid_engine
    for node in ("p1s0", "p0l0"):
        r = mrcemu("routes", node)
        assert r.returncode == 0
        if engine == "kernel":
            assert "seg6local" in r.stdout and "End" in r.stdout and "next-csid" in r.stdout
        else:
            assert "End next-csid lblen 32 nflen 16: engine bpf, tc ingress program " \
                   "usid_end on" in r.stdout, r.stdout
        routes = json.loads(mrcemu("routes", node, "--json").stdout)
        assert [x["engine"] for x in routes if x["end_next_csid"]] == [engine]
    ps = subprocess.run(["ps", "-eo", "comm"], capture_output=True, text=True).stdout.split()
    assert not {"bird", "zebra", "bgpd", "ospfd", "ospf6d", "frr", "gobgpd"} & set(ps)


def test_the_engine_shows_in_status_and_check(fabric):
    engine = state.load_state().topo().usid_engine
    st = json.loads(mrcemu("status", "--json").stdout)
    assert st["summary"]["usid_engine"] == engine
    text = mrcemu("status").stdout
    assert "uSID End" in text and engine in text
    checked = json.loads(mrcemu("check", "--json").stdout)
    assert checked["usid_engine"] == engine and checked["ok"]


def test_status_and_exec(fabric):
    st = json.loads(mrcemu("status", "--json").stdout)
    assert st["running"] and st["phase"] == "up"
    assert len(st["nodes"]) == 12
    assert all(n["alive"] for n in st["nodes"])
    assert all(i["state"] == "UP" for n in st["nodes"] for i in n["interfaces"])
    assert sorted(st["nics"]) == ["h0", "h1", "h2", "h3"]
    assert all(n["alive"] for n in st["nics"].values())
    r = mrcemu("exec", "h0", "--", "ip", "-6", "-o", "addr", "show", "dev", "h0-p1")
    assert "fcbb:bb00:1c00::/128" in r.stdout


def test_a_dead_nic_daemon_is_reported_by_status(fabric):
    st = state.load_state()
    os.kill(st.nics["h2"], signal.SIGKILL)
    wait_for(lambda: not state.pid_alive(st.nics["h2"]))
    out = json.loads(mrcemu("status", "--json").stdout)
    assert out["nics"]["h2"]["alive"] is False
    assert out["nics"]["h1"]["alive"] is True
    assert "DEAD" in mrcemu("status").stdout


def test_nic_daemon_survives_garbage_on_the_wire_and_the_control_socket(fabric):
    import socket as so

    from mrcemu.nic.control import request, socket_path
    with so.socket(so.AF_UNIX) as s:
        s.connect(str(socket_path("h1")))
        s.sendall(b"this is not json\n")
        assert b'"ok": false' in s.recv(4096)
    # Raw garbage and a truncated RoCE packet into h1's plane-0 port, from its leaf.
    r = mrcemu("exec", "h0", "--", sys.executable, "-c",
               "import socket;s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,"
               "socket.IPPROTO_RAW);import struct;"
               "hdr=struct.pack('!IHBB16s16s',6<<28,12,17,64,"
               "socket.inet_pton(socket.AF_INET6,'fcbb:bb00:c00::'),"
               "socket.inet_pton(socket.AF_INET6,'fcbb:bb00:c01::'));"
               "udp=struct.pack('!HHHH',49152,4791,12,0)+b'\\xc7abc';"
               "[s.sendto(hdr+udp,('fcbb:bb00:c01::',0)) for _ in range(5)]")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: request("h1", "ping")["malformed"].get("truncated", 0) >= 5)
    pong = request("h1", "ping")
    assert pong["ok"] and pong["malformed"].get("truncated") == 5


def test_a_nic_accepts_encapsulated_packets_only_for_its_own_usid(fabric):
    from mrcemu.nic.control import request
    # Valid MRC packets whose outer DA still holds a uSID after h1's when they reach h1
    # (leaf 0, then h1, then h2): h1 is not where they end, so it must not take them.
    r = mrcemu("exec", "h0", "--", sys.executable, "-c",
               "import socket;from mrcemu.wire import codec;"
               "a=lambda x:socket.inet_pton(socket.AF_INET6,x);"
               "p=codec.encode_data(a('fcbb:bb00:c00::'),a('fcbb:bb00:c01::'),"
               "via=a('fcbb:bb00:400:c01:c02::'),sport=0xC000,flow_label=1,dscp=4,ecn=2,"
               "opcode=0xCA,dqpn=0x1000,psn=0,msn=0,va=0,rkey=1,dmalen=4,payload=b'abcd');"
               "s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_RAW);"
               "[s.sendto(p,('fcbb:bb00:400:c01:c02::',0)) for _ in range(3)]")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: request("h1", "ping")["malformed"].get("not_our_usid", 0) >= 3)
    pong = request("h1", "ping")
    assert pong["malformed"]["not_our_usid"] == 3 and pong["ok"]


def test_the_host_kernel_leaves_mrc_packets_to_the_nic_without_a_word(fabric):
    # The host's kernel sees every packet the NIC reads. Without the NIC's sinks it would
    # answer each IPv6-in-IPv6 packet with ICMPv6 parameter problem (no tunnel driver).
    def icmp_out() -> dict[str, int]:
        out = mrcemu("exec", "h1", "--", "cat", "/proc/net/snmp6").stdout.split()
        c = dict(zip(out[::2], map(int, out[1::2]), strict=True))
        return {k: c[k] for k in ("Icmp6OutParmProblems", "Icmp6OutDestUnreachs")}

    before = icmp_out()
    r = mrcemu("send", "h0", "h1", "--size", "1MiB", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["integrity_ok"]
    assert icmp_out() == before


def test_second_up_is_refused(fabric):
    r = mrcemu("up", "small")
    assert r.returncode == 1
    assert "already running" in r.stderr


@pytest.mark.parametrize("fabric", ["default"], indirect=True)
def test_default_fabric_every_path_of_all_56_pairs(fabric):
    r = mrcemu("check", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0, [p for p in out["pairs"] if p["failures"]][:3]
    assert len(out["pairs"]) == 56
    assert out["probes"] == out["delivered"] == 32 * 32 + 24 * 8


def test_down_leaves_nothing():
    clean()
    assert mrcemu("up", "small").returncode == 0
    r = mrcemu("down")
    assert r.returncode == 0, r.stderr
    assert_clean()


def test_bad_topology_creates_nothing(tmp_path):
    clean()
    bad = tmp_path / "bad.yaml"
    bad.write_text("planes: 2\nleaves_per_plane: 2\nspines_per_plane: 2\nhosts: 3\n")
    r = mrcemu("up", str(bad))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "hosts" in r.stderr and "fix:" in r.stderr
    assert_clean()


def test_clean_after_kill_9_of_the_manager():
    clean()
    assert mrcemu("up", "small").returncode == 0
    st = state.load_state()
    os.kill(st.manager_pid, signal.SIGKILL)
    wait_for(lambda: not state.pid_alive(st.manager_pid))
    r = mrcemu("clean")
    assert r.returncode == 0, r.stderr
    assert_clean()
    assert not any(state.pid_alive(p) for p in st.nodes.values())


def test_ctrl_c_during_up_leaves_nothing():
    clean()
    proc = subprocess.Popen([sys.executable, "-m", "mrcemu", "up", "large"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = state.load_state()
            if st and len(st.nodes) > 20:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the large fabric never started making nodes")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=90)
        assert proc.returncode == 130
    finally:
        if proc.poll() is None:
            proc.kill()
        clean_left = mrcemu("status", "--json")
    assert json.loads(clean_left.stdout) == {"running": False}
    assert_clean()
