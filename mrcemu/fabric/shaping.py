"""Egress shaping with htb: this kernel has no netem, so Mininet's TCLink is out.

Two classes under one root at the port rate: 1:10 for CONTROL and TRIMMED
packets (served first), 1:20 for data (the default). The switch BPF program
picks the class by setting skb->priority.
"""

from __future__ import annotations

from pyroute2 import IPRoute

CONTROL_CLASS = 0x10
DATA_CLASS = 0x20


def rate(mbps: float) -> str:
    return f"{int(mbps * 1000)}kbit"


def burst_bytes(mbps: float, mtu: int) -> int:
    # At least a few MTUs so htb is not starved by timer granularity at low rates.
    return max(4 * mtu, int(mbps * 1e6 / 8 / 1000))  # ~1 ms of line rate


def change_rate(ipr: IPRoute, ifindex: int, mbps: float, mtu: int) -> None:
    """Re-rate a shaped port in place (a degraded link), classes and all."""
    r, b = rate(mbps), burst_bytes(mbps, mtu)
    for handle, prio, base in (("1:1", None, r), (f"1:{CONTROL_CLASS:x}", 0, r),
                               (f"1:{DATA_CLASS:x}", 1, rate(mbps / 100))):
        kw = {"prio": prio} if prio is not None else {}
        ipr.tc("change-class", "htb", index=ifindex, handle=handle,
               parent="1:" if handle == "1:1" else "1:1", rate=base, ceil=r, burst=b, **kw)


def queue_packets(buffer_bytes: int, packet: int = 4096) -> int:
    """Packets of a typical data size that fit the switch buffer (at least 8)."""
    return max(8, buffer_bytes // packet) if buffer_bytes else 1000


def shape(ipr: IPRoute, ifindex: int, mbps: float, mtu: int) -> None:
    r, b = rate(mbps), burst_bytes(mbps, mtu)
    ipr.tc("add", "htb", index=ifindex, handle="1:", default=DATA_CLASS)
    ipr.tc("add-class", "htb", index=ifindex, handle="1:1", parent="1:", rate=r, ceil=r,
           burst=b)
    ipr.tc("add-class", "htb", index=ifindex, handle=f"1:{CONTROL_CLASS:x}", parent="1:1",
           rate=r, ceil=r, prio=0, burst=b)
    ipr.tc("add-class", "htb", index=ifindex, handle=f"1:{DATA_CLASS:x}", parent="1:1",
           rate=rate(mbps / 100), ceil=r, prio=1, burst=b)
