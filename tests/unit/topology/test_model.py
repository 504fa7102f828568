from pathlib import Path

import pytest

from mrcemu.errors import ConfigError
from mrcemu.topology import load
from mrcemu.topology.model import TOPOLOGY_DIR

GOOD = "planes: 2\nleaves_per_plane: 2\nspines_per_plane: 2\nhosts: 4\n"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "t.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", ["small", "default", "large", "rack4", "ecmp"])
def test_shipped_topologies_load(name):
    t = load(TOPOLOGY_DIR / f"{name}.yaml")
    assert t.hosts % t.leaves_per_plane == 0


def test_default_shape():
    t = load("default")
    assert (t.planes, t.leaves_per_plane, t.spines_per_plane, t.hosts) == (8, 2, 4, 8)
    assert t.paths_between(0, 7) == 32
    assert t.paths_between(0, 1) == 8
    assert load("large").link_count == 1024


@pytest.mark.parametrize("text,field,words", [
    (GOOD.replace("planes: 2", "planes: 17"), "planes", "4-bit"),
    (GOOD.replace("hosts: 4", "hosts: 2048"), "hosts", "10-bit"),
    (GOOD.replace("leaves_per_plane: 2", "leaves_per_plane: 1025"), "leaves_per_plane", "10-bit"),
    (GOOD.replace("spines_per_plane: 2", "spines_per_plane: 1024"), "spines_per_plane", "10-bit"),
    (GOOD.replace("hosts: 4", "hosts: 5"), "hosts", "not divisible"),
    (GOOD + "host_link_mbps: -5\n", "host_link_mbps", "positive"),
    (GOOD + "fabric_link_mbps: fast\n", "fabric_link_mbps", "number"),
    (GOOD + "plane: 3\n", "plane", "unknown field"),
    (GOOD.replace("hosts: 4\n", ""), "hosts", "required"),
    (GOOD + "mtu: 500\n", "mtu", "1280"),
    (GOOD + "trim_threshold_bytes: 900000\n", "trim_threshold_bytes", "above buffer"),
    (GOOD + "ecn_threshold_bytes: -1\n", "ecn_threshold_bytes", "zero"),
    (GOOD.replace("planes: 2", "planes: 2.5"), "planes", "whole number"),
    (GOOD + "routing: bgp\n", "routing", "one of usid, ecmp"),
    (GOOD + "routing: ecmp\n", "routing", "one plane, not 2"),
    (GOOD + "usid_engine: ebpf\n", "usid_engine", "one of auto, kernel, bpf"),
    (GOOD.replace("spines_per_plane: 2", "spines_per_plane: 1023"), "spines_per_plane",
     "reserved (ECMP"),
    ("- just\n- a list\n", "<document>", "mapping"),
    ("planes: [1,\n", "<yaml>", "YAML"),
])
def test_bad_topology_names_file_field_and_fix(tmp_path, text, field, words):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load(p)
    msg = str(e.value)
    assert e.value.field == field
    assert msg.startswith(str(p))
    assert words in msg
    assert "fix:" in msg
    assert "\n" not in msg


def test_unknown_field_suggests_the_close_one(tmp_path):
    with pytest.raises(ConfigError, match="did you mean 'planes'"):
        load(write(tmp_path, GOOD + "planez: 3\n"))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        load(tmp_path / "nope.yaml")
