"""The seg6local flavors extension encodes what iproute2 sends, and decodes it back."""

import socket

from pyroute2.netlink.rtnl.rtmsg import rtmsg

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
