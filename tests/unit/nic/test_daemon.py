"""The daemon's pure helpers (no sockets)."""

from __future__ import annotations

from mrcemu.nic.daemon import PORT_QUEUE, PORT_SLOTS, announcers, port_slots


def test_slow_ports_keep_two_slots_and_fast_ones_hold_a_tenth_of_a_millisecond():
    assert port_slots(20e6 / 8, 1500) == PORT_SLOTS  # the default fabric's 20 Mb/s
    assert port_slots(10e9 / 8, 9000) == int(10e9 / 8 * 100e-6 / 9014)  # 13
    assert port_slots(1e12, 1500) == PORT_QUEUE // 2  # room stays for control frames


def test_one_connection_a_peer_announces_the_port_status_the_mrc_one_with_the_lowest_qp():
    keys = [(3, "mrc", 2), (3, "roce", 0), (3, "mrc", 1), (5, "mrc", 0), (6, "roce", 0)]
    assert announcers(keys) == {(3, "mrc", 1), (5, "mrc", 0)}
    assert announcers([]) == set()
