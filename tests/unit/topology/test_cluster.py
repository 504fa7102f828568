"""The cluster file and its placements (mrcemu/topology/cluster.py): pure, no servers."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from mrcemu.errors import ConfigError
from mrcemu.topology import load as load_topology
from mrcemu.topology.cluster import LOCAL, Cluster, Server, from_mapping, load, place, to_mapping

TWO = {"servers": [{"name": "local", "address": LOCAL},
                   {"name": "srv1", "address": "fd6d:7263:656d::2", "underlay": "u0"}],
       "placement": "plane"}


def write(tmp_path, data) -> str:
    p = tmp_path / "c.yaml"
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(p)


def test_a_file_round_trips_and_defaults_are_filled(tmp_path):
    c = load(write(tmp_path, TWO))
    assert c.servers == (Server("local", LOCAL, "root", ""),
                         Server("srv1", "fd6d:7263:656d::2", "root", "u0"))
    assert c.servers[0].local and not c.servers[1].local and c.placement == "plane"
    assert from_mapping(to_mapping(c), c.source) == c


def test_a_servers_python_is_kept_for_its_agent(tmp_path):
    data = {**TWO, "servers": [TWO["servers"][0], {**TWO["servers"][1],
                                                   "python": "/opt/m/.venv/bin/python"}]}
    c = load(write(tmp_path, data))
    assert c.servers[1].python == "/opt/m/.venv/bin/python" and c.servers[0].python == ""
    assert from_mapping(to_mapping(c), c.source) == c


@pytest.mark.parametrize("patch,field,words", [
    ({"servers": []}, "servers", "list of servers"),
    ({"servers": [{"name": "a", "address": LOCAL}, {"name": "a", "address": "10.0.0.2"}]},
     "servers[1].name", "twice"),
    ({"servers": [{"name": "Srv 1", "address": LOCAL}]}, "servers[0].name", "lowercase"),
    ({"servers": [{"name": "a", "address": "10.0.0.2"}, {"name": "b", "address": "10.0.0.2"}]},
     "servers[1].address", "another server's"),
    ({"servers": [{"name": "a", "address": "not an address!"}]}, "servers[0].address",
     "neither an IP address nor a host name"),
    ({"servers": [{"name": "a", "address": LOCAL, "port": 22}]}, "servers[0].port",
     "known fields are name, address"),
    ({"servers": [{"name": "a", "address": "10.0.0.2", "underlay": "a/b"}]},
     "servers[0].underlay", "eth0"),
    ({"servers": [{"name": "a", "address": "10.0.0.2", "python": "venv/bin/python"}]},
     "servers[0].python", "absolute path"),
    ({"placement": "spine"}, "placement", "plane (hosts on the first server"),
    ({"ssh_key": 3}, "ssh_key", "file path"),
    ({"servrs": []}, "servrs", "known fields are servers"),
])
def test_bad_files_name_the_file_the_field_and_the_fix(tmp_path, patch, field, words):
    p = write(tmp_path, {**TWO, **patch})
    with pytest.raises(ConfigError) as e:
        load(p)
    assert e.value.source == p and e.value.field == field, str(e.value)
    assert words in str(e.value) and e.value.exit_code == 2


def test_a_missing_file_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read.*cluster YAML file"):
        load(str(tmp_path / "nope.yaml"))


def test_plane_placement_keeps_hosts_home_and_gives_each_plane_a_server():
    topo = load_topology("default")
    c = Cluster("<t>", tuple(Server(f"s{i}", LOCAL if i == 0 else f"10.0.0.{i}")
                             for i in range(9)), "plane")
    where = place(topo, c)
    assert {where[f"h{h}"] for h in range(8)} == {"s0"}
    for p in range(8):  # every switch of plane p on server p + 1, and only those
        assert {where[f"p{p}l{i}"] for i in range(2)} | {where[f"p{p}s{j}"] for j in range(4)} \
            == {f"s{p + 1}"}
    # two servers: every plane on the second; only host-leaf links cross
    two = place(topo, Cluster("<t>", c.servers[:2], "plane"))
    assert Counter(two.values()) == {"s0": 8, "s1": 48}


def test_rack_placement_puts_a_leaf_group_with_its_hosts_and_spreads_the_spines():
    topo = load_topology("default")
    c = Cluster("<t>", (Server("a", LOCAL), Server("b", "10.0.0.2")), "rack")
    where = place(topo, c)
    for h in range(8):
        assert where[f"h{h}"] == ("a" if topo.leaf_of(h) == 0 else "b")
        assert all(where[f"p{p}l{topo.leaf_of(h)}"] == where[f"h{h}"] for p in range(8))
    spines = Counter(where[f"p{p}s{j}"] for p in range(8) for j in range(4))
    assert spines == {"a": 16, "b": 16}
    assert len(where) == 8 + 8 * 6
