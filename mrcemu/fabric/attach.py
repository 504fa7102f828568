"""The Mininet CLI on a fabric owned by another process (the manager).

Each node gets a fresh Mininet shell that joins the node's existing namespace
(`mnexec -a PID`) instead of making a new one; the shells end with the CLI.
"""

from __future__ import annotations

from mininet.cli import CLI
from mininet.net import Mininet
from mininet.node import Node


class AttachedNode(Node):
    def __init__(self, name: str, target_pid: int, **params: object) -> None:
        self.target_pid = target_pid
        super().__init__(name, inNamespace=True, **params)

    def _popen(self, cmd, **params):  # type: ignore[no-untyped-def]
        # startShell asks for `mnexec -cdn` (a new namespace): join the node's instead.
        if cmd[:1] == ["mnexec"] and "n" in cmd[1]:
            cmd = ["mnexec", cmd[1].replace("n", ""), "-a", str(self.target_pid), *cmd[2:]]
        return super()._popen(cmd, **params)


def attached_cli(nodes: dict[str, int]) -> None:
    net = Mininet(topo=None, controller=None, build=False, cleanup=False)
    for name, pid in nodes.items():
        net.addHost(name, cls=AttachedNode, target_pid=pid, ip=None)
    try:
        CLI(net)
    finally:
        for node in net.hosts:
            node.terminate()
