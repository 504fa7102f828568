"""Coverage-guided fuzzing of the compiled parser, responder and sender: libFuzzer with
AddressSanitizer and UBSan, from Debian's clang (`libclang-rt-14-dev`). `make fuzz` runs
it long; the tests run it short.

    python scripts/fuzz.py [--runs N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mrcemu.wire import codec
from mrcemu.wire.constants import Dscp, Opcode

HERE = Path(__file__).resolve().parents[1] / "mrcemu" / "datapath"
SOURCES = (HERE / "fuzz.c", HERE / "wire.c", HERE / "responder.c", HERE / "sender.c",
           HERE / "nscc.c", HERE / "roce.c", HERE / "ports.c", HERE / "delay.c")
REGION = 4096  # the harness's memory region (fuzz.c REGION)
FLAGS = ("-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all")


class FuzzError(Exception):
    """The harness could not be built, or the fuzzer found a bug (the message says)."""


@dataclass
class Result:
    runs: int
    coverage: int  # edges libFuzzer saw covered
    seconds: float


def build(out: Path, wire_c: Path = SOURCES[1], responder_c: Path = SOURCES[2]) -> Path:
    """Compile the harness with the parser and responder (`wire_c`, `responder_c`:
    other sources, such as ones with a planted bug); FuzzError naming what is missing."""
    clang = shutil.which("clang")
    if clang is None:
        raise FuzzError("clang is not installed: run `make install`")
    exe = out / "fuzz-parse"
    r = subprocess.run([clang, *FLAGS, f"-I{HERE}", str(SOURCES[0]), str(wire_c),
                        str(responder_c), *map(str, SOURCES[3:]), "-o", str(exe)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        hint = (" (libFuzzer comes with libclang-rt-14-dev: run `make install`)"
                if "fuzzer" in r.stderr else "")
        raise FuzzError(f"building the fuzz harness failed{hint}: {r.stderr.strip()[-400:]}")
    return exe


def seeds(corpus: Path) -> int:
    """One valid packet per opcode, encapsulated and plain, and a trimmed one: the
    fuzzer mutates from these instead of discovering IPv6 from nothing. The first byte
    is the harness's mode (bit 0: check the ICRC)."""
    corpus.mkdir(parents=True, exist_ok=True)
    n = 0
    src, dst, via = bytes(15) + b"\x01", bytes(15) + b"\x02", bytes(15) + b"\x03"
    for op in sorted({*codec.CONTROL, Opcode.WRITE_FIRST, Opcode.WRITE_ONLY_IMM,
                      Opcode.RC_WRITE_FIRST}):
        for v in (None, via):
            pkt = codec.encode(src, dst, sport=0xC000, flow_label=5, dscp=Dscp.TRIMMABLE,
                               ecn=2, bth={"opcode": op, "ts": int(op >= 0xC6)},
                               payload=bytes(range(64)) if op not in codec.CONTROL else b"",
                               via=v)
            (corpus / f"seed-{op:02x}-{'in' if v else 'plain'}").write_bytes(b"\x01" + pkt)
            n += 1
            if op in (Opcode.WRITE_FIRST, Opcode.WRITE_ONLY_IMM):
                # Payloads that end exactly at the end of the harness's region (R_Key 0
                # at VA 0, REGION bytes), and one byte past it: the boundary, where an
                # off-by-one in the responder's bound writes outside the region (the
                # responder must drop the second; a planted bug is caught on its first
                # pass instead of after a search of 4,000 to 900,000 inputs for one VA).
                for psn in (0, 3):
                    for edge, over in (("end", 0), ("past", 1)):
                        pkt_at = codec.encode(
                            src, dst, sport=0xC000, flow_label=5, dscp=Dscp.TRIMMABLE,
                            ecn=2, bth={"opcode": op, "ts": 1, "psn": psn},
                            headers={"RETH": {"va": REGION - 64 + over, "dmalen": 64}},
                            payload=bytes(64), via=v)
                        (corpus / f"seed-{op:02x}-{edge}-{psn}-{v is not None}").write_bytes(
                            b"\x00" + pkt_at)  # ICRC unchecked
                        n += 1
            if op == Opcode.WRITE_FIRST:
                (corpus / f"seed-{op:02x}-trimmed-{v is not None}").write_bytes(
                    b"\x00" + codec.trim(pkt, Dscp.TRIMMED))
                n += 1
    # RoCE go-back-N (the harness's RoCE QP is 0, its region R_Key 0 at VA 0): a FIRST
    # for the next PSN, the MIDDLE and LAST_IMM after it, the last ending at the region's
    # end; an ACK for the requester.
    for psn, op, hdr in ((0, Opcode.RC_WRITE_FIRST, {"RETH": {"va": REGION - 192, "dmalen": 192}}),
                         (1, Opcode.RC_WRITE_MIDDLE, {}),
                         (2, Opcode.RC_WRITE_LAST_IMM, {"ImmDt": {"imm": 1}}),
                         (0, Opcode.RC_ACK, {"AETH": {"syndrome": 0x60}})):
        pkt = codec.encode(src, dst, sport=0xC000, flow_label=5, dscp=Dscp.NO_TRIM, ecn=0,
                           bth={"opcode": op, "psn": psn}, headers=hdr,
                           payload=bytes(64) if op != Opcode.RC_ACK else b"")
        (corpus / f"seed-roce-{op:02x}-{psn}").write_bytes(b"\x00" + pkt)
        n += 1
    return n


