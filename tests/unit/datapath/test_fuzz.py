"""The compiled parser and responder under libFuzzer with AddressSanitizer and UBSan: a
million inputs, no crash, no leak, no read outside the packet, no write outside the
memory region (the harness is mrcemu/datapath/fuzz.c)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "fuzz.py"


def test_a_million_hostile_inputs_find_nothing(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--runs", "1000000", "--workdir",
                        str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "1,000,000 inputs" in r.stdout and "no crash" in r.stdout
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("leak-*"))


def test_the_harness_catches_a_planted_overread(tmp_path):
    # The fuzzer is only evidence if it can fail: a parser that reads one byte past
    # the packet (for a packet of the shape the seeds start from) must be caught.
    src = (SCRIPT.parents[1] / "mrcemu" / "datapath" / "wire.c").read_text()
    planted = src.replace("\tif (be16(udp + 4) != plen)",
                          "\tif (mlen > 60 && m[mlen - 1] == 0x5A) o->hlim = m[mlen];\n"
                          "\tif (be16(udp + 4) != plen)", 1)
    assert planted != src
    bad = tmp_path / "wire.c"
    bad.write_text(planted)
    r = subprocess.run([sys.executable, str(SCRIPT), "--runs", "2000000", "--workdir",
                        str(tmp_path / "w"), "--wire-c", str(bad)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1
    assert "heap-buffer-overflow" in r.stderr


def test_the_harness_catches_a_planted_write_past_the_region(tmp_path):
    # A responder whose VA bound check lets a payload end one byte past the region must
    # be caught writing there: the harness's region is a heap block of exactly its size.
    src = (SCRIPT.parents[1] / "mrcemu" / "datapath" / "responder.c").read_text()
    planted = src.replace("plen > mr->len - (va - mr->base)",
                          "plen > mr->len + 1 - (va - mr->base)", 1)
    assert planted != src
    bad = tmp_path / "responder.c"
    bad.write_text(planted)
    r = subprocess.run([sys.executable, str(SCRIPT), "--runs", "4000000", "--workdir",
                        str(tmp_path / "w"), "--responder-c", str(bad)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1
    assert "heap-buffer-overflow" in r.stderr
