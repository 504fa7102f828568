"""Port carrier state from the kernel's link notifications, not from polling.

Asking for every link through pyroute2 costs milliseconds of CPU; polled at 10 Hz by
every daemon, idle daemons would take a large share of a small machine's cores, and every
transfer's figures would pay for it. The kernel tells a socket bound to
RTMGRP_LINK whenever a link in this namespace changes (a veth whose peer goes down loses
carrier here), so the daemon asks only then.

It asks with SIOCGIFFLAGS, one ioctl an interface, not through pyroute2: the kernel sets
IFF_RUNNING exactly when the operational state is UP or UNKNOWN (dev_get_flags), which is
what carries packets here (a VXLAN port, a link to another server, has no carrier to
report and stays UNKNOWN). Importing pyroute2 was half of a daemon's start (0.22 of
0.42 s), and eight daemons start at once on two cores with every fabric.
"""

from __future__ import annotations

import errno
import fcntl
import socket
import struct

RTMGRP_LINK = 1  # the rtnetlink multicast group of RTM_NEWLINK/RTM_DELLINK
SIOCGIFFLAGS = 0x8913  # linux/sockios.h
IFF_RUNNING = 0x40  # linux/if.h: operationally UP or UNKNOWN
IFREQ = struct.Struct("16sH22x")  # struct ifreq: the name, then ifr_flags
# The operational states (as `ip link` names them) that carry packets: IFF_RUNNING's.
OPER_UP = frozenset({"UP", "UNKNOWN"})


class LinkWatch:
    """Readable (fileno) when a link in this namespace changed; `up(names)` says which
    of the named interfaces are operationally up."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.sock.bind((0, RTMGRP_LINK))
        self.sock.setblocking(False)
        # The interface ioctls resolve names in the namespace this socket was made in.
        self.query = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)

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
        return {name for name in names if self._running(name)}

    def _running(self, name: str) -> bool:
        try:
            reply = fcntl.ioctl(self.query, SIOCGIFFLAGS, IFREQ.pack(name.encode(), 0))
        except OSError as e:
            if e.errno == errno.ENODEV:  # gone (its namespace's peer deleted it)
                return False
            raise
        return bool(IFREQ.unpack(reply)[1] & IFF_RUNNING)

    def close(self) -> None:
        self.sock.close()
        self.query.close()
