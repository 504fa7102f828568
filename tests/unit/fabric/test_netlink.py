"""pyroute2 extended: the seg6local flavors encode what iproute2 sends and decode back;
htb's rate tables come from a cache, the same as pyroute2 computes."""

import socket

import pytest
from pyroute2.netlink import nla
from pyroute2.netlink.rtnl.rtmsg import rtmsg
from pyroute2.netlink.rtnl.tcmsg.common import nla_plus_rtab

from mrcemu.fabric import netlink


def build() -> rtmsg:
    msg = rtmsg()
    msg["header"]["type"] = 24
    msg["family"] = socket.AF_INET6
    msg["dst_len"] = 48
    msg["attrs"] = [("RTA_DST", "fcbb:bb00:801::"), ("RTA_OIF", 3),
                    ("RTA_ENCAP_TYPE", netlink.LWTUNNEL_ENCAP_SEG6_LOCAL),
                    ("RTA_ENCAP", netlink.end_next_csid_encap())]
    msg.encode()
    return msg


def test_flavors_nest_is_marked_nested_with_the_uapi_numbers():
    data = build().data
    # SEG6_LOCAL_FLAVORS (11) | NLA_F_NESTED, holding OPERATION=next-csid bit 4,
    # LCBLOCK_BITS=32 and LCNODE_FN_BITS=16.
    nest = (11 | 0x8000).to_bytes(2, "little")
    i = data.index(nest)
    assert data[i - 2:i] == (28).to_bytes(2, "little")
    body = data[i + 2:i + 26]
    assert body[:8] == b"\x08\x00\x01\x00" + (16).to_bytes(4, "little")
    assert body[8:13] == b"\x05\x00\x02\x00\x20"
    assert body[16:21] == b"\x05\x00\x03\x00\x10"
    # The action is End (1), not 0: pyroute2 maps it by name.
    assert b"\x08\x00\x01\x00\x01\x00\x00\x00" in data


def test_decode_round_trip():
    raw = build().data
    back = rtmsg(raw)
    back.decode()
    encap = back.get_attr("RTA_ENCAP")
    assert encap.get_attr("SEG6_LOCAL_ACTION") == 1
    flv = encap.get_attr("SEG6_LOCAL_FLAVORS")
    assert flv.get_attr("SEG6_LOCAL_FLV_OPERATION") == netlink.SEG6_LOCAL_FLV_OP_NEXT_CSID
    assert flv.get_attr("SEG6_LOCAL_FLV_LCBLOCK_BITS") == 32
    assert flv.get_attr("SEG6_LOCAL_FLV_LCNODE_FN_BITS") == 16


def _parms(rate: int, mtu: int, kind: str = "rate") -> nla:
    p = nla_plus_rtab.parms()
    p[kind], p[f"{kind}_cell_log"], p[f"{kind}_mpu"], p["mtu"] = rate, 0, 0, mtu
    return p


@pytest.mark.parametrize("rate,mtu", [(2_500_000, 0), (2_500_000, 9000), (25_000, 1600),
                                      (125_000_000, 9000)])
def test_htb_rate_tables_from_the_cache_are_pyroute2s_own(rate, mtu):
    for _ in range(2):  # the first computes and keeps, the second is a hit
        ours, theirs = _parms(rate, mtu), _parms(rate, mtu)
        assert netlink._cached_calc_rtab(ours, "rate") == netlink._calc_rtab(theirs, "rate")
        assert ours["rate_cell_log"] == theirs["rate_cell_log"]
        assert ours["rate_cell_align"] == theirs["rate_cell_align"] == -1
    # a different rate is a different table, not the cached one
    other = netlink._cached_calc_rtab(_parms(rate * 2, mtu), "rate")
    assert other != netlink._calc_rtab(_parms(rate, mtu), "rate")


def test_pyroute2_uses_the_cache():
    assert nla_plus_rtab.parms.calc_rtab is netlink._cached_calc_rtab
