"""What a kernel lacks, said before anything is made: `doctor` lists it, and `up` on a
kernel that (as its probe answers) runs neither End engine fails in one line naming
both kernel options, leaving nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mrcemu.fabric import bootcache
from tests.integration.conftest import assert_clean


def mrcemu_in(run_dir, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MRCEMU_RUN_DIR=str(run_dir))
    return subprocess.run([sys.executable, "-m", "mrcemu", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_doctor_names_the_engine_this_kernel_runs_and_what_it_lacks(tmp_path):
    r = mrcemu_in(tmp_path, "doctor", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    found = doc["found"]
    assert found["netns"] is None and found["veth"] is None and found["htb"] is None
    want = "kernel" if found["usid_kernel"] is None else "bpf"
    assert doc["usid_engine"] == want and doc["fabric_ok"] is True
    brief = mrcemu_in(tmp_path, "doctor", "--brief")
    assert brief.returncode == 0 and len(brief.stdout.strip().splitlines()) == 1
    assert want in brief.stdout
    if found["usid_kernel"] is not None:
        assert "seg6local" in brief.stdout  # the lack is named


def test_up_on_a_kernel_without_either_engine_is_one_line_and_makes_nothing(tmp_path, tidy):
    # The probe's answer, forced: this boot's cached verdict says neither engine runs.
    (tmp_path / "usid-engines.json").write_text(json.dumps({
        "boot_id": bootcache.boot_id(),
        "found": {"kernel": "this kernel has no seg6local (lwt encapsulation not supported)",
                  "bpf": "tc: Error: cls_bpf is unknown"}}))
    r = mrcemu_in(tmp_path, "up", "small")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "CONFIG_IPV6_SEG6_LWTUNNEL" in lines[0] and "CONFIG_NET_CLS_BPF" in lines[0]
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "state.json").exists()
    assert_clean()


def test_a_forced_engine_this_kernel_lacks_is_one_line_naming_the_other(tmp_path, tidy):
    (tmp_path / "usid-engines.json").write_text(json.dumps({
        "boot_id": bootcache.boot_id(),
        "found": {"kernel": "this kernel has no seg6local", "bpf": None}}))
    r = mrcemu_in(tmp_path, "up", "small", "--usid-engine", "kernel")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "CONFIG_IPV6_SEG6_LWTUNNEL" in r.stderr and "--usid-engine bpf" in r.stderr
    assert_clean()
