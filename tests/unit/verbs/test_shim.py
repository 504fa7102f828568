"""The verbs shim (mrcemu/verbs/shim) under a real program, against the daemon's real
session server over a loopback NIC: the device it shows, WRITEs landing in the
program's own memory, completions, refusals, and what a killed program leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from mrcemu.topology.addressing import host_address
from mrcemu.transport.config import retry_budget
from mrcemu.verbs.layout import DEFAULT_RETRY_CNT, DEFAULT_TIMEOUT
from tests.unit.verbs.conftest import env_for

PEER = host_address(0, 1).packed.hex()  # h1: the loopback NIC places it here anyway


def _run(args, nic, shim, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env_for(nic, shim, **kw), capture_output=True,
                          text=True, timeout=30)


def test_a_write_lands_in_the_programs_memory_and_completes(nic, shim, verbs_write):
    r = _run([str(verbs_write), PEER, "write"], nic, shim)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    c = nic.conns[1, "mrc", 0]
    assert [len(w[2]) for w in c.writes] == [10000, 64]  # the region's, then inline
    assert c.writes[0][2] == bytes((i * 7 + 3) & 0xFF for i in range(10000))
    # the program closed its device: its session, regions and rings are gone
    assert nic.wait(lambda: not nic.programs.sessions)
    assert nic.memory.regions == {}
    assert not nic.programs.doorbells


def test_a_write_with_immediate_completes_on_the_receive_request_posted_for_it(
        nic, shim, verbs_write):
    r = _run([str(verbs_write), PEER, "imm"], nic, shim)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "77 129 imm 0x12345678\n"  # IBV_WC_RECV_RDMA_WITH_IMM
    (write,) = nic.conns[1, "mrc", 0].writes
    assert write[3] == 0x12345678  # on the wire as the program meant it


def test_roce_queue_pairs_take_a_roce_connection(nic, shim, verbs_write):
    r = _run([str(verbs_write), PEER, "write"], nic, shim, transport="roce")
    assert r.returncode == 0, r.stderr
    assert list(nic.conns) == [(1, "roce", 0)]


def test_a_key_not_the_programs_is_an_error_completion_and_the_qp_flushes(
        nic, shim, verbs_write):
    r = _run([str(verbs_write), PEER, "badkey"], nic, shim)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["41 local protection error",
                                     "42 Work Request Flushed Error"]
    assert nic.conns[1, "mrc", 0].writes == []  # nothing was sent for either


@pytest.mark.parametrize("transport", ["mrc", "roce"])
def test_a_key_the_peer_refuses_is_a_remote_access_error_and_the_qp_flushes(
        nic, shim, verbs_write, transport):
    # MRC fails the write alone (its connection carries others); RoCE fails its QP
    r = _run([str(verbs_write), PEER, "remotekey"], nic, shim, transport=transport)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["41 remote access error",
                                     "42 Work Request Flushed Error", "ERR"]
    assert len(nic.conns[1, transport, 0].writes) == 1  # the second was flushed, never sent


def test_the_qps_timeout_and_retry_count_set_its_connections_retry_limit(
        nic, shim, verbs_write):
    r = _run([str(verbs_write), PEER, "limit"], nic, shim)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "10 3\n"  # as ibv_query_qp returns them
    c = nic.conns[1, "mrc", 0]
    # at RTR the default, at RTS the program's, and once the program is gone the NIC's own
    assert nic.wait(lambda: len(c.budgets) == 3)
    assert c.budgets == [retry_budget(DEFAULT_TIMEOUT, DEFAULT_RETRY_CNT, nic.cfg.slowdown),
                         retry_budget(10, 3, nic.cfg.slowdown), nic.cfg.retry_budget]


def test_a_qp_that_sets_no_limit_gets_perftests(nic, shim, verbs_write):
    r = _run([str(verbs_write), PEER, "write"], nic, shim)
    assert r.returncode == 0, r.stderr
    # set when it connected (the NIC's own limit is another: fakenic)
    assert nic.conns[1, "mrc", 0].budgets[0] == retry_budget(
        DEFAULT_TIMEOUT, DEFAULT_RETRY_CNT, nic.cfg.slowdown) != nic.cfg.retry_budget


def test_the_device_as_ibv_devinfo_shows_it(nic, shim):
    r = _run(["ibv_devinfo", "-v"], nic, shim)
    assert r.returncode == 0, r.stderr
    for line in ("hca_id:\tmrcemu0", "state:\t\t\tPORT_ACTIVE (4)",
                 "active_mtu:\t\t4096 (5)", "link_layer:\t\tEthernet"):
        assert line in r.stdout


def test_outside_an_emulated_host_there_is_no_device_and_a_line_says_why(shim):
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(shim)}
    r = subprocess.run(["ibv_devinfo"], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0
    assert "mrcemu verbs: no emulated host here" in r.stderr


def test_a_program_killed_leaves_nothing(nic, shim, tmp_path):
    # a program that registers memory and makes a queue pair, then waits to be killed
    with subprocess.Popen([str(_holder(tmp_path)), PEER], env=env_for(nic, shim),
                          stdout=subprocess.PIPE, text=True) as p:
        assert p.stdout.readline() == "holding\n"
        assert len(nic.programs.sessions) == 1 and nic.memory.regions
        fds_before_kill = len(os.listdir("/proc/self/fd"))
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
    assert nic.wait(lambda: not nic.programs.sessions)
    assert nic.memory.regions == {} and not nic.programs.doorbells
    time.sleep(0.05)
    assert len(os.listdir("/proc/self/fd")) < fds_before_kill  # the rings' fds closed


def _holder(tmp_path):
    src = tmp_path / "holder.c"
    src.write_text(r'''
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void) {
    int n; struct ibv_device **d = ibv_get_device_list(&n);
    struct ibv_context *c = ibv_open_device(d[0]);
    struct ibv_pd *pd = ibv_alloc_pd(c);
    void *buf = aligned_alloc(4096, 1 << 20);
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, 1 << 20, IBV_ACCESS_REMOTE_WRITE);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(c);
    struct ibv_cq *cq = ibv_create_cq(c, 64, NULL, ch, 0);
    struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 64, .max_send_sge = 1}};
    struct ibv_qp *qp = ibv_create_qp(pd, &ia);
    if (!mr || !cq || !qp) return 1;
    printf("holding\n"); fflush(stdout);
    pause();
    return 0;
}
''')
    out = tmp_path / "holder"
    subprocess.run(["gcc", "-o", str(out), str(src), "-libverbs"], check=True)
    return out
