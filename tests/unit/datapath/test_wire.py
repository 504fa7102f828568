"""The compiled framing and parsing are the Python codec's, byte for byte and reason for
reason: every packet type, encapsulated or plain, trimmed, snapped, mutated or random."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcemu import datapath
from mrcemu.wire import codec, icrc
from mrcemu.wire.constants import MRC_DATA, Dscp, Opcode
from tests.unit.wire.strategies import packets

ADDR = st.binary(min_size=16, max_size=16)
MANY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn, *args, **kw):
    """What a decoder made of the bytes: the Decoded, or the DecodeError's reason."""
    try:
        return fn(*args, **kw)
    except codec.DecodeError as e:
        return ("error", e.reason)


def both_encodings(p: dict, via: bytes | None, delivered: bytes | None) -> bytes:
    kw = dict(sport=p["sport"], flow_label=p["flow_label"], dscp=p["dscp"], ecn=p["ecn"],
              bth=p["bth"], headers=p["headers"], payload=p["payload"], hlim=p["hlim"],
              via=via, delivered=delivered)
    ref = codec.encode(p["src"], p["dst"], **kw)
    assert datapath.encode(p["src"], p["dst"], **kw) == ref
    return ref


@MANY
@given(packets(), st.one_of(st.none(), ADDR), st.one_of(st.none(), ADDR))
def test_encode_is_byte_identical_to_the_codec(p, via, delivered):
    both_encodings(p, via, delivered)


@MANY
@given(packets(opcodes=sorted(MRC_DATA)), ADDR, st.one_of(st.none(), st.integers(0, 0xFFFF)))
def test_encode_data_is_byte_identical_to_the_codec(p, via, ts):
    h = p["headers"]
    kw = dict(sport=p["sport"], flow_label=p["flow_label"], dscp=p["dscp"], ecn=p["ecn"],
              opcode=p["bth"]["opcode"], dqpn=p["bth"]["dqpn"], psn=p["bth"]["psn"],
              msn=h["METH"]["msn"], rqmsn=h["METH"]["rqmsn"], va=h["RETH"]["va"],
              rkey=h["RETH"]["rkey"], dmalen=h["RETH"]["dmalen"], payload=p["payload"],
              ackreq=p["bth"]["ackreq"], rtx=p["bth"]["rtx"], timestamp=ts,
              imm=h["ImmDt"]["imm"] if "ImmDt" in h else None, hlim=p["hlim"], via=via)
    ref = codec.encode_data(p["src"], p["dst"], **kw)
    assert datapath.encode_data(p["src"], p["dst"], **kw) == ref
    assert outcome(datapath.decode, ref) == outcome(codec.decode, ref)


@MANY
@given(packets(opcodes=sorted(MRC_DATA)), ADDR, st.integers(0, 0xFFFF))
def test_frame_data_from_a_template_is_byte_identical_to_the_codec(p, via, ts):
    # What the requester sends: the codec's body with the per-packet fields zero, those
    # written by the compiled framing (hop limit 64, rqmsn 0, as the requester sends).
    h, op = p["headers"], p["bth"]["opcode"]
    imm = h["ImmDt"]["imm"] if "ImmDt" in h else None
    fields = dict(psn=p["bth"]["psn"], msn=h["METH"]["msn"], va=h["RETH"]["va"],
                  rkey=h["RETH"]["rkey"], dmalen=h["RETH"]["dmalen"])
    ref = codec.encode_data(p["src"], p["dst"], sport=p["sport"], flow_label=p["flow_label"],
                            dscp=p["dscp"], ecn=p["ecn"], opcode=op, dqpn=p["bth"]["dqpn"],
                            payload=p["payload"], ackreq=p["bth"]["ackreq"],
                            rtx=p["bth"]["rtx"], timestamp=ts, imm=imm, via=via, **fields)
    template = codec.data_body(opcode=op, dqpn=p["bth"]["dqpn"], psn=0, msn=0, va=0, rkey=0,
                               dmalen=0, timestamp=0, imm=None if imm is None else 0)
    args = (template, p["src"], p["dst"], via, p["sport"], p["flow_label"],
            (p["dscp"] << 2) | p["ecn"], *fields.values(), p["bth"]["ackreq"],
            p["bth"]["rtx"], ts, imm or 0, p["payload"])
    got = datapath.frame_data(*args)
    assert got == ref
    assert codec.frame_data(*args) == ref  # the reference the bench swaps in


def test_frame_data_refuses_what_is_not_a_data_template():
    a = bytes(16)
    control = codec.body({"opcode": Opcode.RELIABILITY_SACK}, {"SETH": {}, "CC_STATE": {}})
    for bad in (b"", control, control[:12]):
        with pytest.raises(ValueError, match="template"):
            datapath.frame_data(bad, a, a, None, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b"")


