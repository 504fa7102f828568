"""One layout source: the codec, the Scapy layers and the C header all follow the table."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.packet import NoPayload, Raw

from mrcemu.wire import codec, generate, layers, layout
from mrcemu.wire.constants import Opcode

SCAPY = {"BTH": layers.BTH, "METH": layers.METH, "TSETH": layers.TSETH, "RETH": layers.RETH,
         "ImmDt": layers.ImmDt, "AETH": layers.AETH, "SETH": layers.SETH,
         "CC_STATE": layers.CCState, "NETH": layers.NETH, "PETH": layers.PETH,
         "ERTH": layers.ERTH, "EETH": layers.EETH, "CNP": layers.CNP}


def reference_pack(lay: layout.Layout, values: dict[str, int]) -> bytes:
    """The table read literally: every field's bits, most significant first."""
    v = 0
    for f in lay.fields:
        v = (v << f.bits) | (values[f.name] & ((1 << f.bits) - 1))
    return v.to_bytes(lay.size, "big")


def values(lay: layout.Layout) -> st.SearchStrategy[dict[str, int]]:
    return st.fixed_dictionaries({
        f.name: (st.integers(-(1 << (f.bits - 1)), (1 << (f.bits - 1)) - 1) if f.signed
                 else st.integers(0, (1 << f.bits) - 1)) for f in lay.fields})


@pytest.mark.parametrize("lay", layout.HEADERS, ids=lambda h: h.name)
@given(data=st.data())
def test_the_codec_packs_every_header_as_the_table_says(lay, data):
    v = data.draw(values(lay))
    h = codec.Header(lay)
    wire = h.pack(v)
    assert wire == reference_pack(lay, v)
    assert h.unpack(wire) == v


@pytest.mark.parametrize("lay", layout.HEADERS, ids=lambda h: h.name)
def test_each_scapy_layer_has_the_tables_fields(lay):
    got = [(f.name, f.size if hasattr(f, "size") and f.name != "icrc" else f.sz * 8)
           for f in SCAPY[lay.name].fields_desc if f.name != "icrc"]
    assert got == [(f.name, f.bits) for f in lay.fields]
    assert len(SCAPY[lay.name]()) == lay.size + (4 if lay.name == "BTH" else 0)


def _has_chain(op: Opcode) -> bool:
    try:
        layout.headers_for(op, False)
    except KeyError:
        return False
    return True


CHAINS = [(int(op), ts) for op in Opcode if _has_chain(op) for ts in (False, True)]


@pytest.mark.parametrize(("opcode", "ts"), CHAINS)
def test_scapy_dissects_the_header_chain_the_table_gives_each_opcode(opcode, ts):
    chain = layout.headers_for(opcode, ts)
    payload = b"".join(bytes(SCAPY[h.name]()) for h in chain) + b"DATA" + b"\0" * 4  # + ICRC
    bth = layers.BTH(bytes(layers.BTH(opcode=opcode, ts=int(ts), icrc=0))[:12] + payload)
    got, p = [], bth.payload
    while not isinstance(p, (Raw, NoPayload)):
        got.append(p.name)
        p = p.payload
    assert got == [h.name for h in chain]


def test_the_committed_generated_files_are_what_the_table_generates():
    for path, text in generate.outputs().items():
        assert path.read_text() == text, f"{path} is stale: run `make generate`"
    assert generate.main(["--check"]) == 0


def test_the_c_header_compiles_and_agrees_with_the_codec(tmp_path):
    src = tmp_path / "t.c"
    src.write_text(f'#include "{generate.C_HEADER}"\n#include <stdio.h>\n'
                   "int main(void) { printf(\"%d %d %d %d 0x%x\\n\", MRC_BTH_LEN, MRC_SETH_LEN, "
                   "MRC_DATA_HDRS_MAX, MRC_BTH_TS_BYTE, MRC_BTH_TS_MASK); return 0; }\n")
    subprocess.run(["gcc", "-Wall", "-Werror", "-o", str(tmp_path / "t"), str(src)], check=True)
    out = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True)
    ts = codec.BTH.pack({"ts": 1})
    byte = next(i for i, b in enumerate(ts) if b)
    assert out.stdout.split() == [str(codec.BTH.size), str(codec.SETH.size),
                                  str(codec.BTH.size + codec.METH.size + codec.TSETH.size
                                      + codec.RETH.size + codec.IMMDT.size),
                                  str(byte), hex(ts[byte])]


def test_one_edit_to_the_table_changes_codec_scapy_and_c_together():
    # Widen SETH's `pr` by one bit, taken from the reserved bits before it.
    fields = tuple(dataclasses.replace(f, bits=2) if f.name == "pr" else
                   dataclasses.replace(f, bits=2) if f.name == "rsv0" else f
                   for f in layout.SETH.fields)
    wide = dataclasses.replace(layout.SETH, fields=fields)
    assert wide.size == layout.SETH.size
    assert codec.Header(wide).pack({"pr": 2}) != codec.SETH.pack({"pr": 2})
    assert ("pr", 2) in [(f.name, f.size) for f in layers.from_layout(wide)
                         if f.name in ("pr",)]
    table = tuple(wide if h.name == "SETH" else h for h in layout.HEADERS)
    c = generate.c_header(table)
    assert "#define MRC_SETH_PR_BITS 2" in c and "#define MRC_SETH_PR_BITS 1" not in c
    lua = generate.lua_block(table)
    assert 'ProtoField.uint8("mrc.sack.pr", "pr", base.DEC, nil, 0x06)' in lua
    assert 'ProtoField.uint8("mrc.sack.pr", "pr", base.DEC, nil, 0x02)' in generate.lua_block()


@pytest.mark.parametrize("probe_id", [0, 1, 0x7FFF, 0x8000, 0xFFFF])
def test_a_probe_id_survives_the_signed_ack_psn_offset_on_the_wire(probe_id):
    wire = codec.SETH.pack({"pr": 1, "ack_psn_offset": layout.probe_id_as_offset(probe_id)})
    assert wire[2:4] == probe_id.to_bytes(2, "big")
    assert layout.probe_id_of(codec.SETH.unpack(wire)) == probe_id
