"""`make bench`, section "NIC to NIC at line rate, against iperf2"."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from benchmarks.common import cpu_around, fid, mrcemu, transfer_cpu

TITLE = 'NIC to NIC at line rate, against iperf2'


# Two hosts on one leaf, links far faster than the NICs: what limits the transfer is the
# NICs' and the kernel's work, the same for our NICs and for iperf2 on the same path.
PAIR = {"planes": 1, "leaves_per_plane": 1, "spines_per_plane": 1, "hosts": 2,
        "host_link_mbps": 10000, "fabric_link_mbps": 10000, "mtu": 9000,
        "buffer_bytes": 4_000_000, "ecn_threshold_bytes": 0, "trim_threshold_bytes": 0}


def nic_line_rate() -> str:
    if os.geteuid() != 0:
        return "_skipped: needs root_\n"
    import signal
    import subprocess as sp
    import tempfile

    import yaml

    from mrcemu.fabric import state
    from mrcemu.topology import load
    from mrcemu.topology.addressing import host_address
    from mrcemu.transport.config import TransportConfig

    mrcemu("clean")
    with tempfile.TemporaryDirectory() as tmp:
        topo_file = Path(tmp) / "pair.yaml"
        topo_file.write_text(yaml.safe_dump(PAIR))
        if mrcemu("up", str(topo_file)).returncode:
            return "_fabric did not come up_\n"
        try:
            st = state.load_state()
            pids = [st.nics["h0"], st.nics["h1"]]
            size = 256 << 20
            r, (user, system), host, wall = cpu_around(pids, "send", "h0", "h1", "--size",
                                                       str(size), "--json")
            ours = json.loads(r.stdout)
            cfg = TransportConfig.for_topology(load(str(topo_file)))
            pkts = -(-size // cfg.pmtu)
            # iperf2 over the same hosts, leaf and links (plain IPv6 between the hosts'
            # addresses, which the fabric routes), with the NICs stopped meanwhile: their
            # AF_PACKET sockets would otherwise read every datagram too.
            dst = str(host_address(0, 1))
            for p in pids:
                os.kill(p, signal.SIGSTOP)
            try:
                # into the hosts' namespaces directly: `mrcemu exec` on a host asks its
                # NIC daemons, which are stopped
                ns = {h: ["mnexec", "-a", str(st.nodes[h])] for h in ("h0", "h1")}
                srv = sp.Popen([*ns["h1"], "iperf", "-s", "-u", "-V", "-B", dst, "-l", "4096",
                                "-y", "C"], stdout=sp.PIPE, text=True)
                time.sleep(0.5)
                sp.run([*ns["h0"], "iperf", "-u", "-V", "-c", dst, "-b", "20G", "-l", "4096",
                        "-t", "3"], capture_output=True, timeout=60, check=False)
                time.sleep(0.5)
                srv.terminate()
                out = srv.communicate(timeout=5)[0].strip().splitlines()
            finally:
                for p in pids:
                    os.kill(p, signal.SIGCONT)
            fields = out[-1].split(",") if out else []
            iperf_mbps = int(fields[8]) / 1e6 if len(fields) > 8 else float("nan")
        finally:
            mrcemu("down")
    mine = ours["goodput_mbps"]
    per = transfer_cpu(ours) / pkts * 1e6
    whole = (user + system) / pkts * 1e6
    # Busy time only: /proc/stat's idle and iowait are the cores' spare time.
    busy = {k: host[k] / pkts * 1e6 for k in ("user", "nice", "system", "irq", "softirq")}
    machine = sum(busy.values())
    return ("What it runs: A fabric of two hosts on one leaf "
            f"(`{json.dumps(PAIR)}`): 10 Gb/s links, far more than either sender can fill, "
            "so the NICs' and the kernel's own work is what limits both rows. Ours: `mrcemu "
            f"send h0 h1 --size {size >> 20}MiB` (MRC, 4 KiB payloads, one path: the hosts "
            "share the leaf), delivered and checked. iperf2: `iperf -u -V -l 4096 -b 20G -t "
            "3` from h0 to h1 over the same links and leaf (plain IPv6, which the fabric "
            "also routes), goodput as its server counts it, with the NIC daemons stopped "
            "meanwhile. The target was set for one bare veth pair; through the leaf both rows "
            "cross the same two veths and one forwarding namespace, and our receiver accepts "
            "only frames whose last uSID is its own, which needs the leaf. Measured one "
            "after the other in this run.\n\n"
            "| sender to receiver | goodput |\n|---|---|\n"
            f"| iperf2 UDP, 4 KiB datagrams (C, kernel UDP) | {iperf_mbps:,.0f} Mb/s |\n"
            f"| mrcemu NIC daemons, MRC WRITE | {mine:,.0f} Mb/s "
            f"({'data intact' if ours['integrity_ok'] else 'DATA NOT INTACT'}, "
            f"{ours['retransmits']} retransmits, {fid(ours.get('fidelity'))}) |\n"
            f"| **ours / iperf2** | **{mine / iperf_mbps:.2f}** |\n\n"
            f"The daemons' own CPU per delivered packet: **{per:.0f} us** (4 KiB packets in "
            "that transfer, sender plus receiver daemon), as the daemons measured their "
            "own CPU from "
            "the post to the completion, less the test harness's work (filling and hashing "
            "the source, allocating the region: `harness_cpu_s` in the fidelity block). "
            f"The whole command, harness and final hash included (utime + stime from "
            f"`/proc/PID/stat`): {whole:.0f} us (user {user / pkts * 1e6:.0f} us, system "
            f"{system / pkts * 1e6:.0f} us, {pkts:,} packets in {wall:.2f} s). "
            "The whole machine's busy time over the same time (`/proc/stat`, every "
            "process, the kernel's forwarding through the leaf included, idle left out): "
            f"{machine:.0f} us a packet (user {busy['user'] + busy['nice']:.0f}, system "
            f"{busy['system']:.0f}, softirq {busy['softirq'] + busy['irq']:.0f}). The "
            "verdict is not faithful here because the transport's clocks scale with the "
            f"link rate: at {PAIR['host_link_mbps'] / 1000:g} Gb/s the RTO floor is "
            f"{cfg.min_rto * 1e6:g} us, below what this host can time, so some "
            "retransmissions are spurious and the congestion window backs off for them "
            f"(the hosts' slack on an overdue packet is {cfg.ack_slack * 1e6:.0f} us). "
            "The goodput ratio is therefore the emulator as it runs "
            "at this rate, not the data path's ceiling alone.\n\n")


run = nic_line_rate
