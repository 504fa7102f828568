"""The scale model's latencies: the paper's fit, its scale, and what they derive."""

from __future__ import annotations

import pytest

from mrcemu.errors import ConfigError
from mrcemu.topology import load
from mrcemu.topology.latency import (
    NIC_LATENCY_US,
    SWITCH_LATENCY_US,
    base_rtt_s,
    bdp_packets,
    delay_line_bytes,
    delay_ring_bytes,
    describe,
    hops,
    on_paper,
    one_way_s,
    scale_line,
    time_scale,
)
from mrcemu.topology.model import from_mapping


def test_the_fit_gives_back_the_papers_one_way_latencies():
    # ib_write_lat, 5.2.1: one switch within a T0, three across a T1.
    assert NIC_LATENCY_US + SWITCH_LATENCY_US == pytest.approx(5.09)
    assert NIC_LATENCY_US + 3 * SWITCH_LATENCY_US == pytest.approx(6.54)


def test_default_is_the_papers_fabric_at_1_to_5000():
    t = load("default")
    assert time_scale(t) == 5000
    assert (hops(t, 0, 1), hops(t, 0, 7)) == (1, 3)
    # S1's targets: 65.4 ms across leaves, 50.9 ms within one.
    assert base_rtt_s(t, 0, 7) == pytest.approx(0.0654)
    assert base_rtt_s(t, 0, 1) == pytest.approx(0.0509)
    # S2: a host's BDP in 4 KiB packets, the paper's ~317 (8 x 100 Gb/s x 13.1 us).
    assert bdp_packets(t, 4096) == 319


def test_a_slowed_fabric_has_every_latency_k_times_longer():
    t = load("default")
    s = t.slowed(20)
    assert time_scale(s) == 100_000
    assert base_rtt_s(s, 0, 7) == pytest.approx(20 * base_rtt_s(t, 0, 7))
    assert bdp_packets(s, 4096) == bdp_packets(t, 4096)  # the same in packets


def test_every_builtin_carries_the_papers_bdp():
    # ecmp's one port stands for 8 planes: its scale is set, not derived from its rate.
    for name in ("default", "small", "large", "rack4", "ecmp"):
        t = load(name)
        per_plane_mbps = t.host_link_mbps / (8 if name == "ecmp" else 1)
        assert time_scale(t) == pytest.approx(100_000 / per_plane_mbps), name
        assert base_rtt_s(t, 0, t.hosts - 1) * per_plane_mbps == pytest.approx(
            0.0654 * 20), name


def test_zero_turns_the_latencies_off():
    t = from_mapping({"planes": 2, "leaves_per_plane": 2, "spines_per_plane": 2,
                      "hosts": 4, "nic_latency_us": 0, "switch_latency_us": 0}, "t.yaml", "t")
    assert one_way_s(t, 3) == 0 and bdp_packets(t, 4096) == 0


def test_the_delay_line_holds_twice_the_line_rate_over_the_longest_one_way():
    t = load("default")
    # 8 ports x 20 Mb/s = 20 MB/s; 32.7 ms one way across leaves; 4 frames of slack.
    assert delay_ring_bytes(t) == int(2 * 20e6 * 0.0327) + 4 * 9014
    assert delay_line_bytes(t) == 2 * delay_ring_bytes(t)  # same leaf and across
    assert delay_line_bytes(t.slowed(20)) == delay_line_bytes(t)  # rate / k, time x k
    assert delay_line_bytes(t.without_latency()) == 0


def test_a_budget_below_the_delay_line_names_nic_memory_mib_and_the_least_that_fits():
    with pytest.raises(ConfigError) as e:
        from_mapping({"planes": 8, "leaves_per_plane": 2, "spines_per_plane": 2,
                      "hosts": 4, "nic_memory_mib": 2}, "t.yaml", "t")
    msg = str(e.value)
    assert "t.yaml" in msg and "'nic_memory_mib' = 2" in msg and "at least 3" in msg
    # Without latency there is no delay line, and 2 MiB is a valid budget.
    assert from_mapping({"planes": 8, "leaves_per_plane": 2, "spines_per_plane": 2,
                         "hosts": 4, "nic_memory_mib": 2, "nic_latency_us": 0,
                         "switch_latency_us": 0}, "t.yaml", "t").nic_memory_mib == 2


@pytest.mark.parametrize(("field", "value", "words"), [
    ("scale", 0, "must be a number >= 1"),
    ("scale", "big", "must be a number >= 1"),
    ("nic_latency_us", -1, "must be 0 (off) to 500"),
    ("switch_latency_us", 501, "must be 0 (off) to 500"),
    ("switch_latency_us", True, "must be 0 (off) to 500"),
])
def test_a_bad_latency_or_scale_names_the_field_and_the_fix(field, value, words):
    with pytest.raises(ConfigError) as e:
        from_mapping({"planes": 2, "leaves_per_plane": 2, "spines_per_plane": 2,
                      "hosts": 4, field: value}, "t.yaml", "t")
    msg = str(e.value)
    assert "t.yaml" in msg and field in msg and words in msg


def test_a_slowed_run_states_its_full_speed_times_against_the_papers():
    t = load("default")
    # a run slowed 4 times reports the fabric's own times at full speed
    d = describe(t.slowed(4), slowdown=4)
    assert d["time_scale"] == 5000 and d["latency"]
    assert d["slowdown"] == 4
    assert d["base_rtt_s"]["cross_leaf"] == pytest.approx(0.0654)
    assert describe(t) == {**d, "slowdown": 1.0}
    assert on_paper(0.0654, d) == "65.4 ms here = 13.1 µs on the paper's fabric"
    assert on_paper(12.3, d) == "12.3 s here = 2.46 ms on the paper's fabric"
    line = scale_line(d)
    assert "1:5000" in line and line == scale_line(describe(t))  # the same fabric
    assert "65.4 ms here = 13.1 µs" in line and "50.9 ms within a leaf" in line
    off = from_mapping({"planes": 2, "leaves_per_plane": 2, "spines_per_plane": 2,
                        "hosts": 4, "nic_latency_us": 0, "switch_latency_us": 0},
                       "t.yaml", "t")
    assert not describe(off)["latency"] and "Fixed latency off" in scale_line(describe(off))
