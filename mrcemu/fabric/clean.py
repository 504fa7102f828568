"""Remove everything mrcemu ever created, even after `kill -9` of a manager: here, and
on every server of the last fabric split over a cluster (by each one's agent)."""

from __future__ import annotations

from pathlib import Path

from mrcemu import rundir
from mrcemu.fabric import servers, state
from mrcemu.fabric.sweep import kill, our_links, our_processes


def _clean_cluster() -> tuple[dict[str, int], list[str]]:
    """Every remote server of the last cluster, by its agent; what failed, in words."""
    from mrcemu.errors import MrcemuError
    from mrcemu.topology.cluster import load

    done = {"processes": 0, "veths": 0}
    problems: list[str] = []
    try:
        path = rundir.LAST_CLUSTER.read_text().strip()
    except FileNotFoundError:
        return done, problems
    if not Path(path).exists():
        return done, problems  # its servers went with it (`cluster local --down`)
    try:
        cluster = load(path)
    except MrcemuError as e:
        return done, [f"the last cluster's file: {e}"]
    srv = servers.Servers(cluster)
    for s in cluster.servers:
        if s.local:
            continue
        try:
            part = srv.call(s, "clean_server")
        except MrcemuError as e:
            problems.append(str(e))
            continue
        for k in done:
            done[k] += part[k]
    return done, problems


def clean() -> dict[str, int]:
    """Returns counts of what was removed."""
    from mrcemu.fabric import children

    stopped = children.stop_all()  # first, each with its own signal (captures close)
    remote, problems = _clean_cluster()  # first, over the shared connections if alive
    pids = set(our_processes())
    st = state.load_state()
    if st:
        pids |= {p for p in [st.manager_pid, *st.nodes.values(), *st.nics.values()]
                 if state.pid_alive(p)}
    kill(pids)
    veths = our_links()
    from mrcemu.fabric import bpf, idlegroup, oob

    oob.remove()
    idlegroup.remove()
    bpf.unload()
    files = 0
    for p in (state.STATE, state.SOCKET, state.STATE.with_suffix(".tmp"),
              rundir.FAULTS, rundir.NFT_NODES, rundir.CHILDREN,
              *(() if problems else (rundir.LAST_CLUSTER,)),
              *rundir.SSH_CONTROL.glob("*"),
              *state.RUN_DIR.glob("nic-*.sock"), *state.RUN_DIR.glob("nic-*.verbs")):
        try:
            p.unlink()
            files += 1
        except FileNotFoundError:
            pass
    from mrcemu.fabric import cluster_local

    # `cluster local`'s servers outlive every fabric by design (one `--down` removes
    # them), so clean leaves them, and says so: a user who meant "everything" needs it.
    return {"processes": len(pids) + stopped + remote["processes"],
            "veths": veths + remote["veths"], "files": files, "problems": problems,
            "local_servers": cluster_local.leftovers()["namespaces"]}
