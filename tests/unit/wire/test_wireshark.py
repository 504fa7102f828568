"""tshark with our Lua dissector reports exactly the field values we wrote."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from mrcemu.wire import codec, layers
from mrcemu.wire.constants import Dscp

LUA = Path(__file__).resolve().parents[3] / "mrcemu" / "wireshark" / "mrc.lua"
pytestmark = pytest.mark.skipif(shutil.which("tshark") is None,
                                reason="tshark is not installed (make install adds it)")

SRC, DST = "fcbb:bb00:c00::", "fcbb:bb00:c07::"


def pkt(bth: layers.BTH, *rest, sport=0xC001, fl=0x0005, dscp=Dscp.TRIMMABLE):
    p = (IPv6(src=SRC, dst=DST, tc=dscp << 2, fl=fl) / UDP(sport=sport, dport=4791) / bth)
    for r in rest:
        p = p / r
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / p


# (packet, {tshark field: expected value as tshark prints it})
CASES = [
    (pkt(layers.BTH(opcode=0xC6, dqpn=77, psn=1001, ackreq=1, rtx=1),
         layers.METH(rqmsn=2, msn=9), layers.RETH(va=0x7F0000001000, rkey=0xBEEF, dmalen=65536),
         Raw(b"a" * 100)),
     {"mrc.opcode": "0xc6", "mrc.psn": "1001", "mrc.dqpn": "77", "mrc.msn": "9",
      "mrc.rqmsn": "2", "mrc.va": "0x00007f0000001000", "mrc.rkey": "0x0000beef",
      "mrc.dmalen": "65536", "mrc.rtx": "1", "mrc.ackreq": "1", "mrc.ev": "0xc0010005",
      "mrc.payload_len": "100"}),
    (pkt(layers.BTH(opcode=0xCB, psn=5, ts=1), layers.METH(msn=1),
         layers.TSETH(tx_timestamp=0xABCD),
         layers.RETH(va=0x2000, rkey=1, dmalen=10), layers.ImmDt(imm=0xCAFE), Raw(b"b" * 10)),
     {"mrc.opcode": "0xcb", "mrc.ts": "1", "mrc.tseth.ts": "43981",
      "mrc.tseth.ftype": "1", "mrc.imm": "0x0000cafe",
      "mrc.va": "0x0000000000002000", "mrc.payload_len": "10"}),
    (pkt(layers.BTH(opcode=0xDC, psn=7), layers.SETH(m=1, pr=1, ack_psn_offset=-3,
                                                      entropy=0xC4010009, spdcid=11, dpdcid=12,
                                                      cack_psn=4242, cc_type=2, cc_fl=3, mpr=5,
                                                      sack_offset=8,
                                                      sack_bitmap=0xF0F0000000000001),
         layers.CCState(tx_timestamp=321, ooo_count=17, r_c=1, rcv_cwnd_pen=9, rcvd_bytes=70000),
         dscp=Dscp.CONTROL),
     {"mrc.opcode": "0xdc", "mrc.sack.m": "1", "mrc.sack.pr": "1",
      "mrc.sack.ack_psn_offset": "-3", "mrc.sack.entropy": "0xc4010009",
      "mrc.sack.spdcid": "11", "mrc.sack.dpdcid": "12", "mrc.sack.cack_psn": "4242",
      "mrc.sack.cc_type": "2", "mrc.sack.cc_fl": "3", "mrc.sack.mpr": "5",
      "mrc.sack.sack_offset": "8", "mrc.sack.bitmap": "0xf0f0000000000001",
      "mrc.cc.tx_timestamp": "321", "mrc.cc.ooo_count": "17", "mrc.cc.r_c": "1",
      "mrc.cc.rcv_cwnd_pen": "9", "mrc.cc.rcvd_bytes": "70000"}),
    (pkt(layers.BTH(opcode=0xDD, psn=8), layers.NETH(nack_reason=0x0B, vendor=4,
                                                      entropy=0xC0020002, spdcid=3, dpdcid=4,
                                                      nack_psn=99999, tx_timestamp=55),
         dscp=Dscp.CONTROL),
     {"mrc.opcode": "0xdd", "mrc.nack.reason": "0x0b", "mrc.nack.vendor": "0x04",
      "mrc.nack.entropy": "0xc0020002", "mrc.nack.psn": "99999", "mrc.nack.spdcid": "3",
      "mrc.nack.dpdcid": "4", "mrc.nack.tx_timestamp": "55"}),
    (pkt(layers.BTH(opcode=0xDE, psn=9), layers.PETH(probe_id=6, vendor=9, spdcid=1, dpdcid=2,
                                                      tx_timestamp=777), dscp=Dscp.TRIMMABLE),
     {"mrc.opcode": "0xde", "mrc.probe.id": "6", "mrc.probe.vendor": "0x09",
      "mrc.probe.ts": "777", "mrc.probe.ftype": "1", "mrc.probe.spdcid": "1",
      "mrc.probe.dpdcid": "2"}),
    (pkt(layers.BTH(opcode=0xD8, dqpn=2, psn=3), layers.ERTH(op=1, port_status_mask=0xFB,
                                                              tx_timestamp=300),
         dscp=Dscp.CONTROL),
     {"mrc.opcode": "0xd8", "mrc.dqpn": "2", "mrc.psn": "3", "mrc.ep.op": "1",
      "mrc.ep.port_status": "0x000000fb", "mrc.ep.ts": "300", "mrc.ep.ftype": "1"}),
    (pkt(layers.BTH(opcode=0xD9, dqpn=2, psn=4), layers.EETH(op=1, tx_timestamp=4000),
         dscp=Dscp.CONTROL),
     {"mrc.opcode": "0xd9", "mrc.psn": "4", "mrc.ep.resp_op": "1", "mrc.ep.ts": "4000"}),
    (pkt(layers.BTH(opcode=0xD1, psn=10), layers.AETH(syndrome=0x1F, msn=12345),
         dscp=Dscp.CONTROL),
     {"mrc.opcode": "0xd1", "mrc.aeth.syndrome": "0x1f", "mrc.aeth.msn": "12345"}),
]


def tshark_fields(pcap: Path, fields: list[str], lua: bool = True) -> list[dict[str, str]]:
    cmd = ["tshark", "-r", str(pcap), "-T", "fields", "-E", "separator=\t"]
    if lua:
        cmd[1:1] = ["-X", f"lua_script:{LUA}"]
    for fl in fields:
        cmd += ["-e", fl]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [dict(zip(fields, line.split("\t"), strict=True)) for line in out.splitlines()]


def test_every_mrc_packet_type_decodes_to_the_values_written(tmp_path):
    pcap = tmp_path / "all.pcap"
    wrpcap(str(pcap), [p for p, _ in CASES])
    fields = sorted({k for _, exp in CASES for k in exp})
    rows = tshark_fields(pcap, fields)
    assert len(rows) == len(CASES)
    for (_, expected), row in zip(CASES, rows, strict=True):
        for k, v in expected.items():
            assert row[k] == v, (expected["mrc.opcode"], k, row[k], v)


def test_trimmed_packet_is_marked_and_nack_reason_named(tmp_path):
    full = bytes(CASES[0][0][IPv6])
    trimmed = codec.trim(full, Dscp.TRIMMED_LASTHOP)
    pcap = tmp_path / "trim.pcap"
    wrpcap(str(pcap), [Ether() / IPv6(trimmed), CASES[3][0]])
    rows = tshark_fields(pcap, ["mrc.trimmed", "mrc.psn", "mrc.payload_len", "_ws.col.Info",
                                "_ws.expert.message"])
    assert rows[0]["mrc.trimmed"] == "1" and rows[0]["mrc.psn"] == "1001"
    assert rows[0]["mrc.payload_len"] == "0"
    assert "TRIMMED" in rows[0]["_ws.col.Info"]
    assert "PSN_OOR_WINDOW" in rows[1]["_ws.col.Info"]


def test_roce_baseline_stays_with_the_builtin_infiniband_dissector(tmp_path):
    first = pkt(layers.BTH(opcode=0x06, dqpn=33, psn=500), layers.RETH(va=0xABC000, rkey=0x77,
                                                                        dmalen=8192),
                Raw(b"r" * 64))
    middle = pkt(layers.BTH(opcode=0x07, dqpn=33, psn=501), Raw(b"r" * 64))
    pcap = tmp_path / "roce.pcap"
    wrpcap(str(pcap), [first, middle])
    fields = ["infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
              "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen"]
    for lua in (True, False):
        rows = tshark_fields(pcap, fields + (["mrc.opcode"] if lua else []), lua=lua)
        assert rows[0]["infiniband.bth.opcode"] == "6"
        assert rows[0]["infiniband.bth.destqp"] == "0x000021"
        assert rows[0]["infiniband.bth.psn"] == "500"
        assert rows[0]["infiniband.reth.va"] == "0x0000000000abc000"
        assert rows[0]["infiniband.reth.r_key"] == "0x00000077"
        assert rows[0]["infiniband.reth.dmalen"] == "8192"
        assert rows[1]["infiniband.bth.psn"] == "501" and rows[1]["infiniband.reth.va"] == ""
        assert rows[0].get("mrc.opcode", "") == ""


def test_headers_cut_by_the_snap_length_are_snapped_not_malformed(tmp_path):
    # An IPv6-in-IPv6 data packet kept to 128 bytes: its RETH is cut. On the wire it was
    # whole, so Wireshark must not call it malformed; a packet that really is short must.
    import socket
    import struct

    a = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c00::")
    b = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:c07::")
    full = codec.encode_data(a, b, via=b, sport=0xC001, flow_label=5, dscp=4, ecn=2,
                             opcode=0xC7, dqpn=7, psn=42, msn=1, va=0, rkey=1, dmalen=8192,
                             payload=bytes(4096), timestamp=1)
    frame = bytes(Ether())[:12] + b"\x86\xdd" + full
    short = frame[:128]
    short = short[:18] + (len(short) - 54).to_bytes(2, "big") + short[20:]  # outer plen
    short = short[:58] + (len(short) - 94).to_bytes(2, "big") + short[60:]  # inner plen
    short = short[:98] + (len(short) - 94).to_bytes(2, "big") + short[100:]  # UDP length
    pcap = tmp_path / "snapped.pcap"
    with pcap.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 128, 1))
        f.write(struct.pack("<IIII", 1, 0, 128, len(frame)) + frame[:128])
        f.write(struct.pack("<IIII", 2, 0, len(short), len(short)) + short)
    rows = tshark_fields(pcap, ["mrc.psn", "_ws.expert.message", "_ws.malformed"])
    assert rows[0]["mrc.psn"] == "42" and rows[0]["_ws.malformed"] == ""
    assert rows[0]["_ws.expert.message"].startswith("Headers cut by the capture")
    assert "Truncated MRC header" in rows[1]["_ws.expert.message"].split(",")
