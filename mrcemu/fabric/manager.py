"""The long-lived process that owns a fabric after `mrcemu up` returns.

Mininet's node shells die with the process that made them, so the Mininet
object must live somewhere: here. `up` starts this module detached, reads its
progress as JSON lines on stdout until "ready", and leaves. The manager then
answers `ping` and `down` on a Unix socket and tears everything down on
SIGTERM, SIGINT or `down`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from dataclasses import asdict

from mrcemu import rundir
from mrcemu.errors import MrcemuError
from mrcemu.fabric import children, servers, state
from mrcemu.fabric.build import Fabric
from mrcemu.fabric.servers import Servers
from mrcemu.topology import Topology
from mrcemu.topology.cluster import load as load_cluster
from mrcemu.transport.config import TransportConfig


def emit(event: str, **data: object) -> None:
    sys.stdout.write(json.dumps({"event": event, **data}) + "\n")
    sys.stdout.flush()


class Stop(Exception):
    pass


def _on_signal(signum: int, _frame: object) -> None:
    raise Stop(signal.Signals(signum).name)


def serve(st: state.FabricState) -> None:
    try:
        state.SOCKET.unlink()
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(state.SOCKET))
    srv.listen(8)
    try:
        while True:
            conn, _ = srv.accept()
            with conn:
                try:
                    req = json.loads(conn.makefile().readline() or "{}")
                except ValueError:
                    req = {}
                op = req.get("op")
                if op == "ping":
                    conn.sendall(b'{"ok": true}\n')
                elif op == "down":
                    conn.sendall(b'{"ok": true}\n')
                    return
                else:
                    conn.sendall(json.dumps({"ok": False, "error": f"unknown op {op!r}"}).encode()
                                 + b"\n")
    finally:
        srv.close()


def start_nics(st: state.FabricState, hosts: int, servers: Servers) -> None:
    """One NIC daemon per host, inside the host's namespace, started by the agent of the
    server the host is on; returns once all answer. Each is handed the topology and
    transport snapshots, not a path to re-read."""
    snapshot = json.dumps(st.topology_snapshot)
    transport = json.dumps(st.transport_snapshot)
    done = 0
    for server, names in servers.group(f"h{h}" for h in range(hosts)).items():
        started = servers.call(server, "nic_start", topology=snapshot, transport=transport,
                               hosts={n: [int(n[1:]), st.nodes[n]] for n in names})
        st.nics.update(started)
        st.save()  # before they answer: `clean` finds them from here on
        servers.call(server, "nic_ready", nics=started)
        done += len(names)
        emit("progress", stage="nics", n=done, total=hosts)


def stop_nics(st: state.FabricState, servers: Servers) -> None:
    """End every NIC daemon, each by the agent of its server (a server that cannot be
    reached is left to `clean`)."""
    for server, names in servers.group(n for n in st.nics).items():
        try:
            servers.call(server, "nic_stop", pids=[st.nics[n] for n in names])
        except MrcemuError as e:
            print(f"manager: {e}", file=sys.stderr)


def main(topology_json: str, seed: int = 1, slowdown: float = 1.0,
         transport: dict | None = None, cluster_path: str | None = None) -> int:
    """Build the fabric of `topology_json` (the validated topology `launch` was handed,
    with any --slowdown and --latency off already in it) and serve it until `down`."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    try:
        topo = Topology(**json.loads(topology_json))  # its uSID engine decided by `launch`
        cfg = TransportConfig.for_topology(topo, seed, slowdown)
        if transport:
            cfg = TransportConfig.from_json({**cfg.to_json(), **transport})
        cluster = load_cluster(cluster_path) if cluster_path else None
    except MrcemuError as e:
        emit("error", message=str(e), code=e.exit_code)
        return e.exit_code
    lock = state.Lock()
    try:
        lock.acquire()
    except MrcemuError as e:
        emit("error", message=str(e), code=e.exit_code)
        return e.exit_code
    st = state.FabricState(topology=topo.source, manager_pid=os.getpid(),
                           started_at=time.time(), topology_snapshot=asdict(topo),
                           transport_snapshot=cfg.to_json())
    st.save()

    def on_node(name: str, pid: int) -> None:
        st.nodes[name] = pid
        st.save()

    fabric = Fabric(topo, on_node=on_node, cluster=cluster)
    if cluster:
        st.cluster = cluster.source
        st.placement = fabric.placement
        st.save()
        # Before anything is made there: `clean` then knows which servers to clean.
        rundir.LAST_CLUSTER.write_text(cluster.source + "\n")
    code = 0
    try:
        t0 = time.monotonic()
        if cluster:
            t = time.monotonic()
            servers.start_masters(cluster)  # one shared connection a server, from here on
            fabric.timings["ssh_s"] = time.monotonic() - t
        # Each server's NIC spawner imports the daemon while the fabric is built.
        for server in fabric.servers.group(f"h{h}" for h in range(topo.hosts)):
            fabric.servers.call(server, "nic_spawner")
        fabric.build(lambda stage, n, total: emit("progress", stage=stage, n=n, total=total)
                     if n == total or n % max(1, total // 50) == 0 else None)
        start_nics(st, topo.hosts, fabric.servers)
        st.phase = "up"
        st.summary = {
            "topology": topo.name, "planes": topo.planes, "switches": topo.switch_count,
            "hosts": topo.hosts, "links": topo.link_count, "usid_engine": topo.usid_engine,
            "paths_per_pair": {"same_leaf": topo.planes,
                               "cross_leaf": topo.planes * topo.spines_per_plane},
            "host_link_mbps": topo.host_link_mbps, "fabric_link_mbps": topo.fabric_link_mbps,
            "seconds": round(time.monotonic() - t0, 3), **fabric.timings,
        }
        st.save()
        emit("ready", summary=st.summary)
        # From here on nobody reads our stdout: send it to the log.
        log = os.open(state.LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        serve(st)
    except Stop as why:
        print(f"manager: stopping on {why}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - report, then tear down whatever was built
        emit("error", message=f"fabric build failed: {type(e).__name__}: {e}", code=1)
        code = 1
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        st.phase = "stopping"
        st.save()
        children.stop_all()  # flappers, captures: whatever the fabric ran beside it
        stop_nics(st, fabric.servers)
        fabric.stop()
        if cluster:
            servers.stop_masters(cluster)
        for p in (state.STATE, state.SOCKET, rundir.FAULTS, rundir.NFT_NODES,
                  *((rundir.LAST_CLUSTER,) if cluster else ())):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1,
                  float(sys.argv[3]) if len(sys.argv) > 3 else 1.0,
                  json.loads(sys.argv[4]) if len(sys.argv) > 4 else None,
                  sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None))