@MANY
@given(packets(), st.one_of(st.none(), ADDR), st.booleans())
def test_decode_returns_what_the_codec_returns(p, via, verify):
    pkt = both_encodings(p, via, None)
    got = outcome(datapath.decode, pkt, verify)
    assert got == outcome(codec.decode, pkt, verify)
    if verify and not isinstance(got, tuple) and not got.trimmed:
        assert got.icrc_ok is True and got.payload == p["payload"]


@MANY
@given(packets(opcodes=sorted(MRC_DATA)), st.one_of(st.none(), ADDR),
       st.sampled_from([Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP]), st.booleans())
def test_trimmed_packets_decode_alike(p, via, dscp, keep_icrc_slot):
    pkt = bytearray(codec.trim(both_encodings({**p, "dscp": Dscp.TRIMMABLE}, via, None), dscp))
    if keep_icrc_slot:  # a switch may keep the ICRC's 4 bytes: every length grows by 4
        pkt += bytes(4)
        ip = 0 if via is None else 40
        for at in {0, ip, ip + 40}:  # IPv6 payload lengths, then UDP's
            struct.pack_into("!H", pkt, at + 4, struct.unpack_from("!H", pkt, at + 4)[0] + 4)
    got = outcome(datapath.decode, bytes(pkt))
    assert got == outcome(codec.decode, bytes(pkt))
    assert not isinstance(got, tuple) and got.trimmed


@MANY
@given(packets(), st.one_of(st.none(), ADDR), st.data())
def test_snapped_captures_decode_alike(p, via, data):
    pkt = both_encodings(p, via, None)
    keep = data.draw(st.integers(0, len(pkt)))
    snap = pkt[:keep]
    assert (outcome(datapath.decode, snap, wire_len=len(pkt))
            == outcome(codec.decode, snap, wire_len=len(pkt)))


@MANY
@given(packets(), st.one_of(st.none(), ADDR), st.data())
def test_mutated_packets_get_the_same_verdict(p, via, data):
    pkt = bytearray(both_encodings(p, via, None))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(pkt) - 1))
        pkt[i] = data.draw(st.integers(0, 255))
    pkt = bytes(pkt[:data.draw(st.integers(0, len(pkt)))])
    assert outcome(datapath.decode, pkt) == outcome(codec.decode, pkt)


@MANY
@given(st.binary(max_size=200))
def test_random_bytes_get_the_same_verdict(data):
    assert outcome(datapath.decode, data) == outcome(codec.decode, data)


@MANY
@given(st.binary(min_size=57, max_size=600))
def test_icrc_and_udp_checksum_equal_the_references(data):
    assert datapath.icrc(data) == icrc.crc(data)
    assert datapath.udp_checksum(data[:16], data[16:32], data[32:]) == codec.udp_checksum(
        data[:16], data[16:32], data[32:])


@MANY
@given(st.binary(max_size=5000), st.integers(0, 15), st.integers(0, 0xFFFFFFFF))
def test_the_folded_crc32_is_zlibs_at_every_length_and_alignment(data, skew, start):
    # The carry-less folding takes 64-byte steps and leaves a tail to the tables: every
    # length, misalignment and starting value must come out as zlib's.
    view = memoryview(bytes(skew) + data)[skew:]
    want = zlib.crc32(data, start)
    assert datapath.crc32(view, start) == want
    assert datapath.crc32(view, start, True) == want


def test_every_reason_is_reachable_and_named_as_the_codec_names_it():
    good = codec.encode(bytes(16), bytes(15) + b"\x01", sport=1, flow_label=2, dscp=0, ecn=0,
                        bth={"opcode": Opcode.RELIABILITY_NACK}, via=bytes(16))
    bad_icrc = good[:-1] + bytes([good[-1] ^ 1])
    unknown = bytearray(good)
    unknown[88] = 0x55
    cases = {"truncated": good[:59], "not_roce": b"\x45" + good[1:],
             "unknown_opcode": bytes(unknown), "bad_length": good[:-1], "bad_icrc": bad_icrc}
    for reason, pkt in cases.items():
        assert outcome(codec.decode, pkt) == ("error", reason)
        assert outcome(datapath.decode, pkt) == ("error", reason)


def test_bad_arguments_are_python_errors_not_crashes():
    with pytest.raises(ValueError):
        datapath.finish(b"short", bytes(16), 1, 0, 0, 64, b"")
    with pytest.raises(ValueError):
        datapath.icrc(b"\x60" * 20)
    with pytest.raises(ValueError):
        datapath.finish(bytes(16), bytes(16), 1, 0, 0, 64, b"", payload=bytes(70000))
