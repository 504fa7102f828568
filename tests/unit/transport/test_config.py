"""A fabric's transport config: clocks scaled to its links, everything else as given."""

import json
from dataclasses import dataclass

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.topology import load
from mrcemu.transport.config import (
    HOST_SLACK,
    RATE_CLOCKS,
    TransportConfig,
    trim_bounded_delay,
)


@dataclass
class Fabric:
    mtu: int = 9000
    host_link_mbps: float = 20.0
    fabric_link_mbps: float = 20.0
    trim_threshold_bytes: int = 60_000
    buffer_bytes: int = 200_000


def test_on_reference_links_the_config_is_the_default():
    assert TransportConfig.for_topology(Fabric(), seed=1) == TransportConfig(seed=1)
    assert TransportConfig.for_topology(load("default")) == TransportConfig()


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
    # The reorder window is what the trim thresholds let a packet queue: k times longer
    # on k times slower links.
    assert cfg.reorder_window == pytest.approx(base.reorder_window * k)


def test_the_reorder_window_is_how_long_the_trim_thresholds_let_a_packet_wait():
    # 60 kB at 20 Mb/s is 24 ms a queue: two fabric queues and the last hop.
    assert trim_bounded_delay(Fabric()) == pytest.approx(0.072)
    # Halving the fabric links doubles the wait at their two queues.
    assert trim_bounded_delay(Fabric(fabric_link_mbps=10.0)) == pytest.approx(0.120)
    # The window adds the host slack a faithful run allows, scaled like the clocks.
    assert TransportConfig.for_topology(Fabric(trim_threshold_bytes=30_000)).reorder_window \
        == pytest.approx(0.036 + HOST_SLACK)
    assert TransportConfig.for_topology(Fabric(host_link_mbps=10.0)).reorder_window \
        == pytest.approx(0.048 + 0.048 + 2 * HOST_SLACK)
    # The reference fabric's window is the config's default.
    assert TransportConfig.for_topology(Fabric()).reorder_window \
        == pytest.approx(TransportConfig().reorder_window)
    # With trimming off, a queue holds up to its buffer before it drops.
    assert trim_bounded_delay(Fabric(trim_threshold_bytes=0)) == pytest.approx(0.240)


def test_the_large_topology_runs_a_four_times_slower_clock():
    cfg = TransportConfig.for_topology(load("large"))
    assert cfg.min_rto == pytest.approx(4 * TransportConfig().min_rto)
    assert cfg.reorder_window == pytest.approx(4 * TransportConfig().reorder_window)


def test_a_slowed_run_slows_routing_reconvergence_too():
    topo = load("default").slowed(10)
    cfg = TransportConfig.for_topology(topo, slowdown=10)
    base = TransportConfig()
    assert cfg.roce_reconvergence == pytest.approx(10 * base.roce_reconvergence)
    assert cfg.min_rto == pytest.approx(10 * base.min_rto)  # from the slowed links


def test_ev_planes_are_distinct_planes_and_survive_json():
    cfg = TransportConfig(ev_planes=(2, 5))
    assert TransportConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg
    for bad in ((1, 1), (-1,), [2], (True,)):
        with pytest.raises(MrcemuError, match="ev_planes"):
            TransportConfig(ev_planes=bad)
