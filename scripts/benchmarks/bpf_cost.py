"""`make bench`, section "Switch: per-packet cost of the BPF program"."""

from __future__ import annotations

import json
import os
import time

from benchmarks.common import sh

TITLE = 'Switch: per-packet cost of the BPF program'


def bpf_cost() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    import subprocess as sp

    from mrcemu.fabric import bpf

    ns = ("mrcb-a", "mrcb-r", "mrcb-b")
    sh("; ".join(f"ip netns del {n}" for n in ns))
    sh("ip netns add mrcb-a; ip netns add mrcb-r; ip netns add mrcb-b; "
       "ip link add xa netns mrcb-a type veth peer name xr1 netns mrcb-r; "
       "ip link add xr2 netns mrcb-r type veth peer name xb netns mrcb-b; "
       "ip -n mrcb-r link set xr2 address 02:00:bb:00:00:01; "
       "ip -n mrcb-a link set xa up; ip -n mrcb-r link set xr1 up; ip -n mrcb-r link set xr2 up; "
       "ip -n mrcb-b link set xb up; "
       "ip -n mrcb-a addr add fd01::1/64 dev xa nodad; ip -n mrcb-r addr add fd01::2/64 dev xr1 "
       "nodad; ip -n mrcb-r addr add fd02::2/64 dev xr2 nodad; ip -n mrcb-b addr add fd02::1/64 "
       "dev xb nodad; ip -n mrcb-a route add fd02::/64 via fd01::2; "
       "ip -n mrcb-b route add fd01::/64 via fd02::2; "
       "ip netns exec mrcb-r sysctl -qw net.ipv6.conf.all.forwarding=1")

    def rx_packets() -> int:
        out = sp.run(["ip", "-n", "mrcb-b", "-s", "-j", "link", "show", "xb"],
                     capture_output=True, text=True).stdout
        return int(json.loads(out)[0]["stats64"]["rx"]["packets"])

    def pps() -> float:
        # Counted at the receiving interface: what crossed the forwarding namespace.
        before = rx_packets()
        t0 = time.perf_counter()
        sp.run(["ip", "netns", "exec", "mrcb-a", "iperf", "-u", "-V", "-c", "fd02::1", "-b",
                "20G", "-l", "1024", "-t", "3"], capture_output=True)
        return (rx_packets() - before) / (time.perf_counter() - t0)

    def detach() -> None:
        sh("nsenter --net=/run/netns/mrcb-r tc qdisc del dev xr2 clsact")

    try:
        bpf.load()
        bpf.configure({"02:00:bb:00:00:01": bpf.PortConfig(10**11, 0, 0, 0, False)})
        pps()  # warm-up: neighbour resolution, caches
        withouts, withs = [], []
        for _ in range(2):  # interleaved, so drift hits both alike
            withouts.append(pps())
            bpf.attach(None, ["xr2"], netns_path="/run/netns/mrcb-r")
            withs.append(pps())
            detach()
        counted = bpf.read_state().get("02:00:bb:00:00:01", {}).get("packets", 0)
        without, with_prog = sum(withouts) / 2, sum(withs) / 2
    finally:
        bpf.unload()
        sh("; ".join(f"ip netns del {n}" for n in ns))
    return ("What it runs: iperf2 UDP (`-l 1024 -b 20G -t 3`) through "
            "a forwarding namespace, packets counted on the receiving interface; after a "
            "warm-up, bare and with the switch program on the forwarding egress (thresholds "
            "off, so it parses, updates the virtual queue and counts), interleaved twice, "
            "in this run.\n\n"
            "| forwarding egress | packets/s received |\n|---|---|\n"
            f"| no program | {without:,.0f} |\n| mrcemu switch program | {with_prog:,.0f} |\n"
            f"| **ratio** with / without | **{with_prog / without:.2f}** |\n\n"
            f"The program counted {counted:,} packets on that port.\n")


run = bpf_cost
