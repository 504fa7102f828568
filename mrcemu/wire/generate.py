"""Generate the files derived from the layout table (`make generate`).

- `mrcemu/bpf/mrc_wire.h`: the sizes, field positions, opcodes and DSCP classes the BPF
  switch (and the coming compiled data path) reads packets with;
- `mrcemu/datapath/mrc_layout.h`: every header's fields and the headers after BTH per
  opcode, as tables the compiled data path parses and frames packets with;
- `mrcemu/datapath/mrc_shared.h`: what the compiled data path and the Python side must
  agree on beyond the wire: the PSN mask, the sender's loss kinds, the address block and
  the uSID layout (the delay line classes a frame by its source's uSID);
- `mrcemu/verbs/shim/mrcemu_verbs.h`: the verbs shim's session messages, ring entries and
  limits (mrcemu/verbs/layout.py), each struct's size and offsets asserted;
- the generated block of `mrcemu/wireshark/mrc.lua`: every header's ProtoFields (filter
  names `<prefix>.<field>`), value names and field positions; the dissector's hand-written
  rest walks headers through it.

The files are committed; `--check` (and a unit test) fail when regenerating would change a
byte.

    python -m mrcemu.wire.generate [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

from mrcemu.topology import addressing
from mrcemu.topology.paths import EV_FIELDS
from mrcemu.verbs import layout as vl
from mrcemu.wire import layout
from mrcemu.wire.constants import (
    ACCEPTED_UDP_PORTS,
    EV_HIGH_HALF_IN_SPORT,
    ICRC_LEN,
    IPPROTO_IPV6,
    MAX_TIMER_DEFER_S,
    MRC_DATA,
    MRC_UDP_PORT_TRANSPOSED,
    PSN_MASK,
    ROCE_UDP_PORT,
    Dscp,
    LossKind,
    Opcode,
    SackMark,
    Wake,
)

PACKAGE = Path(__file__).resolve().parents[1]
C_HEADER = PACKAGE / "bpf" / "mrc_wire.h"
C_TABLES = PACKAGE / "datapath" / "mrc_layout.h"
C_SHARED = PACKAGE / "datapath" / "mrc_shared.h"
LUA = PACKAGE / "wireshark" / "mrc.lua"
VERBS_H = PACKAGE / "verbs" / "shim" / "mrcemu_verbs.h"
LUA_BEGIN = "-- BEGIN GENERATED from mrcemu/wire/layout.py by `make generate`: do not edit\n"
LUA_END = "-- END GENERATED\n"
_LUA_UINT = {1: "uint8", 2: "uint16", 3: "uint24", 4: "uint32", 8: "uint64"}
_LUA_INT = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _c_name(*parts: str) -> str:
    return "_".join(p.upper() for p in parts)


def c_header(headers: tuple[layout.Layout, ...] = layout.HEADERS) -> str:
    """The C header for `headers`: per header its length, per field its bit offset and
    width, and for a field inside one byte that byte and its mask."""
    by_name = {h.name: h for h in headers}
    out = ["/* Generated from mrcemu/wire/layout.py by `make generate`: do not edit. */",
           "#ifndef MRC_WIRE_H", "#define MRC_WIRE_H", "",
           f"#define MRC_UDP_PORT {ROCE_UDP_PORT}",
           f"#define MRC_UDP_PORT_TRANSPOSED {MRC_UDP_PORT_TRANSPOSED}",
           f"#define MRC_ICRC_LEN {ICRC_LEN}",
           f"#define MRC_IPPROTO_IPV6 {IPPROTO_IPV6} /* MRC travels IPv6-in-IPv6 */",
           "/* 1: the EV's high half (plane, spine) is the UDP source port, its low half the",
           "   flow label; 0: the other way round */",
           f"#define MRC_EV_HIGH_HALF_IN_SPORT {int(EV_HIGH_HALF_IN_SPORT)}", ""]
    for op in Opcode:
        out.append(f"#define MRC_OP_{op.name} 0x{op.value:02X}")
    out.append(f"#define MRC_OP_DATA_MIN 0x{min(MRC_DATA):02X}")
    out.append(f"#define MRC_OP_DATA_MAX 0x{max(MRC_DATA):02X}")
    for mark in SackMark:  # SETH.m: what the receiver asks of the EV a SACK reflects
        out.append(f"#define MRC_SACK_M_{mark.name} {mark.value}")
    out.append("")
    for d in Dscp:
        out.append(f"#define MRC_DSCP_{d.name} {d.value}")
    for h in headers:
        out += ["", f"/* {h.name}: {h.size} bytes */",
                f"#define MRC_{_c_name(h.name)}_LEN {h.size}"]
        offs = h.offsets()
        for f in h.fields:
            p, at = f"MRC_{_c_name(h.name, f.name)}", offs[f.name]
            out.append(f"#define {p}_BITOFF {at}")
            out.append(f"#define {p}_BITS {f.bits}")
            if at // 8 == (at + f.bits - 1) // 8:  # inside one byte
                shift = 8 - (at % 8) - f.bits
                out.append(f"#define {p}_BYTE {at // 8}")
                out.append(f"#define {p}_MASK 0x{((1 << f.bits) - 1) << shift:02X}")
            elif at % 8 == 0 and f.bits % 8 == 0:
                out.append(f"#define {p}_BYTE {at // 8}")
    bth = by_name["BTH"].size
    out += ["", "/* BTH plus the longest MRC data header chain: what a trimmed packet keeps",
            "   after UDP (METH, TSETH, RETH, ImmDt). */",
            f"#define MRC_DATA_HDRS_MAX {layout.mrc_data_headers_max()}",
            f"#define MRC_DATA_HDRS_MIN {bth + layout.METH.size + layout.RETH.size}",
            "", "#endif /* MRC_WIRE_H */", ""]
    return "\n".join(out)


def c_tables(headers: tuple[layout.Layout, ...] = layout.HEADERS) -> str:
    """The tables the compiled data path parses and builds headers with: per header its
    fields (name, bit offset, width, signedness), and per opcode and BTH.ts the headers
    after BTH (the codec's `headers_for`), as indices into MRC_HEADERS."""
    index = {h.name: i for i, h in enumerate(headers)}
    out = ["/* Generated from mrcemu/wire/layout.py by `make generate`: do not edit. */",
           "#ifndef MRC_LAYOUT_H", "#define MRC_LAYOUT_H", "", '#include "../bpf/mrc_wire.h"',
           "", "struct mrc_field { const char *name; unsigned short bitoff; "
           "unsigned char bits; unsigned char is_signed; };",
           "struct mrc_header { const char *name; unsigned short len; unsigned short nfields; "
           "const struct mrc_field *fields; };", ""]
    for h in headers:
        offs = h.offsets()
        rows = ", ".join(f'{{"{f.name}", {offs[f.name]}, {f.bits}, {int(f.signed)}}}'
                         for f in h.fields)
        out.append(f"static const struct mrc_field MRC_{_c_name(h.name)}_FIELDS[] = "
                   f"{{ {rows} }};")
    out.append(f"#define MRC_NHEADERS {len(headers)}")
    for h in headers:
        out.append(f"#define MRC_H_{_c_name(h.name)} {index[h.name]}")
    rows = ", ".join(f'{{"{h.name}", {h.size}, {len(h.fields)}, MRC_{_c_name(h.name)}_FIELDS}}'
                     for h in headers)
    out += [f"static const struct mrc_header MRC_HEADERS[MRC_NHEADERS] = {{ {rows} }};", "",
            "/* Headers after BTH per [opcode][ts]: count (-1: an opcode we do not accept),",
            "   then up to MRC_MAX_AFTER_BTH indices into MRC_HEADERS. */"]
    chains: dict[tuple[int, int], tuple[int, ...] | None] = {}
    for op in range(256):
        for ts in (0, 1):
            try:
                chains[op, ts] = tuple(index[h.name] for h in layout.headers_for(op, bool(ts)))
            except KeyError:
                chains[op, ts] = None
    longest = max(len(c) for c in chains.values() if c is not None)
    out.append(f"#define MRC_MAX_AFTER_BTH {longest}")
    out.append("static const signed char MRC_AFTER_BTH[256][2][MRC_MAX_AFTER_BTH + 1] = {")
    for op in range(256):
        cells = []
        for ts in (0, 1):
            c = chains[op, ts]
            cells.append("{ -1 }" if c is None else "{ " + ", ".join(map(str, (len(c), *c)))
                         + " }")
        out.append(f"  {{ {cells[0]}, {cells[1]} }}, /* 0x{op:02X} */")
    out += ["};", "", "/* Per opcode: MRC_KIND_DATA (an MRC data packet: trimmable, DSCP-classed),",
            "   MRC_KIND_CONTROL (nothing may follow its headers but the ICRC), else 0. */",
            "#define MRC_KIND_DATA 1", "#define MRC_KIND_CONTROL 2",
            "static const unsigned char MRC_OPCODE_KIND[256] = {"]
    kinds = [1 if op in MRC_DATA else 2 if op in layout.CONTROL else 0 for op in range(256)]
    out += [" " + "".join(f" {k}," for k in kinds[i:i + 32]) for i in range(0, 256, 32)]
    out += ["};", "", "#endif /* MRC_LAYOUT_H */", ""]
    return "\n".join(out)


def lua_block(headers: tuple[layout.Layout, ...] = layout.HEADERS) -> str:
    """Lua tables for the dissector: `f` (ProtoFields by key), `H` (per header its length,
    the fields to show as {key, byte offset, byte length}, and each field's byte offset).
    Reserved fields are not shown. Fields of two headers with one filter name and one
    shape share a ProtoField."""
    enums: dict[str, str] = {}
    fields: dict[str, tuple[str, str]] = {}  # key -> (abbrev, declaration)
    h_lines: list[str] = []  # the H.* tables, written after the f.* declarations they name
    for h in headers:
        offs, shown, at_byte = h.offsets(), [], []
        for fl in h.fields:
            at = offs[fl.name]
            first, last = at // 8, (at + fl.bits - 1) // 8
            at_byte.append(f"{fl.name} = {first}")
            if fl.name.startswith(("rsv", "resv")):
                continue
            n = last - first + 1
            abbrev = f"{h.lua}.{fl.lua or fl.name}"
            key = abbrev.replace(".", "_")
            kind = (_LUA_INT if fl.signed else _LUA_UINT).get(n)
            if kind is None:
                raise ValueError(f"{h.name}.{fl.name}: {n} bytes has no Wireshark field type")
            base = "base.DEC" if fl.signed else "base.HEX" if fl.hex else "base.DEC"
            vals = "nil"
            if fl.enum is not None:
                vals = enums.setdefault(fl.enum.__name__, f"V_{fl.enum.__name__}")
            mask = "nil"
            if fl.bits != n * 8:
                mask = f"0x{((1 << fl.bits) - 1) << (n * 8 - at % 8 - fl.bits):0{2 * n}X}"
            decl = (f'ProtoField.{kind}("{abbrev}", "{fl.lua or fl.name}", {base}, {vals}, '
                    f"{mask})")
            if key in fields and fields[key][1] != decl:
                raise ValueError(f"{abbrev}: two fields of this name differ in shape")
            fields[key] = (abbrev, decl)
            shown.append(f"{{ f.{key}, {first}, {n} }}")
        h_lines.append(f"H.{h.name} = {{ len = {h.size}, off = {{ {', '.join(at_byte)} }},")
        h_lines.append(f"  show = {{ {', '.join(shown)} }} }}")
    head = []
    for enum_cls in (fl.enum for h in headers for fl in h.fields if fl.enum is not None):
        name = enums.get(enum_cls.__name__)
        if name is None or any(line.startswith(f"local {name} ") for line in head):
            continue
        items = ", ".join(f'[0x{e.value:02X}] = "{e.name}"' for e in enum_cls)
        head.append(f"local {name} = {{ {items} }}")
    decls = [f"f.{key} = {decl}" for key, (_, decl) in fields.items()]
    # The EV's subfields (mrc.ev.plane == 3 filters): from the topology's EV layout.
    decls += [f'f.ev_{name} = ProtoField.uint16("mrc.ev.{name}", "{name}", base.DEC)'
              for name, _, _ in EV_FIELDS]
    ev_fields = ", ".join(f'{{ f.ev_{n}, {low}, {bits} }}' for n, low, bits in EV_FIELDS)
    tables = ["local f = {}", "local H = {}",
              f"local EV_HIGH_HALF_IN_SPORT = {'true' if EV_HIGH_HALF_IN_SPORT else 'false'}",
              "local UDP_PORTS = { " + ", ".join(str(p) for p in sorted(ACCEPTED_UDP_PORTS))
              + " }"]
    h_lines.append(f"local EV_FIELDS = {{ {ev_fields} }}  -- {{ field, lowest bit, bits }}")
    return LUA_BEGIN + "\n".join(head + tables + decls + h_lines) + "\n" + LUA_END


def c_shared() -> str:
    """The constants C takes from the Python side's own tables (wire/constants.py,
    topology/addressing.py), so that neither is kept in step by hand."""
    block = addressing.BLOCK.to_bytes(addressing.BLOCK_BITS // 8, "big")
    out = ["/* Generated from mrcemu/wire/constants.py and mrcemu/topology/addressing.py by",
           "   `make generate`: do not edit. */",
           "#ifndef MRC_SHARED_H", "#define MRC_SHARED_H", "",
           f"#define MRC_PSN_MASK 0x{PSN_MASK:X}u", "",
           "/* How the sender found a packet lost, or its EV overdue (LossKind). */"]
    out += [f"#define MRC_LOSS_{k.name} {int(k)}" for k in LossKind]
    out += ["", "/* Why the NIC's compiled loop hands a QP back (Wake), and how long (s)",
            "   its timers may wait while frames are left unread. */"]
    out += [f"#define MRC_WAKE_{k.name} {int(k)}" for k in Wake]
    out += [f"#define MRC_MAX_TIMER_DEFER_S {MAX_TIMER_DEFER_S!r}"]
    out += ["", "/* The address block every address starts with, and a uSID's layout:",
            "   plane(4) | kind(2) | index(10). */",
            f"#define MRC_BLOCK_BYTES {len(block)}",
            "#define MRC_BLOCK_INIT { " + ", ".join(f"0x{b:02X}" for b in block) + " }",
            f"#define MRC_BLOCK_BITS {addressing.BLOCK_BITS}",
            f"#define MRC_USID_BITS {addressing.USID_BITS}",
            f"#define MRC_USIDS_PER_ADDRESS {addressing.USIDS_PER_ADDRESS}",
            f"#define MRC_USID_KIND_SHIFT {addressing.KIND_SHIFT}",
            f"#define MRC_USID_KIND_MASK 0x{(1 << addressing.KIND_BITS) - 1:X}u",
            f"#define MRC_USID_INDEX_MASK 0x{(1 << addressing.INDEX_BITS) - 1:X}u"]
    out += [f"#define MRC_USID_KIND_{k.name} {int(k)}" for k in addressing.Kind]
    out += ["", "#endif /* MRC_SHARED_H */", ""]
    return "\n".join(out)


def lua_file(current: str, block: str | None = None) -> str:
    """`current` (mrc.lua) with its generated block replaced."""
    start, end = current.index(LUA_BEGIN), current.index(LUA_END) + len(LUA_END)
    return current[:start] + (block if block is not None else lua_block()) + current[end:]


def verbs_header() -> str:
    """The verbs shim's header (mrcemu/verbs/layout.py): every struct with its size and
    offsets asserted, and the constants."""
    out = ["/* Generated from mrcemu/verbs/layout.py by `make generate`: do not edit. */",
           "#ifndef MRCEMU_VERBS_H", "#define MRCEMU_VERBS_H", "", "#include <stddef.h>",
           "#include <stdint.h>", "", f"#define MV_VERSION {vl.VERSION}"]
    out += [f"#define MV_OP_{op.name} {op.value}" for op in vl.Op]
    out += [f"#define MV_TRANSPORT_{t.name} {t.value}" for t in vl.Transport]
    for name in ("RING_PROD_AT", "RING_CONS_AT", "RING_ARMED_AT", "RING_HEAD", "ARMED_NO",
                 "ARMED_YES", "ARMED_FIRED",
                 "WQE_INLINE_MAX", "WQE_INLINE_AT", "MAX_QP", "MAX_CQE", "MAX_WR",
                 "MAX_MR", "MSG_MAX", "DEFAULT_TIMEOUT", "DEFAULT_RETRY_CNT"):
        out.append(f"#define MV_{name} {getattr(vl, name)}")
    out.append("")
    for s in vl.STRUCTS:
        out.append(f"/* {s.doc} */")
        out.append(f"struct {s.name} {{")
        for n, k in s.fields:
            out.append(f"\t{vl.TYPES[k][0]} {n}{'[16]' if k == 'gid' else ''};")
        pad = s.codec.size - sum(vl.TYPES[k][2] for _, k in s.fields)
        if pad:
            out.append(f"\tuint8_t reserved[{pad}];")
        out.append("};")
        out.append(f"_Static_assert(sizeof(struct {s.name}) == {s.codec.size}, "
                   f'"{s.name}");')
        for n, at in s.offsets().items():
            out.append(f"_Static_assert(offsetof(struct {s.name}, {n}) == {at}, "
                       f'"{s.name}.{n}");')
        out.append("")
    out.append("/* The verbs API's values this layout carries, as rdma-core defines them. */")
    out.append("#define MV_CHECK_VERBS_VALUES() \\")
    out += [f'\t_Static_assert({k} == {v}, "{k}"); \\' for k, v in vl.VERBS.items()]
    out += ["\t_Static_assert(1, \"\")", "", "#endif /* MRCEMU_VERBS_H */", ""]
    return "\n".join(out)


def outputs() -> dict[Path, str]:
    return {C_HEADER: c_header(), C_TABLES: c_tables(), C_SHARED: c_shared(),
            LUA: lua_file(LUA.read_text()), VERBS_H: verbs_header()}


def main(argv: list[str]) -> int:
    stale = []
    for path, text in outputs().items():
        if path.exists() and path.read_text() == text:
            continue
        if "--check" in argv:
            stale.append(path)
            continue
        path.write_text(text)
        print(f"wrote {path}")
    for path in stale:
        print(f"{path} is stale: run `make generate`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
