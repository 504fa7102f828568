"""The per-write report's congestion-control block (nic/transfer.py)."""

from mrcemu.nic.transfer import _cc_delta


def test_cc_reactions_are_differences_over_the_write_and_the_window_is_where_it_ended():
    before = {"cc_quick_adapts": 5, "cc_decreases": 2, "retransmits": 1}
    after = {"cc_quick_adapts": 8, "cc_decreases": 2, "retransmits": 9}
    state = {"cwnd": 4096.0, "base_rtt": 0.009, "avg_delay": 0.002}
    assert _cc_delta(before, after, state) == {
        "quick_adapts": 3, "decreases": 0, "cwnd": 4096.0, "base_rtt": 0.009,
        "avg_delay": 0.002}


def test_a_connection_new_to_the_write_counts_from_zero_and_roce_has_no_block():
    after = {"cc_quick_adapts": 4, "cc_decreases": 1}
    assert _cc_delta({}, after, {"cwnd": 8192.0}) == {"quick_adapts": 4, "decreases": 1,
                                                      "cwnd": 8192.0}
    assert _cc_delta({}, {"cc_quick_adapts": 0, "cc_decreases": 0}, {}) == {}
