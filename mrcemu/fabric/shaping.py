"""Egress shaping with htb: this kernel has no netem, so Mininet's TCLink is out.

Two classes under one root at the port rate (every port's exactly, below):
1:10 for CONTROL and TRIMMED packets (served first), 1:20 for data (the default).
The switch BPF program picks the class by setting skb->priority.
"""

from __future__ import annotations

from pyroute2 import IPRoute

from mrcemu.fabric import netlink  # noqa: F401 - its cache of htb's rate tables

CONTROL_CLASS = 0x10
DATA_CLASS = 0x20
# Every port, a switch's too, is shaped at exactly its rate: htb charges a trimmed
# header what it is (the BPF program re-queues trimmed packets, bpf/switch.c), so any
# headroom would only let the real port run ahead of the virtual queue that models it,
# and trim and mark less than the model says (docs/switch.md).


def rate(mbps: float) -> str:
    return f"{int(mbps * 1000)}kbit"


# The least burst a port banks: pyroute2's default. htb sends while its tokens are not
# negative, so this lets one frame through at once and paces the next.
LEAST_BURST = 1600


def burst_bytes(mbps: float, mtu: int) -> int:
    """htb's burst, the rate's and the ceil's (cburst: the data class sends on borrowed
    ceil tokens): about 1 ms of line rate, so that a late dequeue is made up for on
    fast links; on slow ones, one frame at a time. Not more: every byte of burst leaves
    an idle port at wire speed: a burst of several MTUs lets a short write through a
    slow port at the veth's speed, so short messages would measure the veth, not the
    emulated link. htb sends a packet bigger than its burst too (its
    tokens go negative): the burst is what it lets through back to back, never a limit
    on size."""
    return max(LEAST_BURST, int(mbps * 1e6 / 8 / 1000))


def _set_classes(ipr: IPRoute, ifindex: int, mbps: float, mtu: int, command: str) -> None:
    """The root and its two classes, added or changed (`command`) at one rate."""
    r, b = rate(mbps), burst_bytes(mbps, mtu)
    for handle, parent, base, prio in (("1:1", "1:", r, None),
                                       (f"1:{CONTROL_CLASS:x}", "1:1", r, 0),
                                       (f"1:{DATA_CLASS:x}", "1:1", rate(mbps / 100), 1)):
        kw = {"prio": prio} if prio is not None else {}
        ipr.tc(command, "htb", index=ifindex, handle=handle, parent=parent, rate=base,
               ceil=r, burst=b, cburst=b, **kw)


def change_rate(ipr: IPRoute, ifindex: int, mbps: float, mtu: int) -> None:
    """Re-rate a shaped port in place (a degraded link), classes and all."""
    _set_classes(ipr, ifindex, mbps, mtu, "change-class")


def queue_packets(buffer_bytes: int, packet: int = 4096) -> int:
    """htb's FIFO for a switch port: twice the packets of a typical data size that fit
    the switch buffer (at least 8 each). The BPF program's virtual queue decides what the
    buffer holds, and the FIFO only stops a port from queueing for seconds: control
    packets skip the virtual queue's limit and take their share of the port first, so
    the real data queue stands above the virtual one by their share. With htb's burst
    at 1 ms of line rate the real port no longer runs ahead to make up for it, and a
    FIFO of exactly the buffer dropped packets the virtual queue had let through
    (uncounted: after the egress program)."""
    return 2 * max(8, buffer_bytes // packet) if buffer_bytes else 1000


def shape(ipr: IPRoute, ifindex: int, mbps: float, mtu: int) -> None:
    ipr.tc("add", "htb", index=ifindex, handle="1:", default=DATA_CLASS)
    _set_classes(ipr, ifindex, mbps, mtu, "add-class")
