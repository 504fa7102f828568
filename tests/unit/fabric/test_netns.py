"""Reading a node's namespace from the root one: its listening TCP ports."""

from __future__ import annotations

import os
import socket

from mrcemu.fabric.netns import listening, listening_ports

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid
   0: 00000000:4853 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0
   1: 0100007F:0016 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0
"""
TCP6 = """\
  sl  local_address                         remote_address                        st
   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A
"""


def test_only_listening_sockets_count_v4_and_v6():
    assert listening_ports(TCP) == {18515}  # 0x4853; the established :22 is not one
    assert listening_ports(TCP6) == {80}
    assert listening_ports("") == set()


def test_a_socket_listening_here_is_seen_through_our_own_pid():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert not listening(os.getpid(), port)
        s.listen()
        assert listening(os.getpid(), port)
