"""Sockets that claim our packets from the host's kernel and keep none of them.

The NIC reads its ports with AF_PACKET; the host's kernel sees the same packets and,
finding nobody for them, answers each one: ICMP port unreachable for RoCEv2's UDP,
parameter problem for MRC's IPv6-in-IPv6 (this kernel has no ip6 tunnel driver). A
socket bound to the protocol stops that. A socket filter that accepts nothing keeps
it from queueing a copy of every packet and waking us for it.
"""

from __future__ import annotations

import ctypes
import socket
import struct

SO_ATTACH_FILTER = 26  # not exported by Python's socket module
_RET_0 = struct.pack("HBBI", 0x06, 0, 0, 0)  # classic BPF: BPF_RET | BPF_K, accept 0 bytes


def _keep_nothing(s: socket.socket) -> socket.socket:
    insns = ctypes.create_string_buffer(_RET_0)
    prog = struct.pack("HL", 1, ctypes.addressof(insns))  # struct sock_fprog
    s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, prog)
    return s  # the kernel copied the program: the buffer may go


def udp_sink(port: int) -> socket.socket:
    """Claims UDP `port` on every address."""
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    _keep_nothing(s)
    s.bind(("::", port))
    return s


def protocol_sink(proto: int) -> socket.socket:
    """Claims IPv6 next header `proto` (a raw socket)."""
    return _keep_nothing(socket.socket(socket.AF_INET6, socket.SOCK_RAW, proto))
