"""Live faults on the small fabric: each breaks exactly the paths it should, and heals."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from mrcemu.fabric import bpf, state
from mrcemu.fabric.inject import _active
from mrcemu.topology.paths import ev_fields
from tests.integration.conftest import mrcemu, running


@pytest.fixture(scope="module")
def small_fabric() -> Iterator[str]:
    """One small fabric for the module's tests: bringing one up and down was most of
    each test's time (about 4 s of 5-8)."""
    with running("small") as topo:
        yield topo


@pytest.fixture
def fabric(small_fabric) -> Iterator[str]:
    """The shared fabric with no fault active: each test starts with none and, pass or
    fail, leaves none (`heal` ends every active fault, the flapper process included)."""
    assert not _active(), _active()
    try:
        yield small_fabric
    finally:
        assert mrcemu("heal").returncode == 0


def failed_evs() -> set[tuple[str, str, str]]:
    out = json.loads(mrcemu("check", "--json", "--timeout", "2").stdout)
    return {(f"h{p['src']}", f"h{p['dst']}", f["ev"]) for p in out["pairs"]
            for f in p["failures"]}


def evs_through(src: str, dst: str, plane: int, spine: int | None) -> str:
    return next(p["ev"] for p in json.loads(mrcemu("paths", src, dst, "--json").stdout)
                if p["plane"] == plane and p["spine"] == spine)


@pytest.mark.parametrize("kind,target,value,broken", [
    # (plane, spine) pairs whose paths between h0/h1 and h2/h3 must fail
    ("link-down", "p0l0-p0s1", None, {(0, 1)}),
    ("gray", "p1l1-p1s0", None, {(1, 0)}),
    ("switch-down", "p0s0", None, {(0, 0)}),
    ("plane-down", "1", None, {(1, 0), (1, 1)}),
])
def test_fault_breaks_its_paths_and_heal_restores_all(fabric, kind, target, value, broken):
    assert failed_evs() == set()
    args = ["fail", kind, target] + (["--value", str(value)] if value else [])
    r = mrcemu(*args)
    assert r.returncode == 0, r.stderr
    failed = failed_evs()
    want = {(a, b, evs_through(a, b, plane, spine)) for a in ("h0", "h1") for b in ("h2", "h3")
            for plane, spine in broken}
    cross = {x for x in failed if {x[0], x[1]} & {"h0", "h1"} and {x[0], x[1]} & {"h2", "h3"}}
    assert want <= cross
    assert mrcemu("heal").returncode == 0
    assert failed_evs() == set()
    log = [json.loads(line) for line in
           (state.RUN_DIR / "logs" / "faults.jsonl").read_text().splitlines()]
    mine = [e for e in log if e.get("target") == target and e.get("kind") == kind]
    assert [e["event"] for e in mine[-2:]] == ["inject", "heal"]
    # The log's time is when each action took effect: the injection's own clock reading
    # comes first, then its log line, then the heal's.
    assert mine[-2]["at"] <= mine[-2]["t"] <= mine[-1]["t"]


def port_status(host: str) -> list[list[int]]:
    """The planes up, each time the host's NIC daemon saw its ports change."""
    log = (state.RUN_DIR / "logs" / f"nic-{host}.jsonl").read_text().splitlines()
    return [e["planes_up"] for e in map(json.loads, log) if e["event"] == "port_status"]


def test_host_port_down_takes_one_plane_from_one_host_and_comes_back(fabric):
    seen = len(port_status("h0"))
    assert mrcemu("fail", "host-port-down", "h0-p1").returncode == 0
    failed = failed_evs()
    assert failed and all("h0" in (a, b) for a, b, _ in failed)
    # The NIC heard of it from the kernel (mrcemu.nic.links), not by asking.
    assert port_status("h0")[seen:] == [[0]]
    assert mrcemu("heal", "host-port-down:h0-p1").returncode == 0
    assert failed_evs() == set()
    assert port_status("h0")[seen:] == [[0], [0, 1]]


def port_rates(node: str, port: str) -> tuple[float, float]:
    """(the switch model's rate, htb's root rate) of a switch port, in Mb/s."""
    mac = mrcemu("exec", node, "--", "cat", f"/sys/class/net/{port}/address").stdout.strip()
    model = bpf.read_config()[mac]["rate_bps"] / 1e6
    tc = mrcemu("exec", node, "--", "tc", "class", "show", "dev", port).stdout
    m = re.search(r"class htb 1:1 root rate (\d+)([KM])bit", tc)
    assert m, tc
    return model, int(m[1]) / (1000 if m[2] == "K" else 1)