def run(runs: int, workdir: Path, timeout: float = 600, wire_c: Path = SOURCES[1],
        responder_c: Path = SOURCES[2], seed: int = 0, value_profile: bool = True) -> Result:
    """Build, seed and run `runs` inputs; FuzzError with the fuzzer's report on a bug.
    `seed` is libFuzzer's random seed: 0, a new one each run; any other, a fixed one,
    which does not fix the inputs here (seed 1 reached the same planted overread in 35 to
    70 s in three runs of one build)."""
    workdir.mkdir(parents=True, exist_ok=True)
    exe = build(workdir, wire_c, responder_c)
    corpus = workdir / "corpus"
    seeds(corpus)
    # Value profiling: a comparison's operands drawing closer is a new feature, so the
    # corpus walks towards a bound (a payload one byte past its region is one exact VA:
    # without it, a fixed seed went four million inputs without reaching the planted
    # bug after an unrelated change to the sender moved the fuzzer's path). It costs:
    # a million inputs take ~130 s with it, ~50 s without.
    r = subprocess.run([str(exe), f"-runs={runs}", "-max_len=9100", "-print_final_stats=1",
                        f"-use_value_profile={int(value_profile)}",
                        f"-seed={seed}", f"-artifact_prefix={workdir}/", str(corpus)],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        summary = [ln for ln in r.stderr.splitlines() if ln.startswith(("SUMMARY:", "==")) and
                   ("ERROR" in ln or "SUMMARY" in ln)]
        crash = sorted(workdir.glob("crash-*")) + sorted(workdir.glob("leak-*"))
        raise FuzzError(f"the fuzzer found a bug (exit {r.returncode}): "
                        f"{'; '.join(summary) or r.stderr.strip()[-1000:]}"
                        + (f"; the input is {crash[0]}" if crash else ""))
    done = re.search(r"stat::number_of_executed_units:\s+(\d+)", r.stderr)
    cov = re.findall(r"cov: (\d+)", r.stderr)
    secs = re.search(r"Done (\d+) runs in (\d+) second", r.stderr)
    return Result(int(done.group(1)) if done else 0, int(cov[-1]) if cov else 0,
                  float(secs.group(2)) if secs else 0.0)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="scripts/fuzz.py")
    ap.add_argument("--runs", type=int, default=2_000_000)
    ap.add_argument("--workdir", type=Path, default=Path("build/fuzz"))
    ap.add_argument("--wire-c", type=Path, default=SOURCES[1],
                    help="the parser source to fuzz (default: the package's)")
    ap.add_argument("--responder-c", type=Path, default=SOURCES[2],
                    help="the responder source to fuzz (default: the package's)")
    ap.add_argument("--seed", type=int, default=0,
                    help="libFuzzer's random seed: 0 (default) draws one; another number "
                         "fixes it (the inputs still vary from run to run)")
    ap.add_argument("--value-profile", action=argparse.BooleanOptionalAction, default=True,
                    help="guide by comparisons' operands too (default; what reaches an exact "
                         "bound from a fixed seed), at about 2.5 times the time an input")
    a = ap.parse_args(argv)
    try:
        res = run(a.runs, a.workdir, timeout=3600, wire_c=a.wire_c,
                  responder_c=a.responder_c, seed=a.seed, value_profile=a.value_profile)
    except FuzzError as e:
        print(f"fuzz: {e}", file=sys.stderr)
        return 1
    print(f"fuzz: {res.runs:,} inputs through the compiled parser, responder, sender, RoCE "
          f"QP and delay line under ASan+UBSan in {res.seconds:.0f} s, {res.coverage} edges "
          "covered, no crash, no leak")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
