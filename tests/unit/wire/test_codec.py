"""The fast codec is byte-identical to the Scapy layers, for every packet type."""

import random
import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.all import raw
from scapy.contrib import roce
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import fuzz

from mrcemu.wire import codec, icrc, layers
from mrcemu.wire.constants import MRC_DATA, Dscp, Opcode
from tests.unit.wire.strategies import fast_packet, packets, scapy_packet

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(packets())
def test_fast_encode_is_byte_identical_to_scapy(p):
    assert fast_packet(p) == raw(scapy_packet(p))


@SETTINGS
@given(packets())
def test_fast_decode_of_scapy_bytes_returns_the_same_fields(p):
    wire = raw(scapy_packet(p))
    if p["dscp"] in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP) and p["bth"]["opcode"] in MRC_DATA:
        p["dscp"] = Dscp.TRIMMABLE  # a full-size packet with a trimmed DSCP is not trimmed
        wire = raw(scapy_packet(p))
    d = codec.decode(wire)
    assert (d.src, d.dst, d.sport, d.flow_label, d.dscp, d.ecn, d.hlim) == (
        p["src"], p["dst"], p["sport"], p["flow_label"], p["dscp"], p["ecn"], p["hlim"])
    assert d.bth == {**p["bth"], **{k: v for k, v in d.bth.items() if k not in p["bth"]}}
    assert d.headers == p["headers"]
    assert d.payload == p["payload"]
    assert d.icrc_ok


@pytest.mark.parametrize("op", [Opcode.WRITE_ONLY, Opcode.WRITE_LAST_IMM])
@pytest.mark.parametrize("ts", [None, 0x1234])
def test_data_fast_path_matches_generic_encoder(op, ts):
    src, dst = bytes(range(16)), bytes(range(16, 32))
    kw = dict(sport=0xC123, flow_label=9, dscp=4, ecn=2)
    imm = 77 if op == Opcode.WRITE_LAST_IMM else None
    fast = codec.encode_data(src, dst, **kw, opcode=op, dqpn=5, psn=1000, msn=3, va=1 << 40,
                             rkey=0xBEEF, dmalen=4096, payload=b"p" * 1024, ackreq=1, rtx=1,
                             timestamp=ts, imm=imm)
    hdrs = {"METH": {"rqmsn": 0, "msn": 3}, "RETH": {"va": 1 << 40, "rkey": 0xBEEF,
                                                    "dmalen": 4096}}
    if ts is not None:
        hdrs["TSETH"] = {"tx_timestamp": ts}
    if imm is not None:
        hdrs["ImmDt"] = {"imm": imm}
    generic = codec.encode(src, dst, **kw, bth={"opcode": op, "dqpn": 5, "psn": 1000,
                                                "ackreq": 1, "rtx": 1, "ts": int(ts is not None)},
                           headers=hdrs, payload=b"p" * 1024)
    assert fast == generic


def delivered_packet() -> bytes:
    src = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c00::")
    dst = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c07::")  # the DA as delivered
    return codec.encode_data(src, dst, sport=0xC001, flow_label=3, dscp=4, ecn=1,
                             opcode=Opcode.WRITE_MIDDLE, dqpn=9, psn=5, msn=1, va=4096,
                             rkey=7, dmalen=1 << 20, payload=bytes(range(256)) * 4)


def test_icrc_matches_scapys_own_bth_on_a_delivered_packet():
    pkt = delivered_packet()
    ip = IPv6(pkt[:40])
    ref = (IPv6(src=ip.src, dst=ip.dst, tc=ip.tc, fl=ip.fl, hlim=17)
           / UDP(sport=0xC001, dport=4791) / roce.BTH(pkt[48:-4] + b"\0\0\0\0"))
    ref[roce.BTH].icrc = None
    assert raw(ref)[-4:] == pkt[-4:]
    assert icrc.verify(pkt)


