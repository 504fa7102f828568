from ipaddress import IPv6Address

from hypothesis import given
from hypothesis import strategies as st

from mrcemu.topology.addressing import (
    Kind,
    container,
    container_usids,
    host_address,
    plane_prefix,
    shift,
    split_usid,
    usid,
    usid_prefix,
)

planes = st.integers(0, 15)
kinds = st.sampled_from(list(Kind))
indexes = st.integers(0, 1023)


@given(planes, kinds, indexes)
def test_usid_round_trips_and_is_never_end_of_carrier(p, k, i):
    u = usid(p, k, i)
    assert 0 < u <= 0xFFFF
    assert split_usid(u) == (p, k, i)


def test_design_examples():
    assert str(host_address(0, 7)) == "fcbb:bb00:c07::"
    assert str(usid_prefix(usid(2, Kind.SPINE, 1))) == "fcbb:bb00:2801::/48"
    assert str(plane_prefix(3)) == "fcbb:bb00:3000::/36"


@given(st.lists(st.integers(1, 0xFFFF), min_size=1, max_size=6))
def test_shift_consumes_one_usid(us):
    c = container(*us)
    assert container_usids(c) == us
    assert container_usids(shift(c)) == us[1:]


@given(planes, indexes)
def test_host_address_is_inside_its_plane_prefix_only(p, h):
    a = host_address(p, h)
    assert a in plane_prefix(p)
    assert all(a not in plane_prefix(q) for q in range(16) if q != p)


def test_container_is_in_block():
    assert IPv6Address("fcbb:bb00::") <= container(1) < IPv6Address("fcbb:bb01::")
