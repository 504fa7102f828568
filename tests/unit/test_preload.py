"""`Preload`: a module imported beside the caller, and its error raised in the caller."""

from __future__ import annotations

import sys

import pytest

from mrcemu.preload import Preload


def test_the_module_is_imported_on_its_own_thread_and_handed_over(tmp_path, monkeypatch):
    (tmp_path / "preload_probe.py").write_text(
        "import threading\nTHREAD = threading.current_thread().name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "preload_probe", raising=False)
    mod = Preload("preload_probe").get()
    assert mod.THREAD == "import preload_probe"
    assert sys.modules["preload_probe"] is mod


def test_a_failed_import_raises_in_the_caller_and_prints_nothing(tmp_path, monkeypatch,
                                                                 capfd):
    (tmp_path / "preload_broken.py").write_text("raise ValueError('bad module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    loading = Preload("preload_broken")
    with pytest.raises(ValueError, match="bad module"):
        loading.get()
    assert capfd.readouterr().err == ""
    with pytest.raises(ModuleNotFoundError):
        Preload("preload_no_such_module").get()
