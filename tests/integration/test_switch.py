"""The BPF switches on the default fabric: incast trimming and a hot spine."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

from mrcemu.fabric import state
from mrcemu.topology import Layout
from mrcemu.topology.paths import ev_fields
from tests.integration.conftest import mrcemu
from tests.integration.switch_helpers import (
    busy,
    delta,
    incast,
    last_hop_ports,
    nacks_heard,
    slowed,
    switch_counters,
)

LUA = "mrcemu/wireshark/mrc.lua"


def test_incast_trims_at_the_last_hop_and_nacks_replace_timeouts(default_fabric, tmp_path):
    pcap = tmp_path / "h7.pcapng"
    st = state.load_state()
    # -U: packet-buffered, so the file header is written as soon as tcpdump listens
    # (without it the header waited for a full buffer, and this test for its deadline).
    cap = subprocess.Popen(["mnexec", "-a", str(st.nodes["h7"]), "tcpdump", "-U", "-i",
                            "h7-p0", "-s", "160", "-w", str(pcap), "ip6", "proto", "41"],  # MRC
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30  # tcpdump writes the file header once it listens
    while (not pcap.exists() or pcap.stat().st_size < 24) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pcap.stat().st_size >= 24, "tcpdump did not start listening on h7-p0"
    before, heard_before = switch_counters(), nacks_heard()
    try:
        # h7's last hop at half rate: seven senders overload it whatever CPU they get.
        with slowed(last_hop_ports("default", 7), 0.5):
            results = incast(size=2 << 20)
    finally:
        cap.send_signal(signal.SIGINT)
        cap.wait(timeout=10)
    d = delta(switch_counters(), before)
    assert len(results) == 7 and all(r["integrity_ok"] for r in results)
    last_hop = sum(c["trimmed"] for p, c in d.items() if p.endswith("-h7"))
    all_trims = sum(c["trimmed"] for c in d.values())
    assert last_hop > 0
    # Every trim the switches made was NACKed by h7 and every NACK reached its sender,
    # which retransmitted (RTOs and paths judged bad under incast are load-dependent
    # figures: `make bench`, section incast). A write can complete before the NACK of
    # a copy of one of its packets trimmed late (a retransmission's, or the original's
    # behind it): the senders' counts are read again until they stop growing.
    heard, deadline = None, time.monotonic() + 5
    while time.monotonic() < deadline:
        now = tuple(a - b for a, b in zip(nacks_heard(), heard_before, strict=True))
        if now == heard:
            break
        heard = now
        time.sleep(0.5)
    assert heard is not None and heard[0] == heard[1] == all_trims, (heard, all_trims)
    assert sum(r["nacks"] for r in results) == sum(r["trims"] for r in results) <= all_trims
    assert sum(r["retransmits"] for r in results) >= all_trims
    # Trims at the last hop are the receiver's incast, no path's fault: they change no
    # EV (the white paper, 2.1). A SKIP for a trim needs a trim mid-path, which this test does not
    # force; there can be no more of them than the switches made away from h7.
    mid_path = all_trims - last_hop
    why = Counter((c[3], c[4]) for r in results for c in r["ev_changes"])
    assert why[("SKIP", "NACK trimmed")] <= mid_path
    assert {state for state, reason in why if reason == "NACK trimmed"} <= {"SKIP"}
    # The capture at the destination shows them, headers only, as the tools label them.
    rows = json.loads(mrcemu("decode", str(pcap), "--json").stdout)
    trimmed = [r for r in rows if r["trimmed"]]
    assert trimmed and all(r["dscp"] == "TRIMMED_LASTHOP" and r["error"] is None
                           for r in trimmed)
    if shutil.which("tshark"):
        out = subprocess.run(["tshark", "-X", f"lua_script:{LUA}", "-r", str(pcap), "-Y",
                              "mrc.trimmed", "-T", "fields", "-e", "mrc.psn", "-e",
                              "ipv6.tclass.dscp"], capture_output=True, text=True).stdout
        lines = out.strip().splitlines()
        assert len(lines) == len(trimmed)
        # Both IPv6 headers carry the DSCP the last hop set: outer, inner.
        assert all(line.split("\t")[1] == "16,16" for line in lines)


def test_hot_spine_gets_marked_skipped_and_sheds_its_share(default_fabric):
    st = state.load_state()
    topo = st.topo()
    layout = Layout(topo)
    hot = [i.name for i in layout.interfaces["p3s1"]]
    before = switch_counters()
    # One spine with 5 % of its rate left for us (1 Mb/s): congested unless h0 sends
    # under 32 Mb/s.
    with busy([("p3s1", name) for name in hot], 0.05):
        r = mrcemu("send", "h0", "h7", "--size", "32MiB", "--json", timeout=300)
        res = json.loads(r.stdout)
    d = delta(switch_counters(), before)
    assert res["integrity_ok"]
    assert sum(d[p]["ecn_marked"] for p in hot) > 0
    skipped = {c[1] for c in res["ev_changes"] if c[3] == "SKIP"}
    assert any(ev_fields(ev) == (3, 1) for ev in skipped)
    # The sender shed the hot spine's share: it put fewer than half as many data
    # packets on its paths as on each cool plane-3 spine's (the switch alone, which
    # can only trim, would not change what the sender offers).
    sent = res["packets_per_path"]
    cool = [sent[f"p3s{s}"] for s in range(topo.spines_per_plane) if s != 1]
    fair = sum(cool) / len(cool)
    print(f"data packets sent on p3s1 {sent['p3s1']} vs the other plane-3 spines' mean "
          f"{fair:.0f} ({sent['p3s1'] / fair:.2f})", file=sys.stderr)
    assert sent["p3s1"] < 0.5 * fair
