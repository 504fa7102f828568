"""A fabric's transport config: clocks scaled to its links, everything else as given."""

import json
from dataclasses import dataclass, replace

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.topology import latency, load
from mrcemu.transport.config import (
    HOST_ROUND_TRIP,
    HOST_SLACK,
    RATE_CLOCKS,
    TransportConfig,
)


@dataclass
class Fabric:
    mtu: int = 9000
    host_link_mbps: float = 20.0
    fabric_link_mbps: float = 20.0
    trim_threshold_bytes: int = 60_000
    buffer_bytes: int = 200_000
    planes: int = 8
    leaves_per_plane: int = 2
    scale: float | None = None
    nic_latency_us: float = 0.0  # no fixed latency: serialization and queueing alone
    switch_latency_us: float = 0.0

    def leaf_of(self, host: int) -> int:
        return host // 4


def test_on_reference_links_without_latency_the_config_is_the_default():
    assert TransportConfig.for_topology(Fabric(), seed=1) == TransportConfig(seed=1)
    off = replace(load("default"), nic_latency_us=0, switch_latency_us=0)
    assert TransportConfig.for_topology(off) == TransportConfig()


def test_the_scale_models_latency_lengthens_the_timeouts_and_widens_the_windows():
    # default at 1:5000: a 65.4 ms fixed round trip across leaves, and 319 packets of
    # 4 KiB in flight per host over it at line rate (the paper's ~317).
    base, cfg = TransportConfig(), TransportConfig.for_topology(load("default"))
    assert cfg.min_rto == pytest.approx(base.min_rto + 0.0654)
    assert cfg.max_rto == pytest.approx(base.max_rto + 0.0654)
    assert cfg.roce_timeout == pytest.approx(base.roce_timeout + 0.0654)
    assert cfg.init_cwnd == 319 * 4096 and cfg.max_cwnd == 2 * 319 * 4096
    assert cfg.rcv_window >= 319
    # A RoCE QP is on one of the 8 ports: its window carries that port's 40 packets over
    # the fixed round trip on top of what it carried without latency.
    assert cfg.roce_window == base.roce_window + 40
    # The other clocks are the links' as before (target_delay is queueing, above it).
    assert (cfg.ack_slack, cfg.target_delay, cfg.sack_delay) == (
        base.ack_slack, base.target_delay, base.sack_delay)
    # An unloaded round trip reads the fixed one: NSCC's base RTT starts there (without
    # latency the hosts' processing is most of a round trip, and it does not).
    assert cfg.rtt_known and not base.rtt_known


def test_the_fixed_latency_is_the_base_rtt_only_where_the_hosts_part_is_small_beside_it():
    # At 10 Gb/s (the model at 1:10) the fixed round trip is 0.10-0.13 ms, under what
    # the emulated NICs add to every round trip: an unloaded sample reads mostly the
    # hosts' processing, and NSCC must take its base from the samples (starting at the
    # fixed 0.10 ms it read 0.18 ms of every sample as queue). At 160 Mb/s (ecmp) the
    # fixed round trip is 8 ms, 27 of the hosts' round trips.
    pair = replace(load("default"), host_link_mbps=10_000, fabric_link_mbps=10_000)
    assert latency.longest_rtt_s(pair) < HOST_ROUND_TRIP
    assert not TransportConfig.for_topology(pair).rtt_known
    ecmp = load("ecmp")
    assert latency.longest_rtt_s(ecmp) > 20 * HOST_ROUND_TRIP
    assert TransportConfig.for_topology(ecmp).rtt_known


def test_a_roce_qps_window_is_its_ports_share_of_the_bdp_on_the_one_plane_ecmp_fabric():
    # ecmp: one plane at 8 x 20 Mb/s, so its one port has the host's whole BDP in flight.
    topo = load("ecmp")
    cfg = TransportConfig.for_topology(topo)
    bdp = latency.bdp_packets(topo, cfg.pmtu)
    assert topo.planes == 1 and bdp > 300
    assert cfg.roce_window == TransportConfig().roce_window + bdp


@pytest.mark.parametrize("mbps, k", [(2.0, 10.0), (5.0, 4.0), (40.0, 0.5)])
def test_clocks_scale_with_the_wire_time_of_a_packet(mbps, k):
    base = TransportConfig()
    cfg = TransportConfig.for_topology(
        Fabric(host_link_mbps=mbps, fabric_link_mbps=mbps), seed=3)
    for name in RATE_CLOCKS:
        assert getattr(cfg, name) == pytest.approx(getattr(base, name) * k), name
    # Not clocks of the link: windows, counts, the seed, routing's reconvergence.
    assert (cfg.pmtu, cfg.sack_every, cfg.rcv_window, cfg.roce_window, cfg.seed) == (
        base.pmtu, base.sack_every, base.rcv_window, base.roce_window, 3)
    assert cfg.roce_reconvergence == base.roce_reconvergence


def test_the_ack_slack_is_what_a_faithful_run_lets_the_hosts_add_scaled_like_the_clocks():
    assert TransportConfig().ack_slack == HOST_SLACK
    assert TransportConfig.for_topology(Fabric(host_link_mbps=10.0)).ack_slack \
        == pytest.approx(2 * HOST_SLACK)


def test_the_large_topology_runs_a_four_times_slower_clock():
    cfg = TransportConfig.for_topology(load("large"))
    # 1:20000: its fixed round trip is four times default's too
    assert cfg.min_rto == pytest.approx(4 * (TransportConfig().min_rto + 0.0654))
    assert cfg.ack_slack == pytest.approx(4 * TransportConfig().ack_slack)


def test_a_slowed_run_slows_routing_reconvergence_too():
    topo = load("default").slowed(10)
    cfg = TransportConfig.for_topology(topo, slowdown=10)
    base = TransportConfig()
    assert cfg.roce_reconvergence == pytest.approx(10 * base.roce_reconvergence)
    # from the slowed links, and the latency slowed with them
    assert cfg.min_rto == pytest.approx(10 * (base.min_rto + 0.0654))


def test_ev_planes_are_distinct_planes_and_survive_json():
    cfg = TransportConfig(ev_planes=(2, 5))
    assert TransportConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
    for bad in ((1, 1), (-1,), [2], (True,)):
        with pytest.raises(MrcemuError, match="ev_planes"):
            TransportConfig(ev_planes=bad)


def test_dcqcns_clocks_are_the_references_stretched_by_the_scale_model():
    from mrcemu.topology import latency, load
    from mrcemu.transport import dcqcn

    for name, k in (("ecmp", 1), ("ecmp", 32), ("rack4-ecmp", 4)):
        topo = load(name).slowed(k)
        cfg = TransportConfig.for_topology(topo, slowdown=k)
        scale = latency.time_scale(topo)
        assert cfg.dcqcn_cnp_interval == pytest.approx(dcqcn.CNP_INTERVAL_US * 1e-6 * scale)
        assert cfg.dcqcn_increase_interval == pytest.approx(
            dcqcn.INCREASE_INTERVAL_US * 1e-6 * scale)
        # a few round trips each, as on the fabric the model stands for
        rtt = latency.longest_rtt_s(topo)
        assert 3 < cfg.dcqcn_cnp_interval / rtt < 5
        assert cfg.dcqcn_increase_bytes == dcqcn.INCREASE_BYTES  # bytes do not scale
