"""Hidden vectors: packets written byte by byte from the public transcriptions' tables
(docs/wire.md), with
none of our layouts, codec or Scapy layers, decode to the values written, both in
`mrcemu decode --json` and in tshark with mrc.lua.

Every header below is spelled out from the document's offsets and bit positions; only
the ICRC and UDP checksum are computed (independently of `mrcemu.wire`, from RoCEv2's
definition), so that the packets are valid."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from mrcemu import cli

LUA = Path(__file__).resolve().parents[3] / "mrcemu" / "wireshark" / "mrc.lua"
SRC = bytes.fromhex("fcbb bb00 0c00 0000 0000 0000 0000 0000".replace(" ", ""))
DST = bytes.fromhex("fcbb bb00 0c07 0000 0000 0000 0000 0000".replace(" ", ""))
SPORT, FLOW = 0xC001, 0x00005  # EV 0xc0010005: the high half in the source port


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def bth(opcode: int, dqpn: int, psn: int, byte8: int) -> bytes:
    # opcode | SE M PadCnt TVer = 0 | P_Key | reserved | DestQP(24) | A R rtx ts rsv(4) | PSN
    return struct.pack("!BBHB", opcode, 0, 0xFFFF, 0) + dqpn.to_bytes(3, "big") + bytes(
        [byte8]) + psn.to_bytes(3, "big")


def ipv6_udp(body: bytes, dscp: int, with_icrc: bool = True) -> bytes:
    """IPv6 / UDP 4791 / body / ICRC, with a valid ICRC and UDP checksum (a trimmed
    packet, `with_icrc` False, has neither payload nor ICRC)."""
    ulen = 8 + len(body) + 4 * with_icrc
    vtf = (6 << 28) | (dscp << 22) | FLOW
    ip = struct.pack("!IHBB", vtf, ulen, 17, 64) + SRC + DST
    udp = struct.pack("!HHHH", SPORT, 4791, ulen, 0)
    # RoCEv2 ICRC: CRC-32 over 8 bytes of ones, then the IPv6 packet with traffic class,
    # flow label, hop limit, UDP checksum and BTH byte 4 set to ones; little-endian.
    masked = bytearray(ip + udp + body)
    masked[0:4] = (0x6FFFFFFF).to_bytes(4, "big")
    masked[7] = 0xFF
    masked[46:48] = b"\xff\xff"
    masked[48 + 4] = 0xFF
    icrc = zlib.crc32(b"\xff" * 8 + bytes(masked)).to_bytes(4, "little") if with_icrc else b""
    pseudo = SRC + DST + ulen.to_bytes(4, "big") + b"\x00\x00\x00\x11" + udp + body + icrc
    pseudo += b"\x00" * (len(pseudo) % 2)
    total = sum(struct.unpack(f"!{len(pseudo) // 2}H", pseudo))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    ck = (~total & 0xFFFF) or 0xFFFF
    return ip + struct.pack("!HHHH", SPORT, 4791, ulen, ck) + body + icrc


def in_ipv6(inner: bytes, via: bytes, dscp: int) -> bytes:
    """IPv6-in-IPv6 (docs/topologies.md, addressing): an outer header to the uSID path as it arrived
    (hop limit lowered), the same traffic class and flow label, next header 41."""
    vtf = (6 << 28) | (dscp << 22) | FLOW
    return struct.pack("!IHBB", vtf, len(inner), 41, 61) + SRC + via + inner


# The outer DA mid-path: p0 spine 1, then leaf 1 of plane 0, then h7's port.
VIA = h("fcbb bb00 0801 0401 0c07 0000 0000 0000")
CONTROL, DATA = 46, 4
METH = h("0002 0009")  # RQMSN 2 | MSN 9
TSETH = h("abcd 0001")  # tx_timestamp 0xabcd | tsr 0, reserved, ftype 1
RETH = h("0000 7f00 0000 1000  0000 beef  0001 0000")  # VA | R_Key | DMA length 65536
IMMDT = h("cafe f00d")

# (name, packet, {json "HEADER.field": value}, {tshark field: value as tshark prints it})
VECTORS = [
    ("WRITE_FIRST ts", ipv6_udp(bth(0xC6, 0x1001, 1001, 0b1011_0000) + METH + TSETH + RETH
                                + b"a" * 100, DATA),
     {"BTH.opcode": 0xC6, "BTH.ackreq": 1, "BTH.rtx": 1, "BTH.ts": 1, "BTH.psn": 1001,
      "BTH.dqpn": 0x1001, "METH.msn": 9, "METH.rqmsn": 2, "TSETH.tx_timestamp": 0xABCD,
      "TSETH.ftype": 1, "RETH.va": 0x7F0000001000, "RETH.rkey": 0xBEEF,
      "RETH.dmalen": 65536},
     {"mrc.opcode": "0xc6", "mrc.ackreq": "1", "mrc.rtx": "1", "mrc.ts": "1",
      "mrc.psn": "1001", "mrc.msn": "9", "mrc.tseth.ts": "43981", "mrc.tseth.ftype": "1",
      "mrc.va": "0x00007f0000001000", "mrc.rkey": "0x0000beef", "mrc.dmalen": "65536",
      "mrc.payload_len": "100", "mrc.ev": "0xc0010005", "_ws.expert.message": "Retransmission"}),
    ("WRITE_MIDDLE", ipv6_udp(bth(0xC7, 7, 1002, 0) + METH + RETH + b"b" * 64, DATA),
     {"BTH.opcode": 0xC7, "BTH.ts": 0, "BTH.psn": 1002, "RETH.va": 0x7F0000001000},
     {"mrc.opcode": "0xc7", "mrc.psn": "1002", "mrc.payload_len": "64"}),
    ("WRITE_LAST", ipv6_udp(bth(0xC8, 7, 1003, 0b1000_0000) + METH + RETH + b"c", DATA),
     {"BTH.opcode": 0xC8, "BTH.ackreq": 1, "METH.msn": 9},
     {"mrc.opcode": "0xc8", "mrc.ackreq": "1", "mrc.payload_len": "1"}),
    ("WRITE_LAST_IMM ts", ipv6_udp(bth(0xC9, 7, 1004, 0b0001_0000) + METH + TSETH + RETH
                                   + IMMDT + b"d" * 8, DATA),
     {"BTH.opcode": 0xC9, "BTH.ts": 1, "ImmDt.imm": 0xCAFEF00D, "TSETH.tx_timestamp": 0xABCD},
     {"mrc.opcode": "0xc9", "mrc.imm": "0xcafef00d", "mrc.payload_len": "8"}),
    ("WRITE_ONLY", ipv6_udp(bth(0xCA, 7, 1005, 0) + METH + RETH + b"e" * 4, DATA),
     {"BTH.opcode": 0xCA, "RETH.dmalen": 65536},
     {"mrc.opcode": "0xca", "mrc.dmalen": "65536", "mrc.payload_len": "4"}),
    ("WRITE_ONLY_IMM", ipv6_udp(bth(0xCB, 7, 1006, 0) + METH + RETH + IMMDT + b"f", DATA),
     {"BTH.opcode": 0xCB, "ImmDt.imm": 0xCAFEF00D},
     {"mrc.opcode": "0xcb", "mrc.imm": "0xcafef00d", "mrc.payload_len": "1"}),
    # SETH answering probe 0x1234: byte 1 = nxt-low 0 | m 01 | rsv 000 | pr 1 | rsv 0
    ("SACK pr=1", ipv6_udp(bth(0xDC, 0x1007, 4242, 0) + h(
        "00 22 1234  c401 0009  000b 000c  00 001092  03 05 0008  f0f0 0000 0000 0001")
        # CC_STATE: tx_timestamp 321 | rsv, ooo_count 17 | r_c 1, pen 9 | rcvd 274 x 256 B
        + h("0141 0011 89 000112"), CONTROL),
     {"BTH.opcode": 0xDC, "SETH.m": 1, "SETH.pr": 1, "SETH.ack_psn_offset": 0x1234,
      "SETH.entropy": 0xC4010009, "SETH.spdcid": 11, "SETH.dpdcid": 12,
      "SETH.cack_psn": 4242, "SETH.cc_type": 0, "SETH.cc_fl": 3, "SETH.mpr": 5,
      "SETH.sack_offset": 8, "SETH.sack_bitmap": 0xF0F0000000000001,
      "CC_STATE.tx_timestamp": 321, "CC_STATE.ooo_count": 17, "CC_STATE.r_c": 1,
      "CC_STATE.rcv_cwnd_pen": 9, "CC_STATE.rcvd_bytes": 274},
     {"mrc.sack.m": "1", "mrc.sack.pr": "1", "mrc.sack.ack_psn_offset": "4660",
      "mrc.sack.entropy": "0xc4010009", "mrc.sack.cack_psn": "4242", "mrc.sack.mpr": "5",
      "mrc.sack.bitmap": "0xf0f0000000000001", "mrc.cc.tx_timestamp": "321",
      "mrc.cc.ooo_count": "17", "mrc.cc.r_c": "1", "mrc.cc.rcv_cwnd_pen": "9",
      "mrc.cc.rcvd_bytes": "274"}),
    # SETH for data: m 10 (ALWAYS_SKIP), pr 0, ack_psn_offset -3
    ("SACK", ipv6_udp(bth(0xDC, 0x1007, 4242, 0) + h(
        "00 40 fffd  c401 0009  000b 000c  00 001092  00 01 ffff  0000 0000 0000 0002")
        + h("0000 0000 00 000000"), CONTROL),
     {"SETH.m": 2, "SETH.pr": 0, "SETH.ack_psn_offset": -3, "SETH.sack_offset": -1},
     {"mrc.sack.m": "2", "mrc.sack.pr": "0", "mrc.sack.ack_psn_offset": "-3",
      "mrc.sack.sack_offset": "-1"}),
    # NETH: type/nxt/rsv | reason PSN_OOR_WINDOW | vendor 4 | EV | spdcid dpdcid | rsv
    # nack_psn 99999 | cc | rsv | tx_timestamp 55
    ("NACK", ipv6_udp(bth(0xDD, 0x1007, 99999, 0) + h(
        "0000 0b 04  c002 0002  0003 0004  00 01869f  00 00 0037"), CONTROL),
     {"NETH.nack_reason": 0x0B, "NETH.vendor": 4, "NETH.entropy": 0xC0020002,
      "NETH.spdcid": 3, "NETH.dpdcid": 4, "NETH.nack_psn": 99999, "NETH.tx_timestamp": 55},
     {"mrc.nack.reason": "0x0b", "mrc.nack.vendor": "0x04", "mrc.nack.entropy": "0xc0020002",
      "mrc.nack.psn": "99999", "mrc.nack.tx_timestamp": "55",
      "_ws.expert.message": "NACK PSN_OOR_WINDOW"}),
    # PETH: type/nxt/rsv | rsv | vendor 9 | probe_id 6 | rsv | spdcid dpdcid | ts 777 | ftype 1
    ("PROBE", ipv6_udp(bth(0xDE, 0x1007, 0, 0) + h(
        "0000 00 09  0006 0000  0001 0002  0309 0001"), DATA),
     {"PETH.vendor": 9, "PETH.probe_id": 6, "PETH.spdcid": 1, "PETH.dpdcid": 2,
      "PETH.tx_timestamp": 777, "PETH.ftype": 1},
     {"mrc.probe.vendor": "0x09", "mrc.probe.id": "6", "mrc.probe.spdcid": "1",
      "mrc.probe.dpdcid": "2", "mrc.probe.ts": "777", "mrc.probe.ftype": "1"}),
    # ERTH: byte 1 op (bits 1:0) | rsv | vendor | port_status_mask | rsv | ts | ftype;
    # connectionless: DQPN 2, request id 3 in the PSN
    ("ENDPOINT_REQUEST port status", ipv6_udp(bth(0xD8, 2, 3, 0) + h(
        "00 00 00 00  0000 01fe  0000 0000  012c 0001"), CONTROL),
     {"BTH.dqpn": 2, "BTH.psn": 3, "ERTH.op": 0, "ERTH.port_status_mask": 0x1FE,
      "ERTH.tx_timestamp": 300, "ERTH.ftype": 1},
     {"mrc.dqpn": "2", "mrc.psn": "3", "mrc.ep.op": "0", "mrc.ep.port_status": "0x000001fe",
      "mrc.ep.ts": "300"}),
    ("ENDPOINT_REQUEST EV probe", ipv6_udp(bth(0xD8, 2, 4, 0) + h(
        "00 01 00 07  0000 0000  0000 0000  0001 0001"), CONTROL),
     {"ERTH.op": 1, "ERTH.vendor": 7, "ERTH.tx_timestamp": 1},
     {"mrc.ep.op": "1", "mrc.ep.vendor": "0x07", "mrc.ep.ts": "1"}),
    # EETH, 36 bytes: byte 1 op at bits 3:2; tx_timestamp at 28-29
    ("ENDPOINT_RESPONSE EV probe", ipv6_udp(bth(0xD9, 2, 4, 0) + h("00 04") + bytes(26)
                                            + h("0fa0") + bytes(6), CONTROL),
     {"BTH.psn": 4, "EETH.op": 1, "EETH.tx_timestamp": 4000},
     {"mrc.psn": "4", "mrc.ep.resp_op": "1", "mrc.ep.ts": "4000"}),
    ("ENDPOINT_RESPONSE port status", ipv6_udp(bth(0xD9, 2, 3, 0) + bytes(28) + h("012c")
                                               + bytes(6), CONTROL),
     {"EETH.op": 0, "EETH.tx_timestamp": 300},
     {"mrc.ep.resp_op": "0", "mrc.ep.ts": "300"}),
    # ACKNOWLEDGE: AETH syndrome 0x1f | MSN 12345
    ("ACKNOWLEDGE", ipv6_udp(bth(0xD1, 0x1007, 77, 0) + h("1f 003039"), CONTROL),
     {"BTH.opcode": 0xD1, "BTH.psn": 77, "AETH.syndrome": 0x1F, "AETH.msn": 12345},
     {"mrc.opcode": "0xd1", "mrc.aeth.syndrome": "0x1f", "mrc.aeth.msn": "12345"}),
    # MRC as it travels: IPv6-in-IPv6, the ICRC and UDP checksum the inner packet's.
    ("IPv6-in-IPv6 WRITE_ONLY", in_ipv6(ipv6_udp(bth(0xCA, 7, 1010, 0b0001_0000) + METH
                                                 + TSETH + RETH + b"g" * 33, DATA), VIA, DATA),
     {"BTH.opcode": 0xCA, "BTH.psn": 1010, "TSETH.tx_timestamp": 0xABCD, "RETH.rkey": 0xBEEF},
     {"ipv6.dst": "fcbb:bb00:801:401:c07::,fcbb:bb00:c07::", "ipv6.nxt": "41,17",
      "ipv6.hlim": "61,64", "mrc.psn": "1010", "mrc.payload_len": "33",
      "mrc.ev": "0xc0010005", "mrc.ev.plane": "0", "mrc.ev.spine": "1", "mrc.ev.index": "5"}),
    ("IPv6-in-IPv6 SACK", in_ipv6(ipv6_udp(bth(0xDC, 0x1007, 4243, 0) + h(
        "00 20 0002  cc02 0001  000b 000c  00 001093  00 00 0000  0000 0000 0000 0001")
        + h("0000 0000 00 000000"), CONTROL), VIA, CONTROL),
     {"SETH.m": 1, "SETH.entropy": 0xCC020001, "SETH.cack_psn": 4243},
     {"ipv6.dst": "fcbb:bb00:801:401:c07::,fcbb:bb00:c07::", "mrc.sack.cack_psn": "4243",
      # the packet's own EV, then the one the SACK reflects: plane 3, spine 2, index 1
      "mrc.ev": "0xc0010005,0xcc020001", "mrc.ev.plane": "0,3", "mrc.ev.spine": "1,2"}),
    ("IPv6-in-IPv6 NACK", in_ipv6(ipv6_udp(bth(0xDD, 0x1007, 5, 0) + h(
        "0000 01 00  cc02 0001  0003 0004  00 000005  00 00 0000"), CONTROL), VIA, CONTROL),
     {"NETH.nack_reason": 1, "NETH.nack_psn": 5, "NETH.entropy": 0xCC020001},
     {"mrc.nack.reason": "0x01", "mrc.nack.psn": "5", "mrc.ev.plane": "0,3",
      "_ws.expert.message": "NACK TRIMMED"}),
    # Trimmed by a switch mid-path: DSCP TRIMMED (12) in both headers, headers only.
    ("IPv6-in-IPv6 trimmed", in_ipv6(ipv6_udp(bth(0xC7, 7, 1011, 0) + METH + RETH, 12,
                                              with_icrc=False), VIA, 12),
     {"BTH.psn": 1011, "RETH.dmalen": 65536},
     {"mrc.psn": "1011", "mrc.trimmed": "1", "mrc.payload_len": "0",
      "_ws.expert.message": "Trimmed packet (payload cut by a switch)"}),
]


def pcap_of(packets: list[bytes]) -> bytes:
    """A classic pcap, Ethernet link type, written by hand."""
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for i, p in enumerate(packets):
        frame = h("020000000002 020000000001 86dd") + p
        out += struct.pack("<IIII", i, 0, len(frame), len(frame)) + frame
    return out


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("vectors") / "vectors.pcap"
    path.write_bytes(pcap_of([p for _, p, _, _ in VECTORS]))
    return path


def test_mrcemu_decode_json_reads_every_vector_as_written(capture):
    r = CliRunner().invoke(cli.main, ["decode", str(capture), "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert len(rows) == len(VECTORS)
    for (name, _, expected, _), row in zip(VECTORS, rows, strict=True):
        assert row["error"] is None, (name, row["error"])
        assert row["ev"] == "0xc0010005", name
        encapsulated = name.startswith("IPv6-in-IPv6")
        assert row["via"] == ("fcbb:bb00:801:401:c07::" if encapsulated else None), name
        assert row["dst"] == "fcbb:bb00:c07::", name
        assert row["trimmed"] == name.endswith("trimmed"), name
        got = {k: row["headers"][k.split(".")[0]][k.split(".")[1]] for k in expected}
        assert got == expected, name


@pytest.mark.skipif(shutil.which("tshark") is None,
                    reason="tshark is not installed (make install adds it)")
def test_tshark_with_mrc_lua_reads_every_vector_as_written(capture):
    fields = sorted({k for _, _, _, exp in VECTORS for k in exp} | {"_ws.malformed",
                                                                     "_ws.expert"})
    cmd = ["tshark", "-X", f"lua_script:{LUA}", "-r", str(capture), "-T", "fields",
           "-E", "separator=\t"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [dict(zip(fields, line.split("\t"), strict=True)) for line in out.splitlines()]
    assert len(rows) == len(VECTORS)
    for (name, _, _, expected), row in zip(VECTORS, rows, strict=True):
        assert row["_ws.malformed"] == "", name
        for k, v in expected.items():
            assert row[k] == v, (name, k, row[k], v)
