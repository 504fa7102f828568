"""Fabrics generated from a few numbers: the files are what the generator gives, each
loads, and each ECMP twin is its MRC fabric's aggregate bandwidth on one plane."""

from __future__ import annotations

import pytest

from mrcemu.topology import latency, load
from mrcemu.topology.model import TOPOLOGY_DIR
from mrcemu.topology.sizes import SIZES, Size, files


@pytest.mark.parametrize("name", sorted(files()))
def test_each_generated_file_is_what_the_generator_gives(name):
    assert (TOPOLOGY_DIR / name).read_text() == files()[name], "run: make generate"


@pytest.mark.parametrize("name", sorted(SIZES))
def test_a_twin_carries_its_fabrics_bandwidth_on_one_hashed_plane(name):
    s, mrc, twin = SIZES[name], load(name), load(f"{name}-ecmp")
    assert (mrc.hosts, mrc.planes, mrc.routing) == (s.hosts, s.planes, "usid")
    assert mrc.leaves_per_plane * s.hosts_per_leaf == s.hosts
    assert mrc.spines_per_plane == twin.spines_per_plane == s.spines
    assert (twin.planes, twin.routing, twin.trim_threshold_bytes) == (1, "ecmp", 0)
    assert twin.host_link_mbps == mrc.planes * mrc.host_link_mbps
    assert twin.buffer_bytes == mrc.planes * mrc.buffer_bytes
    # one scale model: the twin's port stands for all of its fabric's plane ports
    assert latency.time_scale(twin) == latency.time_scale(mrc)


def test_larger_fabrics_get_slower_ports_the_machine_can_keep_up_with():
    rates = [SIZES[n].port_mbps * SIZES[n].hosts for n in SIZES]
    assert SIZES["rack4"].port_mbps == 20 and SIZES["rack8x8"].port_mbps == 5
    assert len(set(rates)) == 1  # the same packets a second at line rate, every size


def test_a_size_that_cannot_be_built_is_refused():
    with pytest.raises(ValueError, match="do not fill"):
        Size(30, 8, 8)
    with pytest.raises(ValueError, match="oversubscribed"):
        Size(32, 8, 4)
