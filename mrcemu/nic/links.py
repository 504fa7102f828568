"""Port carrier state from the kernel's link notifications, not from polling.

Asking for every link through pyroute2 costs ~6 ms of CPU; at the 10 Hz the daemon used to
ask, eight idle daemons took half a core of the two this machine has (measured with
/proc/PID/stat), and every transfer's figures paid for it. The kernel tells a socket bound to
RTMGRP_LINK whenever a link in this namespace changes (a veth whose peer goes down loses
carrier here), so the daemon asks only then.
"""

from __future__ import annotations

import errno
import socket

from pyroute2 import IPRoute

RTMGRP_LINK = 1  # the rtnetlink multicast group of RTM_NEWLINK/RTM_DELLINK
# Operational states that carry packets: a veth is UP while its peer is; a VXLAN port (a
# link to another server, `up --cluster`) has no carrier to report and stays UNKNOWN
# while administratively up.
OPER_UP = frozenset({"UP", "UNKNOWN"})


class LinkWatch:
    """Readable (fileno) when a link in this namespace changed; `up(names)` says which
    of the named interfaces are operationally up."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.sock.bind((0, RTMGRP_LINK))
        self.sock.setblocking(False)
        self.ipr = IPRoute()

    def fileno(self) -> int:
        return self.sock.fileno()

    def changed(self) -> bool:
        """Drain the notifications; True if any came (or some were lost: the kernel says
        ENOBUFS when its queue overflowed, and then only a fresh query is the truth)."""
        any_ = False
        while True:
            try:
                self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return any_
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
            any_ = True

    def up(self, names: set[str]) -> set[str]:
        return {name for link in self.ipr.get_links()
                if (name := link.get_attr("IFLA_IFNAME")) in names
                and link.get_attr("IFLA_OPERSTATE") in OPER_UP}

    def close(self) -> None:
        self.sock.close()
        self.ipr.close()
