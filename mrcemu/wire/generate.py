"""Generate the files derived from the layout table (`make generate`).

Today: `mrcemu/bpf/mrc_wire.h`, the sizes, field positions, opcodes and DSCP classes
the BPF switch (and the coming compiled data path) reads packets with. The file is
committed; `--check` (and a unit test) fail when regenerating would change a byte.

    python -m mrcemu.wire.generate [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

from mrcemu.wire import layout
from mrcemu.wire.constants import ICRC_LEN, MRC_DATA, ROCE_UDP_PORT, Dscp, Opcode

PACKAGE = Path(__file__).resolve().parents[1]
C_HEADER = PACKAGE / "bpf" / "mrc_wire.h"


def _c_name(*parts: str) -> str:
    return "_".join(p.upper() for p in parts)


def c_header(headers: tuple[layout.Layout, ...] = layout.HEADERS) -> str:
    """The C header for `headers`: per header its length, per field its bit offset and
    width, and for a field inside one byte that byte and its mask."""
    by_name = {h.name: h for h in headers}
    out = ["/* Generated from mrcemu/wire/layout.py by `make generate`: do not edit. */",
           "#ifndef MRC_WIRE_H", "#define MRC_WIRE_H", "",
           f"#define MRC_UDP_PORT {ROCE_UDP_PORT}", f"#define MRC_ICRC_LEN {ICRC_LEN}", ""]
    for op in Opcode:
        out.append(f"#define MRC_OP_{op.name} 0x{op.value:02X}")
    out.append(f"#define MRC_OP_DATA_MIN 0x{min(MRC_DATA):02X}")
    out.append(f"#define MRC_OP_DATA_MAX 0x{max(MRC_DATA):02X}")
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


def main(argv: list[str]) -> int:
    text = c_header()
    if "--check" in argv:
        if not C_HEADER.exists() or C_HEADER.read_text() != text:
            print(f"{C_HEADER} is stale: run `make generate`", file=sys.stderr)
            return 1
        return 0
    C_HEADER.write_text(text)
    print(f"wrote {C_HEADER}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
