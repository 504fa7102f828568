from ipaddress import IPv6Address

from hypothesis import given
from hypothesis import strategies as st

from mrcemu.topology.addressing import (
    Kind,
    container,
    container_usids,
    end_next_csid,
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


def test_end_next_csid_shifts_only_its_own_usid():
    own = usid(0, Kind.LEAF, 1)
    path = container(own, usid(0, Kind.SPINE, 2), usid(0, Kind.HOST, 3))
    assert end_next_csid(path, own) == container(usid(0, Kind.SPINE, 2), usid(0, Kind.HOST, 3))
    other = container(usid(0, Kind.SPINE, 2), own)
    assert end_next_csid(other, own) == other  # not this node's End: untouched
    outside = IPv6Address("2001:db8::1")
    assert end_next_csid(outside, own) == outside


def test_end_next_csid_drops_what_has_nothing_after_its_usid():
    own = usid(1, Kind.SPINE, 0)
    assert end_next_csid(container(own), own) is None
    # the argument is every bit after the node's uSID: a zero slot then a uSID is not empty
    gap = IPv6Address(int(container(own)) | 0x5 << 48)  # slots: own, 0, 5
    assert end_next_csid(gap, own) == IPv6Address(int(container(0)) | 0x5 << 64)


def test_end_next_csid_repeats_while_the_active_usid_is_its_own():
    own = usid(0, Kind.LEAF, 1)
    assert end_next_csid(container(own, own, 0x2002), own) == container(0x2002)
    assert end_next_csid(container(own, own), own) is None