def test_icrc_ignores_the_masked_fields():
    pkt = bytearray(delivered_packet())
    pkt[7] = 3  # hop limit: lowered by every switch
    pkt[1] ^= 0x0F  # traffic class / flow label bits
    pkt[46:48] = b"\x12\x34"  # UDP checksum
    pkt[52] ^= 0xC0  # FECN, BECN
    assert icrc.verify(bytes(pkt))


def test_one_bit_change_anywhere_in_the_covered_bytes_is_detected():
    pkt = delivered_packet()
    masked = {7} | {46, 47} | {52}
    masked_bits = {(1, b) for b in range(8)} | {(0, b) for b in range(4)} | {
        (2, b) for b in range(8)} | {(3, b) for b in range(8)}
    for i in range(len(pkt) - 4):
        for bit in range(8):
            if i in masked or (i, bit) in masked_bits:
                continue
            bad = bytearray(pkt)
            bad[i] ^= 1 << bit
            assert not icrc.verify(bytes(bad)), (i, bit)


def test_trim_keeps_headers_and_decodes_as_trimmed():
    pkt = delivered_packet()
    t = codec.trim(pkt, Dscp.TRIMMED_LASTHOP)
    d = codec.decode(t)
    assert d.trimmed and d.dscp == Dscp.TRIMMED_LASTHOP
    assert d.payload == b"" and d.headers["RETH"]["va"] == 4096
    assert len(t) == 40 + 8 + 12 + 4 + 16
    # Scapy agrees the UDP checksum is right.
    q = IPv6(t)
    ck = q[UDP].chksum
    del q[UDP].chksum
    assert IPv6(raw(q))[UDP].chksum == ck


DECODE_ERRORS = {"truncated", "not_roce", "unknown_opcode", "bad_length", "bad_icrc"}


def decodes_or_refuses(data: bytes) -> None:
    """The codec's only outcomes for any bytes: fields, or a DecodeError with a reason."""
    try:
        codec.decode(data)
    except codec.DecodeError as e:
        assert e.reason in DECODE_ERRORS, e.reason


