"""Egress shaping with htb: this kernel has no netem, so Mininet's TCLink is out.

Two classes under one root at the port rate (a switch port's with headroom, below):
1:10 for CONTROL and TRIMMED packets (served first), 1:20 for data (the default).
The switch BPF program picks the class by setting skb->priority.
"""

from __future__ import annotations

from pyroute2 import IPRoute

CONTROL_CLASS = 0x10
DATA_CLASS = 0x20
# A switch port's queue is its BPF virtual queue (marks, trims and drops are decided
# there, draining at exactly the port rate); htb only has to deliver what it admits.
# Shaped at exactly the rate, htb fell behind whenever this loaded 2-core host ran its
# dequeue late: on an incast's last hop it carried 16-22 Mb/s of 20 in 200 ms windows,
# and the real queue stood 70-130 kB above the virtual one's 60 kB trim threshold, so
# packets waited ~50 ms longer than the switch model allows and hit the RTO. With
# headroom htb catches up after a late dequeue; what the port carries is still bounded
# by the virtual queue, which trims or drops what would queue past its thresholds.
SWITCH_HEADROOM = 1.05


def rate(mbps: float) -> str:
    return f"{int(mbps * 1000)}kbit"


def burst_bytes(mbps: float, mtu: int) -> int:
    # At least a few MTUs so htb is not starved by timer granularity at low rates. Both
    # the rate's burst and the ceil's (cburst): the data class sends on borrowed ceil
    # tokens, and pyroute2's default cburst (1,600 B) banks less than one 4 KiB packet
    # of a late dequeue.
    return max(4 * mtu, int(mbps * 1e6 / 8 / 1000))  # ~1 ms of line rate


def htb_mbps(mbps: float, switch: bool) -> float:
    """The rate htb shapes a port to: a switch port's, with headroom over its virtual
    queue; a host's, exactly (the NIC paces below it)."""
    return mbps * SWITCH_HEADROOM if switch else mbps


def _set_classes(ipr: IPRoute, ifindex: int, mbps: float, mtu: int, switch: bool,
                 command: str) -> None:
    """The root and its two classes, added or changed (`command`) at one rate."""
    mbps = htb_mbps(mbps, switch)
    r, b = rate(mbps), burst_bytes(mbps, mtu)
    for handle, parent, base, prio in (("1:1", "1:", r, None),
                                       (f"1:{CONTROL_CLASS:x}", "1:1", r, 0),
                                       (f"1:{DATA_CLASS:x}", "1:1", rate(mbps / 100), 1)):
        kw = {"prio": prio} if prio is not None else {}
        ipr.tc(command, "htb", index=ifindex, handle=handle, parent=parent, rate=base,
               ceil=r, burst=b, cburst=b, **kw)


def change_rate(ipr: IPRoute, ifindex: int, mbps: float, mtu: int, switch: bool) -> None:
    """Re-rate a shaped port in place (a degraded link), classes and all."""
    _set_classes(ipr, ifindex, mbps, mtu, switch, "change-class")


def queue_packets(buffer_bytes: int, packet: int = 4096) -> int:
    """Packets of a typical data size that fit the switch buffer (at least 8)."""
    return max(8, buffer_bytes // packet) if buffer_bytes else 1000


def shape(ipr: IPRoute, ifindex: int, mbps: float, mtu: int, switch: bool) -> None:
    ipr.tc("add", "htb", index=ifindex, handle="1:", default=DATA_CLASS)
    _set_classes(ipr, ifindex, mbps, mtu, switch, "add-class")
