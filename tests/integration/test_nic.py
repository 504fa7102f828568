"""NIC daemons on the default fabric: spraying, integrity, all-to-all, link failure.

Goodput against capacity, and how many healthy paths a CPU-starved NIC wrongly
blames, are measured by `make bench`, not asserted here."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

from mrcemu.fabric import state
from mrcemu.nic import transfer
from mrcemu.nic.control import log_path, request
from mrcemu.topology import load
from mrcemu.topology.paths import ev_fields
from tests.integration.conftest import mrcemu, wait_for


def send(*args: str) -> dict:
    r = mrcemu("send", *args, "--json", timeout=300)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def own_changes(changes: list[list], paths: int, window: float = 0.005) -> list[list]:
    """The EV changes that were a path's own: not one of a host-wide burst, where half
    the paths or more made the same change within `window` of it. A NIC the CPU starved
    for a moment finds every path overdue at once and hears them all again at once (CI
    saw all 32 STOPPED as overdue in 3 ms): that says nothing of any path, and they
    stay even; a path skipped or stopped on its own carried less."""
    def burst(c: list) -> bool:
        near = {d[1] for d in changes if d[2:4] == c[2:4] and abs(d[0] - c[0]) <= window}
        return len(near) * 2 >= paths
    return [c for c in changes if c[1] >= 0 and not burst(c)]


def test_64mib_sprayed_evenly_over_all_32_paths_and_roce_uses_one(default_fabric):
    res = send("h0", "h7", "--size", "64MiB")
    assert res["integrity_ok"] and res["sha256_src"] == res["sha256_dst"]
    shares = res["packets_per_path"]
    assert len(shares) == 32
    # Paths whose EVs stayed GOOD all along (but for a host-wide burst) share the spray
    # evenly; a path that was skipped or judged bad for a while on its own (a CPU-starved
    # NIC can make a healthy path look silent) rightly carried less, so it is left out.
    touched = {"p{}s{}".format(*ev_fields(c[1]))
               for c in own_changes(res["ev_changes"], len(shares))}
    steady = {k: v for k, v in shares.items() if k not in touched}
    assert steady, res["ev_changes"][:10]
    mean = sum(steady.values()) / len(steady)
    assert all(abs(v - mean) <= 0.25 * mean for v in steady.values()), (steady, touched)
    roce = send("h0", "h7", "--size", "8MiB", "--transport", "roce")
    assert roce["integrity_ok"]
    assert roce["paths_used"] == 1 and len(roce["packets_per_path"]) == 1


def test_all_to_all_8mib_everything_completes_with_equal_hashes(default_fabric):
    topo = load("default")
    results, _ = transfer.run_many(topo, [(a, b, 8 << 20, "mrc", a * 16 + b)
                                          for a in range(8) for b in range(8) if a != b])
    assert len(results) == 56
    assert all(r["integrity_ok"] for r in results)
    # Done, each NIC's loop visits no connection (it keeps seven or more: earlier
    # tests on this fabric may have made a RoCE one), until one gets work.
    for h in range(8):
        wait_for(lambda h=h: request(f"h{h}", "internals")["active"] == 0)
        got = request(f"h{h}", "internals")
        assert got["connections"] >= 7 and got["active"] == 0, (h, got)


def test_link_down_mid_transfer_completes_and_marks_its_evs_assumed_bad(default_fabric):
    out: dict = {}

    def run():
        out["res"] = send("h0", "h7", "--size", "64MiB")

    t = threading.Thread(target=run)
    t.start()
    # The link dies while the write is in flight: some of it delivered, most still to go
    # (waited for, not slept for: how long the CLI takes to post depends on the CPU).
    flight: dict = {}

    def in_flight() -> bool:
        r = request("h0", "stats", peer=7, transport="mrc", missing_ok=True)
        big = [m for m in r.get("unfinished") or [] if m and m["size"] == 64 << 20]
        if big and 0 < big[0]["acked_pkts"] < big[0]["npkts"] // 2:
            flight.update(big[0])
        return bool(flight)

    wait_for(in_flight, 60)
    assert flight, "the 64 MiB write was never seen in flight"
    t_down = time.monotonic()
    r = mrcemu("exec", "p2l0", "--", "ip", "link", "set", "p2l0-s1", "down")
    assert r.returncode == 0, r.stderr
    try:
        t.join(timeout=300)
    finally:
        mrcemu("exec", "p2l0", "--", "ip", "link", "set", "p2l0-s1", "up")
    res = out["res"]
    assert res["integrity_ok"]
    dead = {ev: s for ev, s in res["ev_states"].items() if ev_fields(int(ev, 16)) == (2, 1)}
    why = {"dead": dead, "down_after_post_s": t_down - flight["posted_at"],
           "acked_at_down": f"{flight['acked_pkts']}/{flight['npkts']}",
           "p2s1_packets": res["packets_per_path"].get("p2s1"),
           "retransmits": res["retransmits"], "rtos": res["rtos"]}
    assert any(s == "ASSUMED_BAD" for s in dead.values()), why
    assert all(s in ("ASSUMED_BAD", "GOOD") for s in dead.values())
    # ev_changes holds only what happened during this transfer: the dead path's EVs
    # were judged bad after the link went down. (Whether a healthy path was also blamed
    # depends on CPU load: `make bench` counts those.)
    changed = [c for c in res["ev_changes"] if c[3] == "ASSUMED_BAD"]
    dead_bad = [c for c in changed if ev_fields(c[1]) == (2, 1)]
    assert any(c[0] >= t_down for c in dead_bad), changed
    # h0's log names the peer whose paths changed (it once named h0's own QP for all).
    logged = [json.loads(x) for x in log_path("h0").read_text().splitlines()]
    mine = [e for e in logged if e["event"] == "ev_state" and e["t"] >= t_down]
    assert mine and {e["peer"] for e in mine} == {"h7"}


def _rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status").read().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_write_over_the_nic_memory_budget_is_refused_and_allocates_nothing(default_fabric):
    # It once made h7's daemon allocate all 10 GiB (RSS 10.5 GB) and the CLI time out.
    pids = state.load_state().nics
    before = {h: _rss_mib(pids[h]) for h in ("h0", "h7")}
    held = {h: request(h, "ping")["memory_used"] for h in ("h0", "h7")}
    r = mrcemu("send", "h0", "h7", "--size", "10GiB", timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "budget" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for h, mib in before.items():
        assert _rss_mib(pids[h]) < mib + 64, h  # nothing near 10 GiB was allocated
    # The refused write left no region and no source buffer behind.
    assert {h: request(h, "ping")["memory_used"] for h in ("h0", "h7")} == held
    assert send("h0", "h7", "--size", "1MiB")["integrity_ok"]


def test_a_stalled_nic_makes_the_transfer_report_itself_unfaithful(default_fabric):
    # The host, not the network, stalls h0's NIC for 0.3 s mid-write (as a CPU hog
    # would): the write still completes intact, and its fidelity verdict says it was
    # not faithful, naming h0 and how late it ran.
    out: dict = {}
    size = 16 << 20

    def run():
        out["res"] = send("h0", "h7", "--size", "16MiB")

    t = threading.Thread(target=run)
    t.start()
    pid = request("h0", "ping")["pid"]
    flight: dict = {}

    def in_flight() -> bool:
        r = request("h0", "stats", peer=7, transport="mrc", missing_ok=True)
        big = [m for m in r.get("unfinished") or [] if m and m["size"] == size]
        if big and 0 < big[0]["acked_pkts"] < big[0]["npkts"] // 2:
            flight.update(big[0])
        return bool(flight)

    wait_for(in_flight, 60)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(0.3)
    finally:
        os.kill(pid, signal.SIGCONT)
    t.join(timeout=300)
    res = out["res"]
    assert res["integrity_ok"]
    v = res["fidelity"]
    h0 = v["hosts"]["h0"]
    assert not v["ok"], v["reasons"]
    # What the NIC measured of itself: something due ran about the stall's length late.
    # A window-limited sender has no paced send due in the stall, and its timers wait
    # while the stall's backlog of frames is read (those frames may answer them), but the
    # scale model's delay line holds frames in flight whose release falls in the stall.
    late = {k: h0[k]["max_s"] for k in ("timer_late", "send_late", "release_late")}
    assert max(late.values()) >= 0.25, (late, h0)
    assert h0["wakeups"] > 0  # its loop rounds are counted beside the lateness
    assert any("at h0" in r and "late" in r for r in v["reasons"]), v["reasons"]


def raw_request(host: str, line: bytes) -> dict:
    """A line as a program might write it to the control socket, unchecked here."""
    import socket as socket_mod

    from mrcemu.nic.control import socket_path
    with socket_mod.socket(socket_mod.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(socket_path(host)))
        s.sendall(line + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 16)
            assert chunk, "the daemon closed the connection"
            buf += chunk
    return json.loads(buf)


def test_malformed_control_requests_get_one_line_naming_the_field_and_the_daemon_runs_on(
        default_fabric):
    pid = request("h3", "ping")["pid"]
    cases = {
        b'{"op": "teleport"}': "unknown op 'teleport'",
        b'{"op": "write", "peer": 7, "va": 0, "rkey": 1}': "missing field 'size'",
        b'{"op": "register", "size": "lots"}': "field 'size' must be a non-negative integer",
        b'{"op": "stats", "peer": 7, "transport": "tcp"}': "field 'transport' must be",
        b'{"op": "free", "rkey": 1, "colour": "red"}': "unknown field 'colour'",
        b'{"op": "ping"': "a request is one JSON object a line",
    }
    for line, says in cases.items():
        r = raw_request("h3", line)
        assert r["ok"] is False and says in r["error"] and "\n" not in r["error"], r
    # still the same process, still answering, still moving data
    assert request("h3", "ping")["pid"] == pid
    rep = send("h3", "h4", "--size", "64KiB")
    assert rep["integrity_ok"] and rep["sha256_src"] == rep["sha256_dst"]


def test_an_explicit_ev_profile_sprays_its_evs_alone_and_a_probe_is_sent_on_demand(
        default_fabric):
    """libmrc's control plane over the policy core's state: h0->h7 told to use two EVs
    sends a write over those two alone; a denied EV listed again comes back through its
    probes; a probe asked for is sent; what names nothing is refused in one line."""
    from mrcemu.api import Fabric

    fab = Fabric.attach()
    before = json.loads(mrcemu("evs", "h0", "h7", "--json", check=True).stdout)
    active = [r for r in before["evs"] if r["active"] and r["state"] == "GOOD"]
    a, b, c = (next(r["ev"] for r in active if r["plane"] == p) for p in (1, 4, 6))
    try:
        prof = fab.ev_profile("h0", "h7", evs=[a, b])
        assert {r.ev for r in prof.evs if r.state != "DENIED"} == {a, b}
        sent = send("h0", "h7", "--size", "2MiB")
        assert sent["integrity_ok"] and sent["completed"], sent
        # a on plane 1, b on plane 4: the write went over their two paths alone
        assert {p for p, n in sent["packets_per_plane"].items() if n} == {"1", "4"}, sent
        assert sent["paths_used"] == 2, sent["packets_per_path"]
        # listed again, a denied EV is probed first, then back in use
        assert {r.ev: r.state for r in fab.ev_profile("h0", "h7", evs=[a, b, c]).evs}[c] \
            == "ASSUMED_BAD"
        r = mrcemu("probe", "h0", "h7", f"0x{c:08x}")
        assert r.returncode == 0 and f"on EV 0x{c:08x}" in r.stdout, r.stdout + r.stderr
        wait_for(lambda: {x.ev: x.state for x in fab.ev_profile("h0", "h7").evs}[c] == "GOOD")
        back = [e for e in fab.ev_events("h0", "h7").events if e.ev == c]
        assert [(e.old, e.new) for e in back[-2:]] == [("DENIED", "ASSUMED_BAD"),
                                                       ("ASSUMED_BAD", "GOOD")], back
        assert fab.ev_profile("h0", "h7", min_active=3).min_active == 3
        for args in (("probe", "h0", "h7", "0xdead"), ("evs", "h0", "h7", "--use", "7")):
            r = mrcemu(*args)
            assert r.returncode != 0 and "no EV 0x" in r.stderr, r.stdout + r.stderr
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    finally:
        # the pair made anew (at one generation at both ends): the next test's is fresh
        gen = 1 + max(request(h, "generation")["gen"] for h in ("h0", "h7"))
        request("h0", "reconnect", peer=7, gen=gen)
        request("h7", "reconnect", peer=0, gen=gen)
