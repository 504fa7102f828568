"""A fabric's transport config: clocks scaled to its links, everything else as given."""

import json
from dataclasses import dataclass

import pytest

from mrcemu.errors import MrcemuError
from mrcemu.topology import load
from mrcemu.transport.config import HOST_SLACK, RATE_CLOCKS, TransportConfig


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


def test_the_ack_slack_is_what_a_faithful_run_lets_the_hosts_add_scaled_like_the_clocks():
    assert TransportConfig().ack_slack == HOST_SLACK
    assert TransportConfig.for_topology(Fabric(host_link_mbps=10.0)).ack_slack \
        == pytest.approx(2 * HOST_SLACK)


def test_the_large_topology_runs_a_four_times_slower_clock():
    cfg = TransportConfig.for_topology(load("large"))
    assert cfg.min_rto == pytest.approx(4 * TransportConfig().min_rto)
    assert cfg.ack_slack == pytest.approx(4 * TransportConfig().ack_slack)


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
