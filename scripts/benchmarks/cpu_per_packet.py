"""`make bench`, section "CPU per delivered packet in the transport core"."""

from __future__ import annotations

import time

TITLE = 'CPU per delivered packet in the transport core'


def cpu_per_packet() -> str:
    from mrcemu import datapath
    from mrcemu.topology import load
    from mrcemu.transport.config import TransportConfig
    from mrcemu.transport.mrc import MrcConnection
    from mrcemu.transport.profiles import local_qpn_pair, profile
    from mrcemu.transport.simnet import SimNet
    from mrcemu.wire import codec

    topo, size = load("default"), 32 << 20

    def one(wire: object) -> tuple[float, float, int]:
        cfg = TransportConfig(seed=1, pmtu=4096)
        qa, qb = local_qpn_pair(0, 7)
        ca = MrcConnection(cfg, profile(topo, 0, 7, cfg), qa, qb)
        cb = MrcConnection(cfg, profile(topo, 7, 0, cfg), qb, qa)
        ca.wire = cb.wire = wire
        net = SimNet(seed=1)
        net.attach("h0", ca, "h7")
        net.attach("h7", cb, "h0")
        mr = cb.memory.register(size)
        ca.post_write(bytes(size), mr.base, mr.rkey, 0.0)
        t0 = time.process_time()
        net.run(until=60.0, stop=lambda: ca.idle)
        cpu = time.process_time() - t0
        return cpu, cpu / cb.stats.rx_data * 1e6, cb.stats.rx_data

    ref, comp = one(codec), one(datapath)
    return ("What it runs: One 32 MiB MRC write, 4 KiB packets, h0 to "
            "h7 over `transport/simnet.py` (no sockets: syscalls are not counted, the "
            "simulated network's own delivery work is), sender and receiver in one process, "
            "CPU from `time.process_time`. The responder is the compiled one "
            "(`datapath/responder.c`) in both rows; the rows differ in how the requester "
            "frames and parses (the Python codec or the compiled one), measured back to "
            "back.\n\n"
            "| requester's framing and parsing | CPU | packets delivered | "
            "CPU per delivered packet |\n"
            "|---|---|---|---|\n"
            f"| Python codec (reference) | {ref[0]:.2f} s | {ref[2]:,} | {ref[1]:.0f} us |\n"
            f"| compiled data path | {comp[0]:.2f} s | {comp[2]:,} | {comp[1]:.0f} us |\n"
            f"| **compiled / Python** | | | **{comp[1] / ref[1]:.2f}** |\n\n"
            "Target: 15 us per packet, sender plus receiver; the NIC "
            "daemons' own figure is in the line-rate section. Over simnet the requester's "
            "and responder's per-packet work is compiled, but every packet is still "
            "delivered by a Python call and every SACK decoded for the policy core "
            "(simnet has no ports to take it whole), so this measures the pure model's "
            "speed, not the NIC's.\n")


run = cpu_per_packet