def test_loss_and_degrade_apply_and_heal(fabric):
    assert mrcemu("fail", "loss", "p0l0-p0s0", "--value", "100").returncode == 0
    assert mrcemu("fail", "degrade", "p1l0-p1s1", "--value", "10").returncode == 0
    # The switch's virtual queue and htb both run at the degraded rate.
    assert port_rates("p1l0", "p1l0-s1") == pytest.approx((2.0, 2.0))
    assert failed_evs()  # 100 % loss on one link drops its paths
    assert mrcemu("heal").returncode == 0
    assert port_rates("p1l0", "p1l0-s1") == pytest.approx((20.0, 20.0))
    assert failed_evs() == set()


@pytest.mark.parametrize("args,words", [
    (["fail", "gray", "p0l0-p9s9"], "no link"),
    (["fail", "switch-down", "h0"], "no switch"),
    (["fail", "plane-down", "7"], "no plane"),
    (["fail", "degrade", "p0l0-p0s0", "--value", "0"], "percentage"),
    (["heal", "gray:nothing"], "no active fault"),
])
def test_bad_fault_requests_are_one_clear_line(fabric, args, words):
    r = mrcemu(*args)
    assert r.returncode == 1
    assert words in r.stderr and "Traceback" not in r.stderr


def test_flap_toggles_the_link_until_healed_and_leaves_it_up(fabric):
    from mrcemu.fabric.inject import LOG
    from mrcemu.fabric.sweep import our_processes

    start = LOG.stat().st_size if LOG.exists() else 0
    r = mrcemu("fail", "flap", "p0l0-p0s1", "--period", "0.2", "--duty", "0.5")
    assert r.returncode == 0, r.stderr
    (active,) = json.loads((state.RUN_DIR / "faults.json").read_text()).values()
    pid = active["pid"]
    assert pid in our_processes()
    import time

    # Wait for five transitions however slowly the flapper is scheduled (the deadline is
    # only there to end a broken run).
    deadline = time.monotonic() + 60
    while True:
        events = [json.loads(x)["event"] for x in LOG.read_text()[start:].splitlines()]
        flaps = [e for e in events if e.startswith("flap-")]
        if len(flaps) >= 5 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    # Down and up alternate, starting with down.
    assert len(flaps) >= 5 and "inject" in events
    assert flaps == ["flap-down", "flap-up"] * (len(flaps) // 2) + ["flap-down"] * (
        len(flaps) % 2)
    r = mrcemu("heal", "flap:p0l0-p0s1")
    assert r.returncode == 0, r.stderr
    assert pid not in our_processes()
    assert failed_evs() == set()  # the link is up, with its routes back


def test_flap_needs_period_and_duty(fabric):
    r = mrcemu("fail", "flap", "p0l0-p0s1")
    assert r.returncode == 1 and "--period" in r.stderr and "Traceback" not in r.stderr


