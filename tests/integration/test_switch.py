"""The BPF switches on the default fabric: incast trimming and a hot spine."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

from mrcemu.fabric import rates, state
from mrcemu.topology import Layout, load
from mrcemu.topology.paths import ev_fields
from tests.integration.conftest import mrcemu
from tests.integration.switch_helpers import delta, incast, switch_counters

LUA = "mrcemu/wireshark/mrc.lua"


def test_incast_trims_at_the_last_hop_and_nacks_replace_timeouts(default_fabric, tmp_path):
    pcap = tmp_path / "h7.pcapng"
    st = state.load_state()
    cap = subprocess.Popen(["mnexec", "-a", str(st.nodes["h7"]), "tcpdump", "-i", "h7-p0",
                            "-s", "160", "-w", str(pcap), "udp", "port", "4791"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    before = switch_counters()
    try:
        results = incast()
    finally:
        cap.send_signal(signal.SIGINT)
        cap.wait(timeout=10)
    d = delta(switch_counters(), before)
    assert len(results) == 7 and all(r["integrity_ok"] for r in results)
    last_hop = sum(c["trimmed"] for p, c in d.items() if p.endswith("-h7"))
    all_trims = sum(c["trimmed"] for c in d.values())
    assert last_hop > 0
    assert sum(r["nacks"] for r in results) == sum(r["trims"] for r in results) == all_trims
    data_packets = 7 * (8 << 20) // 4096
    assert sum(r["rtos"] for r in results) <= 0.01 * data_packets
    # A trim gives SKIP, never ASSUMED_BAD: no EV is declared bad within 200 ms of a trim
    # NACK on it. (Queueing alone still makes a few EVs look silent under incast: at most
    # 5 % of the 448 EVs in play, measured 0-13.)
    for r in results:
        trims = [c for c in r["ev_changes"] if c[4] == "NACK trimmed"]
        bad = [c for c in r["ev_changes"] if c[3] == "ASSUMED_BAD"]
        for b in bad:
            assert not any(t[1] == b[1] and 0 <= b[0] - t[0] <= 0.2 for t in trims), b
    why = Counter(c[4] for r in results for c in r["ev_changes"] if c[3] == "ASSUMED_BAD")
    assert sum(why.values()) <= 0.05 * 7 * 64, why
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
        assert all(line.split("\t")[1] == "16" for line in lines)


def test_hot_spine_gets_marked_skipped_and_sheds_its_share(default_fabric):
    st = state.load_state()
    topo = load(st.topology)
    layout = Layout(topo)
    hot = [i.name for i in layout.interfaces["p3s1"]]
    before = switch_counters()
    for name in hot:
        rates.set_port_rate(layout, st.nodes, "p3s1", name, topo.fabric_link_mbps * 0.1)
    try:
        r = mrcemu("send", "h0", "h7", "--size", "64MiB", "--json", timeout=300)
        res = json.loads(r.stdout)
    finally:
        for name in hot:
            rates.set_port_rate(layout, st.nodes, "p3s1", name, topo.fabric_link_mbps)
    d = delta(switch_counters(), before)
    assert res["integrity_ok"]
    assert sum(d[p]["ecn_marked"] for p in hot) > 0
    skipped = {c[1] for c in res["ev_changes"] if c[3] == "SKIP"}
    assert any(ev_fields(ev) == (3, 1) for ev in skipped)
    # Bytes through each plane-3 spine toward h7's leaf, as its egress counted them.
    through = {s: d[f"p3s{s}-l1"]["bytes"] for s in range(topo.spines_per_plane)}
    others = [v for s, v in through.items() if s != 1]
    fair = sum(others) / len(others)
    sent = res["packets_per_path"]
    print(f"bytes through p3s1 {through[1]:,} vs other spines' mean {fair:,.0f} "
          f"({through[1] / fair:.2f}); data packets sent on it {sent['p3s1']}", file=sys.stderr)
    assert through[1] < 0.5 * fair
