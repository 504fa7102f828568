"""The table of what mrcemu needs from a machine, and what `up` refuses without."""

from __future__ import annotations

from mrcemu import preflight
from mrcemu.preflight import CAPABILITIES, missing_for_fabric

ALL = {c.key: None for c in CAPABILITIES}


def test_every_capability_names_its_fix_and_what_is_lost():
    assert len({c.key for c in CAPABILITIES}) == len(CAPABILITIES)
    for c in CAPABILITIES:
        assert c.fix and c.without and c.used_for, c.key


def test_a_machine_with_everything_misses_nothing():
    assert missing_for_fabric(ALL) == []


def test_the_fabric_does_without_the_engines_and_optional_parts_but_not_htb():
    found = ALL | {"usid_kernel": "no seg6local", "vxlan": "no", "perf": "no"}
    assert missing_for_fabric(found) == []
    lines = missing_for_fabric(found | {"htb": "Error: Specified qdisc kind is unknown."})
    assert len(lines) == 1 and "htb" in lines[0] and "CONFIG_NET_SCH_HTB" in lines[0]


def test_rows_say_found_or_what_is_missing_and_what_is_lost():
    rows = {r[0]: r for r in preflight.rows(ALL | {"vxlan": "unknown kind"})}
    assert rows["VXLAN"][1:3] == ("MISSING: unknown kind", "fabrics over several servers")
    assert rows["veth pairs"][1:3] == ("found", "-")


def test_the_docs_table_has_a_row_per_capability():
    md = preflight.markdown().splitlines()
    assert len(md) == 2 + len(CAPABILITIES)
    assert any("CONFIG_IPV6_SEG6_LWTUNNEL" in line for line in md)
