import json
import socket

from click.testing import CliRunner
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from mrcemu import cli
from mrcemu.wire import codec
from mrcemu.wire.constants import Dscp
from tests.unit.wire.test_wireshark import CASES


def write(tmp_path):
    data = bytes(CASES[0][0][IPv6])
    bad = bytearray(data)
    bad[-1] ^= 0xFF  # broken ICRC
    pkts = [p for p, _ in CASES] + [Ether() / IPv6(codec.trim(data, Dscp.TRIMMED)),
                                    Ether() / IPv6(bytes(bad))]
    path = tmp_path / "c.pcap"
    wrpcap(str(path), pkts)
    return path


def test_decode_json_rows_and_trimmed(tmp_path):
    r = CliRunner().invoke(cli.main, ["decode", str(write(tmp_path)), "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert len(rows) == len(CASES) + 2
    assert rows[0]["opcode"] == "WRITE_FIRST" and rows[0]["psn"] == 1001
    assert "va=0x7f0000001000" in rows[0]["info"]
    assert rows[0]["ev"] == "0xc0010005"
    nack = [x for x in rows if x["opcode"] == "RELIABILITY_NACK"][0]
    assert "reason=PSN_OOR_WINDOW" in nack["info"] and "nack_psn=99999" in nack["info"]
    sack = [x for x in rows if x["opcode"] == "RELIABILITY_SACK"][0]
    assert "cack_psn=4242" in sack["info"] and "0xf0f0000000000001" in sack["info"]
    trimmed = rows[-2]
    assert trimmed["trimmed"] and trimmed["error"] is None and trimmed["dscp"] == "TRIMMED"
    assert rows[-1]["error"] == "bad_icrc"


def test_a_bad_icrc_packet_is_dissected_whole_and_flagged(tmp_path):
    # As Wireshark shows it: opcode, PSN and every header, with the checksum marked bad.
    rows = json.loads(CliRunner().invoke(cli.main, ["decode", str(write(tmp_path)),
                                                    "--json"]).output)
    good, bad = rows[0], rows[-1]
    assert bad["error"] == "bad_icrc"
    assert (bad["opcode"], bad["psn"], bad["ev"]) == (good["opcode"], good["psn"], good["ev"])
    assert bad["headers"] == good["headers"] and set(bad["headers"]) > {"BTH"}
    assert bad["info"] == good["info"] + " ICRC BAD"
    r = CliRunner().invoke(cli.main, ["decode", str(write(tmp_path))], env={"COLUMNS": "250"})
    last = [ln for ln in r.output.splitlines() if "ICRC BAD" in ln]
    assert len(last) == 1 and "WRITE_FIRST" in last[0] and "1001" in last[0]


def test_decode_filters(tmp_path):
    p = str(write(tmp_path))
    r = CliRunner().invoke(cli.main, ["decode", p, "--json", "--opcode", "RELIABILITY_NACK"])
    assert [x["opcode"] for x in json.loads(r.output)] == ["RELIABILITY_NACK"]
    r = CliRunner().invoke(cli.main, ["decode", p, "--json", "--psn", "1001"])
    assert {x["psn"] for x in json.loads(r.output)} == {1001}
    r = CliRunner().invoke(cli.main, ["decode", p, "--json", "--ev", "0xc0010005",
                                      "--opcode", "0xde"])
    assert [x["opcode"] for x in json.loads(r.output)] == ["RELIABILITY_PROBE_REQ"]


def test_decode_bad_input_is_one_clear_line(tmp_path):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture at all")
    r = CliRunner().invoke(cli.main, ["decode", str(junk)])
    assert r.exit_code == 1 and "not a pcap" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli.main, ["decode", str(junk), "--opcode", "BOGUS"])
    assert r.exit_code == 1 and "not an opcode" in r.output


def test_a_capture_cut_by_its_snap_length_decodes_headers_as_snapped(tmp_path):
    # As `mrcemu run` captures (snaplen 256): data packets longer than that are kept in
    # part. Their headers still decode; they are marked snapped, not malformed.
    import struct

    from scapy.packet import Raw

    from mrcemu.wire import layers
    from tests.unit.wire.test_wireshark import pkt

    data = [pkt(layers.BTH(opcode=0xC6, dqpn=77, psn=1001 + i, ackreq=1),
                layers.METH(rqmsn=2, msn=9), layers.RETH(va=0x7F0000001000 + 4096 * i,
                                                         rkey=0xBEEF, dmalen=65536),
                Raw(bytes([i]) * 4096)) for i in range(3)]
    path = tmp_path / "snapped.pcap"
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 256, 1))
        for p in data:
            raw = bytes(p)
            f.write(struct.pack("<IIII", 1, 0, 256, len(raw)) + raw[:256])
    r = CliRunner().invoke(cli.main, ["decode", str(path), "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert len(rows) == len(data)
    for row, p in zip(rows, data, strict=True):
        whole = codec.decode(bytes(p[IPv6]))
        assert row["error"] is None and row["snapped"] and not row["trimmed"]
        assert row["psn"] == whole.psn and row["ev"] == f"0x{whole.ev:08x}"
        assert f"va=0x{whole.headers['RETH']['va']:x} SNAPPED" in row["info"]
    # A packet whose own lengths disagree with the wire is still malformed.
    raw = bytearray(bytes(data[0]))
    raw[14 + 4:14 + 6] = (1000).to_bytes(2, "big")
    bad = tmp_path / "bad.pcap"
    with bad.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 256, 1))
        f.write(struct.pack("<IIII", 1, 0, 256, len(raw)) + bytes(raw[:256]))
    (row,) = json.loads(CliRunner().invoke(cli.main, ["decode", str(bad), "--json"]).output)
    assert row["error"] is not None and "bad_length" in row["error"]


def test_plain_roce_caught_before_its_last_hop_checks_its_icrc_as_it_will_arrive(tmp_path):
    # The RoCEv2 baseline is not encapsulated: its ICRC covers the DA as delivered, so a
    # capture at the sender's port (DA still a uSID container) is not a bad ICRC.
    src, port = (socket.inet_pton(socket.AF_INET6, a) for a in ("fcbb:bb00:c00::",
                                                                  "fcbb:bb00:c07::"))
    via = socket.inet_pton(socket.AF_INET6, "fcbb:bb00:400:801:401:c07::")
    ok = codec.encode(src, via, delivered=port, sport=0xC001, flow_label=1, dscp=0, ecn=0,
                      bth={"opcode": 0x0A, "dqpn": 5, "psn": 9}, headers=None,
                      payload=b"x" * 64)
    bad = bytearray(ok)
    bad[-1] ^= 0xFF
    path = tmp_path / "roce.pcap"
    wrpcap(str(path), [Ether() / IPv6(ok), Ether() / IPv6(bytes(bad))])
    rows = json.loads(CliRunner().invoke(cli.main, ["decode", str(path), "--json"]).output)
    assert [r["error"] for r in rows] == [None, "bad_icrc"]
    assert rows[0]["dst"] == "fcbb:bb00:400:801:401:c07::" and rows[0]["via"] is None
