"""A program on an emulated host: the command line that runs it there, as `mrcemu exec`
and a scenario's `kind: exec` workload start it.

Its verbs go through mrcemu's shim (preloaded) to the host's NIC daemon; its queue pairs
carry MRC or RoCE; the other hosts resolve by name on the out-of-band network (a hosts
file bound over /etc/hosts in a mount namespace of its own, so nothing else sees it).
It runs at idle priority, in an idle CPU group (fabric/idlegroup.py): a real NIC is
hardware beside the CPU, so a program spinning on its buffer (as ib_write_lat does) must
never hold up the emulated NICs, which it would on two cores at an equal share.
"""

from __future__ import annotations

from typing import Any

from mrcemu.errors import MrcemuError

TRANSPORTS = ("mrc", "roce")


def argv(st: Any, host: str, transport: str, servers: Any, cmd: list[str]) -> list[str]:
    """The whole command line, `mnexec` into the host's namespaces included, that runs
    `cmd` as a program on `host` of the running fabric `st`."""
    from mrcemu.fabric import idlegroup, oob
    from mrcemu.nic.programs import socket_path
    from mrcemu.verbs import SHIM

    if host not in st.nics:
        raise MrcemuError(f"'{host}' is not a host: an RDMA program runs on h0..h"
                          f"{len(st.nics) - 1}")
    if transport not in TRANSPORTS:
        raise MrcemuError(f"transport '{transport}': use one of {', '.join(TRANSPORTS)}")
    if not SHIM.exists():
        raise MrcemuError(f"the verbs shim {SHIM} is not built: run `make install`")
    local = {h: st.nodes[h] for h in st.nics if servers.of(h).local}
    if len(local) != len(st.nics):
        raise MrcemuError("programs on hosts of a fabric split over servers are not "
                          "supported yet: bring the fabric up on one server")
    hosts = oob.ensure(local)
    procs, _why = idlegroup.ensure()  # without it, the idle priority alone
    env = {"LD_PRELOAD": str(SHIM), "MRCEMU_VERBS_SOCKET": str(socket_path(host)),
           "MRCEMU_TRANSPORT": transport}
    # into the idle group first, from this mount namespace: a host's has its own /sys
    group = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs)] if procs else []
    return [*group, "mnexec", "-a", str(st.nodes[host]),
            "unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts), "chrt", "--idle", "0",
            "env", *(f"{k}={v}" for k, v in env.items()), *cmd]
