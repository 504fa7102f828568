"""Reading a local server's sshd PID file (mrcemu/fabric/cluster_local.py): no root."""

from __future__ import annotations

from mrcemu.fabric.cluster_local import _pid_in


def test_a_pid_file_counts_only_once_its_number_is_written(tmp_path):
    f = tmp_path / "sshd.pid"
    assert _pid_in(f) is None  # not made yet
    f.write_text("")
    assert _pid_in(f) is None  # made, not yet written: a clean-clone CI run read it so
    f.write_text("4242\n")
    assert _pid_in(f) == 4242