def switch_stats() -> dict:
    r = mrcemu("stats", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def quiet_stats(node: str, port: str, timeout: float = 30.0, quiet: float = 0.5,
                also: tuple[str, str] | None = None) -> dict:
    """The counters once `port` (and `also`, a (node, port)) has carried nothing for
    `quiet` seconds (0.5: ten probe intervals)."""
    import time

    ports = [(node, port), *([also] if also else [])]
    deadline = time.monotonic() + timeout
    last = switch_stats()
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = switch_stats()
        if all(now[n][p]["packets"] == last[n][p]["packets"] for n, p in ports):
            return now
        last = now
    raise AssertionError(f"{ports} still carried packets after {timeout} s")


def test_a_path_loss_drops_only_its_own_paths_packets(fabric):
    """h0->h3 over p1s0 loses half its packets where it enters the core (p1l0's port to
    p1s0). h1->h3 crosses that port too and h0->h2 leaves by it: the switch counters show
    every packet the port carried that the path loss did not drop came out of the spine."""
    from mrcemu.topology import Layout, load
    from mrcemu.topology.faults import Fault, targets

    layout = Layout(load("small"))
    (port,) = targets(layout, Fault("path-loss", "h0-h3/p1s0", 50))
    spine_out = next(i for i in layout.interfaces["p1s0"] if i.peer_node == "p1l1")
    assert mrcemu("fail", "path-loss", "h0-h3/p1s0", "--value", "50").returncode == 0
    try:
        # A fresh fabric's kernels still send their unsolicited MLD reports (the second
        # up to 1 s after the first): each counted on the port it leaves by and never
        # forwarded, so one in the window put the two ports' sums a packet apart (in a
        # clean-clone CI run, both ways). Counted from once both ports are quiet.
        before = quiet_stats("p1l0", port.name, quiet=1.5, also=("p1s0", spine_out.name))
        sent = {}
        for a, b in (("h0", "h3"), ("h1", "h3"), ("h0", "h2")):
            r = mrcemu("send", a, b, "--size", "1MiB", "--json", timeout=120)
            assert r.returncode == 0, r.stderr
            sent[a, b] = json.loads(r.stdout)
            assert sent[a, b]["integrity_ok"]
        # h0 probes the EVs it retired until enough answers bring them back: counted
        # while one is between the two ports, the sums would be a probe apart.
        after = quiet_stats("p1l0", port.name)
    finally:
        assert mrcemu("heal").returncode == 0
    leaf0, leaf1 = before["p1l0"][port.name], after["p1l0"][port.name]
    (loss0,), (loss1,) = leaf0["path_loss"], leaf1["path_loss"]
    assert loss1["path"] == "h0-h3/p1s0" and loss1["percent"] == 50
    dropped = loss1["dropped"] - loss0["dropped"]
    matched = loss1["matched"] - loss0["matched"]
    assert 0 < dropped < matched  # half of that path's packets, at random
    carried = leaf1["packets"] - leaf0["packets"]
    assert carried > matched  # the port carried the other pairs' packets as well
    came_out = (after["p1s0"][spine_out.name]["packets"]
                - before["p1s0"][spine_out.name]["packets"])
    # The spine's port to leaf 1 carries exactly what p1l0 sent it: every packet but the
    # path loss's drops (and the buffer's, none on an otherwise idle fabric).
    assert leaf1["dropped"] == leaf0["dropped"]
    assert came_out == carried - dropped
    # The sender saw the loss as a path failure: an EV of that path retired for it.
    retired = {c[1] for c in sent["h0", "h3"]["ev_changes"] if c[3] == "ASSUMED_BAD"}
    assert any(ev_fields(ev) == (1, 0) for ev in retired), sent["h0", "h3"]["ev_changes"]
    assert "path_loss" not in switch_stats()["p1l0"][port.name]  # healed: entry gone


def test_a_host_loss_breaks_the_paths_of_that_host_only(fabric):
    assert mrcemu("fail", "host-loss", "h3", "--value", "100").returncode == 0
    try:
        failed = failed_evs()
    finally:
        assert mrcemu("heal").returncode == 0
    assert failed and all("h3" in (a, b) for a, b, _ in failed), failed
    assert {(a, b) for a, b, _ in failed} >= {("h0", "h3"), ("h1", "h3"), ("h2", "h3")}
    assert failed_evs() == set()


def test_a_gray_links_drops_are_counted_at_its_ports_and_outlive_its_heal(fabric):
    """What a drop rule drops is the fabric's too (a run's report: `fault` drops): each
    port's named counter counts it, and keeps it when the rules are rewritten."""
    from mrcemu.fabric import agent

    pids = state.load_state().nodes

    def drops() -> dict[str, int]:
        got = agent.kernel_drops({n: pids[n] for n in ("p1l1", "p1s0")})
        return {p: got[p]["fault"] for p in ("p1l1-s0", "p1s0-l1", "p1l1-h2")}

    before = drops()
    assert mrcemu("fail", "gray", "p1l1-p1s0").returncode == 0
    failed_evs()  # probes cross the link both ways, and die there
    during = drops()
    assert during["p1l1-s0"] > before["p1l1-s0"] and during["p1s0-l1"] > before["p1s0-l1"]
    assert during["p1l1-h2"] == before["p1l1-h2"]  # a port of the switch it does not touch
    assert mrcemu("heal").returncode == 0
    assert drops() == during  # healed: the rules are gone, what they counted is not