@settings(max_examples=1_000, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_random_bytes_raise_only_decode_error(data):
    # Hypothesis for its edge cases (empty, zeros, boundary lengths) and shrinking; the
    # bulk of random inputs below, where its per-example cost (a millisecond, 100 times a
    # decode's) buys nothing.
    decodes_or_refuses(data)


def test_ten_thousand_seeded_random_inputs_raise_only_decode_error():
    rng = random.Random(11)
    for _ in range(10_000):
        decodes_or_refuses(rng.randbytes(rng.randint(0, 200)))


MUTANTS = 10


@settings(max_examples=200, deadline=None)
@given(packets(), st.randoms(use_true_random=False))
def test_fuzz_mutated_valid_packets_raise_only_decode_error(p, rng):
    """2,000 mutants: each of 200 valid packets with 1-4 bytes changed, then cut, ten
    times over (drawing a fresh packet per mutant cost ten times as long)."""
    valid = fast_packet(p)
    for _ in range(MUTANTS):
        pkt = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            pkt[rng.randrange(len(pkt))] = rng.randrange(256)
        cut = rng.randint(0, len(pkt))
        for candidate in (bytes(pkt), bytes(pkt[:cut])):
            decodes_or_refuses(candidate)


def test_fuzz_scapy_fuzz_packets_raise_only_decode_error():
    rng = random.Random(7)
    base = [layers.METH() / layers.RETH(), layers.SETH() / layers.CCState(), layers.NETH(),
            layers.PETH(), layers.ERTH(), layers.EETH()]
    for i in range(2_000):
        pkt = (IPv6(src="fcbb:bb00:c00::", dst="fcbb:bb00:c07::") / UDP(dport=4791)
               / fuzz(layers.BTH()) / fuzz(rng.choice(base).copy()))
        try:
            codec.decode(raw(pkt))
        except codec.DecodeError:
            pass
        del i


def encapsulated(via: str = "fcbb:bb00:401:801:402:c07::", **kw) -> bytes:
    """An MRC data packet as the NIC sends it: IPv6-in-IPv6, outer DA the uSID path."""
    src = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c00::")
    dst = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c07::")
    args = dict(sport=0xC001, flow_label=3, dscp=4, ecn=1, opcode=Opcode.WRITE_MIDDLE, dqpn=9,
                psn=5, msn=1, va=4096, rkey=7, dmalen=1 << 20, payload=bytes(range(256)) * 4,
                timestamp=99)
    args.update(kw)
    return codec.encode_data(src, dst, via=socket.inet_pton(socket.AF_INET6, via), **args)


def test_an_encapsulated_packet_is_the_plain_one_to_the_port_inside_an_outer_header():
    pkt = encapsulated()
    src = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c00::")
    plain = codec.encode_data(src, socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c07::"),
                              sport=0xC001, flow_label=3, dscp=4, ecn=1,
                              opcode=Opcode.WRITE_MIDDLE, dqpn=9, psn=5, msn=1, va=4096,
                              rkey=7, dmalen=1 << 20, payload=bytes(range(256)) * 4,
                              timestamp=99)
    assert pkt[40:] == plain  # ICRC and UDP checksum are the inner packet's own
    outer = IPv6(pkt)
    assert outer.nh == 41 and outer.plen == len(plain)
    assert outer.dst == "fcbb:bb00:401:801:402:c07::"
    assert (outer.tc, outer.fl, outer.src) == (IPv6(plain).tc, 3, "fcbb:bb00:c00::")
    assert outer[IPv6][1].dst == "fcbb:bb00:c07::" and outer[UDP].dport == 4791
    d = codec.decode(pkt)
    assert d.via == socket.inet_pton(socket.AF_INET6, "fcbb:bb00:401:801:402:c07::")
    assert d.dst == socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c07::")
    assert d.icrc_ok and d.psn == 5 and d.dscp == 4 and d.ev == 0xC0010003
    assert codec.decode(plain).via is None


def test_the_network_marks_what_decode_reads_from_the_outer_header():
    pkt = bytearray(encapsulated())
    pkt[7] = 60  # hop limit, lowered by switches: the outer one only
    d = codec.decode(bytes(pkt))
    assert d.hlim == 60 and d.icrc_ok
    ce = codec.mark_ce(bytes(pkt))
    assert codec.decode(ce).ecn == 3 and (ce[41] >> 4) & 3 == 3  # CE in both headers


def test_an_encapsulated_trim_fixes_both_lengths_both_dscps_and_the_inner_checksum():
    pkt = encapsulated()
    t = codec.trim(pkt, Dscp.TRIMMED)
    assert len(t) == 40 + 40 + 8 + 12 + 4 + 4 + 16
    d = codec.decode(t)
    assert d.trimmed and d.via is not None and d.payload == b"" and d.headers["TSETH"]
    q = IPv6(t)
    inner = q[IPv6][1]
    assert (q.plen, inner.plen, q[UDP].len) == (len(t) - 40, len(t) - 80, len(t) - 80)
    assert q.tc >> 2 == inner.tc >> 2 == Dscp.TRIMMED
    ck = q[UDP].chksum
    del q[UDP].chksum
    assert IPv6(raw(q))[UDP].chksum == ck  # Scapy, over the inner pseudo-header


def test_encapsulation_errors_are_named_not_raised():
    pkt = bytearray(encapsulated())
    bad_outer = bytearray(pkt)
    bad_outer[4:6] = (len(pkt) - 41).to_bytes(2, "big")
    not_udp = bytearray(pkt)
    not_udp[46] = 6
    short = bytearray(pkt[:90])  # a consistent outer header around 50 bytes
    short[4:6] = (50).to_bytes(2, "big")
    for b, reason in ((bad_outer, "bad_length"), (not_udp, "not_roce"), (short, "truncated")):
        with pytest.raises(codec.DecodeError) as e:
            codec.decode(bytes(b))
        assert e.value.reason == reason
