"""The per-write report's congestion-control block (nic/transfer.py)."""

from mrcemu.nic.transfer import _cc_delta


def test_cc_counters_are_differences_over_the_write_and_the_window_is_where_it_ended():
    before = {"quick_adapts": 5, "decreases": 2, "cwnd": 9000.0, "base_rtt": 0.01}
    after = {"quick_adapts": 8, "decreases": 2, "cwnd": 4096.0, "base_rtt": 0.009}
    assert _cc_delta(before, after) == {"quick_adapts": 3, "decreases": 0, "cwnd": 4096.0,
                                        "base_rtt": 0.009}


def test_a_connection_new_to_the_write_counts_from_zero_and_roce_has_no_block():
    assert _cc_delta({}, {"quick_adapts": 4, "decreases": 1}) == {"quick_adapts": 4,
                                                                 "decreases": 1}
    assert _cc_delta({}, {}) == {}
