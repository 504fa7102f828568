"""Which End engine runs: the rule (`choose`), and the probe kept once per boot."""

from __future__ import annotations

import json

import pytest

from mrcemu.fabric import bootcache, usid_engine
from mrcemu.fabric.usid_engine import EngineError, choose

BOTH = {"kernel": None, "bpf": None}
NO_SEG6 = {"kernel": "this kernel has no seg6local", "bpf": None}
NOTHING = {"kernel": "this kernel has no seg6local", "bpf": "tc: no cls_bpf"}


def test_auto_takes_the_kernels_where_it_works_else_the_bpf_program():
    assert choose("auto", BOTH) == "kernel"
    assert choose("auto", NO_SEG6) == "bpf"
    assert choose("auto", {"kernel": None, "bpf": "no clang"}) == "kernel"


def test_a_forced_engine_runs_where_it_works_whatever_the_other():
    assert choose("bpf", BOTH) == "bpf"
    assert choose("kernel", BOTH) == "kernel"
    assert choose("bpf", NO_SEG6) == "bpf"


def test_a_forced_engine_that_cannot_run_is_one_line_naming_its_option_and_the_other():
    with pytest.raises(EngineError) as e:
        choose("kernel", NO_SEG6)
    msg = str(e.value)
    assert "\n" not in msg and "CONFIG_IPV6_SEG6_LWTUNNEL" in msg
    assert "--usid-engine bpf" in msg


def test_a_kernel_lacking_both_engines_is_one_line_naming_both_options():
    with pytest.raises(EngineError) as e:
        choose("auto", NOTHING)
    msg = str(e.value)
    assert "\n" not in msg
    assert "CONFIG_IPV6_SEG6_LWTUNNEL" in msg and "CONFIG_NET_CLS_BPF" in msg
    assert "no seg6local" in msg and "no cls_bpf" in msg


def test_the_probe_runs_once_per_boot(tmp_path, monkeypatch):
    calls = []

    def probe() -> dict:
        calls.append(1)
        return dict(NO_SEG6)

    monkeypatch.setattr(usid_engine, "CACHE", tmp_path / "engines.json")
    monkeypatch.setattr(usid_engine, "probe", probe)
    monkeypatch.setattr(bootcache, "boot_id", lambda: "boot-1")
    assert usid_engine.found() == NO_SEG6
    assert usid_engine.found() == NO_SEG6
    assert len(calls) == 1
    monkeypatch.setattr(bootcache, "boot_id", lambda: "boot-2")  # a reboot: probed again
    assert usid_engine.found() == NO_SEG6 and len(calls) == 2
    (tmp_path / "engines.json").write_text("{not json")  # a torn file: probed again
    assert usid_engine.found() == NO_SEG6 and len(calls) == 3
    assert json.loads((tmp_path / "engines.json").read_text())["boot_id"] == "boot-2"
