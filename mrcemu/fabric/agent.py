"""The helper that programs and serves one server's share of a fabric (docs/scale-out.md).

Each server runs this module for its own nodes: `python -m mrcemu.fabric.agent` over
that server's shared ssh connection (`fabric/servers.py`), or in-process on this
machine. It is fed the topology and the node list (name -> PID on that server) and
writes addresses, routes, neighbours, htb and the switch BPF program with netlink and
bpftool there: no ssh round trip per netlink request. Each server loads its own BPF
object and keeps its own maps, so counters, port rates and path losses are read and
written on the server that owns the port.

Protocol: one JSON request a line on stdin, `{"op": NAME, "args": {...}}`; one JSON
answer a line on stdout, `{"ok": true, "result": ...}` or `{"ok": false, "error": TEXT}`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mrcemu.fabric import bpf, rates
from mrcemu.topology import Layout, Topology
from mrcemu.topology.addressing import Kind

OPS: dict[str, Callable[..., Any]] = {}


def op(fn: Callable[..., Any]) -> Callable[..., Any]:
    OPS[fn.__name__] = fn
    return fn


def _layout(topology: dict) -> Layout:
    return Layout(Topology(**topology))


@op
def ping() -> str:
    return "pong"


@op
def program(topology: dict, nodes: dict[str, int]) -> dict[str, float]:
    """Routes, neighbours, addresses and htb into each node given, then this server's
    switch program on each of their switch ports. Returns the seconds each part took."""
    from mrcemu.fabric.program import program_nodes
    from mrcemu.topology.routes import tables

    layout = _layout(topology)
    t0 = time.monotonic()
    program_nodes(layout, tables(layout), nodes)
    t1 = time.monotonic()
    switches = [n for n in nodes if layout.nodes[n].kind is not Kind.HOST]
    if switches:
        # The BPF engine's End runs on every switch port's ingress, before routing.
        end_in_bpf = layout.topo.usid_engine == "bpf"
        bpf.load(usid_end=end_in_bpf)
        ports, ends = {}, {}
        for sw in switches:
            ifaces = layout.interfaces[sw]
            bpf.attach(nodes[sw], [i.name for i in ifaces],
                       ingress=bpf.USID_END if end_in_bpf else None)
            for i in ifaces:
                ports[i.mac] = bpf.port_config(layout, i)
                ends[i.mac] = layout.node_usid(sw)
        bpf.configure(ports)
        if end_in_bpf:
            bpf.configure_usid(ends)
    return {"program_s": t1 - t0, "bpf_s": time.monotonic() - t1}


@op
def sysctls(nodes: dict[str, dict[str, str]]) -> None:
    """Each node's sysctls ({shell PID: {key: value}}), written from inside its
    namespace on this server."""
    from mrcemu.fabric.netns import write_sysctls

    for pid, values in nodes.items():
        write_sysctls(int(pid), values)


@op
def make_links(lines: list[str]) -> int:
    """This server's share of a fabric's links (`remote.LinkPlan`): `ip` commands, run
    in one `ip -batch` in this server's root namespace; the first failure stops it and
    is the error. Returns how many lines ran."""
    import subprocess

    r = subprocess.run(["ip", "-batch", "-"], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError((r.stderr or r.stdout).strip()[-300:])
    return len(lines)


@op
def counters() -> dict[str, Any]:
    """This server's switch counters and port configs (per port MAC), and its path
    losses with their own counters; empty if it runs no switch program."""
    if not bpf.PROG.exists():
        return {"state": {}, "config": {}, "path_loss": []}
    return {"state": bpf.read_state(), "config": bpf.read_config(),
            "path_loss": [[k.port_mac, k.src.hex(), k.dst.hex(), k.ev_hi, v]
                          for k, v in bpf.read_path_loss().items()]}


@op
def set_rate(topology: dict, node: str, pid: int, ifname: str, mbps: float) -> None:
    rates.set_port_rate(_layout(topology), {node: pid}, node, ifname, mbps)


@op
def path_loss(port_mac: str, src: str, dst: str, ev_hi: int, percent: float | None
              ) -> int | None:
    """Set a path's loss on this server's port, or clear it (percent None): then the
    packets it dropped while set, which go with its entry (None if it had none)."""
    key = bpf.PathLossKey(port_mac, bytes.fromhex(src), bytes.fromhex(dst), ev_hi)
    if percent is not None:
        bpf.set_path_loss(key, percent)
        return None
    entry = bpf.read_path_loss().get(key)
    bpf.clear_path_loss(key)
    return None if entry is None else int(entry["dropped"])


@op
def carrier(ends: list[list[Any]], up: bool) -> None:
    """`ip link set` each [pid, ifname] up or down, in its node's namespace."""
    from mrcemu.fabric.netns import run_in

    for pid, name in ends:
        run_in(pid, "ip", "link", "set", name, "up" if up else "down")


@op
def restore(topology: dict, devs: dict[str, list[Any]]) -> None:
    """Addresses, neighbours and routes again on the named ports of each node
    ({node: [pid, [ifname, ...]]}): the kernel flushed them when the link went down."""
    from mrcemu.fabric.netlink import restore as restore_devs
    from mrcemu.fabric.netns import iproute
    from mrcemu.topology.routes import tables

    tabs = tables(_layout(topology))
    for node, (pid, names) in devs.items():
        with iproute(pid) as ipr:
            restore_devs(ipr, tabs[node], set(names))


@op
def ecmp_routes(topology: dict, dead: list[str], nodes: dict[str, int]) -> None:
    """An ECMP fabric's leaves ({node: pid}) converged around the `dead` links."""
    from mrcemu.fabric.netlink import set_multipath
    from mrcemu.fabric.netns import iproute
    from mrcemu.topology.routes import tables

    layout = _layout(topology)
    now, full = tables(layout, frozenset(dead)), tables(layout)
    for node, pid in nodes.items():
        with iproute(pid) as ipr:
            set_multipath(ipr, now[node], full[node])


@op
def nft(pid: int, rules: list[list[str]]) -> None:
    """A node's fault drop rules, each [egress port, match] (netns.nft_rules)."""
    from mrcemu.fabric.netns import nft_rules

    nft_rules(pid, [(port, match) for port, match in rules])


@op
def links(nodes: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Each node's shell alive or not, and its interfaces' operational states."""
    from mrcemu.fabric import state
    from mrcemu.fabric.netns import iproute

    out: dict[str, dict[str, Any]] = {}
    for name, pid in nodes.items():
        alive = state.pid_alive(pid)
        states: dict[str, str] = {}
        if alive:
            with iproute(pid) as ipr:
                states = {x.get_attr("IFLA_IFNAME"): x.get_attr("IFLA_OPERSTATE")
                          for x in ipr.get_links()}
        out[name] = {"alive": alive, "links": states}
    return out


# A cross-server link is a VXLAN device: it has no carrier to report, and its
# operational state stays UNKNOWN once it is up. A veth reports UP.
CARRIERLESS_KINDS = frozenset({"vxlan"})


def not_up(states: dict[str, dict[str, tuple[str, str | None]]],
           expected: dict[str, list[str]]) -> list[str]:
    """Of the interfaces each node is expected to have ({node: [ifname]}), those not
    operationally up, as `node:ifname (STATE)`; `states` is {node: {ifname: (operstate,
    link kind)}} as read from the kernel."""
    out = []
    for node, names in expected.items():
        have = states.get(node, {})
        for name in names:
            oper, kind = have.get(name, ("MISSING", None))
            if oper != "UP" and not (oper == "UNKNOWN" and kind in CARRIERLESS_KINDS):
                out.append(f"{node}:{name} ({oper})")
    return out


def _oper_states(pid: int) -> dict[str, tuple[str, str | None]]:
    from mrcemu.fabric.netns import iproute

    with iproute(pid) as ipr:
        return {x.get_attr("IFLA_IFNAME"): (x.get_attr("IFLA_OPERSTATE"), _link_kind(x))
                for x in ipr.get_links()}


def _link_kind(msg: Any) -> str | None:
    info = msg.get_attr("IFLA_LINKINFO")
    return info.get_attr("IFLA_INFO_KIND") if info else None


@op
def wait_up(topology: dict, nodes: dict[str, int], timeout: float = 10.0) -> float:
    """Return once every interface the layout gives these nodes (name -> PID) is
    operationally up, with the seconds it took. The kernel reports a new carrier through
    its link watch, up to a second after the link was set up, so a fabric is not up when
    its last route is written. Past `timeout` it fails naming the interfaces still down."""
    layout = _layout(topology)
    expected = {n: [i.name for i in layout.interfaces[n]] for n in nodes}
    t0 = time.monotonic()
    while True:
        down = not_up({n: _oper_states(pid) for n, pid in nodes.items()}, expected)
        if not down:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            more = f" and {len(down) - 8} more" if len(down) > 8 else ""
            raise RuntimeError(f"{len(down)} interfaces not up after {timeout:g} s: "
                               f"{', '.join(down[:8])}{more}")
        time.sleep(0.05)


def dev_drops(text: str) -> dict[str, int]:
    """Each interface's drops, received and sent, from a namespace's /proc/net/dev."""
    out = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        if len(f) >= 12:
            out[name.strip()] = int(f[3]) + int(f[11])  # rx drop, tx drop
    return out


def root_qdisc_drops(qdiscs: list[dict[str, Any]]) -> dict[str, int]:
    """Each interface's root qdisc drops, from `tc -s -j qdisc show` (htb's queue full;
    a clsact's, which counts the switch program's own drops, is not a root)."""
    return {q["dev"]: int(q.get("drops", 0)) for q in qdiscs if q.get("root")}


@op
def kernel_drops(nodes: dict[str, int]) -> dict[str, dict[str, int]]:
    """What the kernel dropped at each interface of these nodes (name -> PID), per port
    name, from its start: `qdisc`, its root qdisc's (htb's queue full; the switch
    program's own drops are counted in its map, not here), `link`, the device's (a veth
    counts a packet its peer's backlog refused as tx_dropped), and `fault`, what a
    gray, loss or host-loss fault's nftables rule dropped on its way out (read only on
    the nodes that ever had such a rule). One `tc` a node: pyroute2's dumps took twice
    as long on `default`, and a run reads these before and after."""
    import subprocess

    from mrcemu.fabric.netns import nft_counter, nft_drops, nft_nodes

    ruled = nft_nodes()
    out: dict[str, dict[str, int]] = {}
    for pid in nodes.values():
        rules = nft_drops(pid) if pid in ruled else {}
        with open(f"/proc/{pid}/net/dev") as f:  # PID's own namespace's
            links = dev_drops(f.read())
        tc = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "tc", "-s", "-j",
                             "qdisc", "show"], capture_output=True, text=True)
        queues = root_qdisc_drops(json.loads(tc.stdout)) if tc.returncode == 0 else {}
        for port, n in links.items():
            out[port] = {"qdisc": queues.get(port, 0), "link": n,
                         "fault": rules.get(nft_counter(port), 0)}
    out.pop("lo", None)
    return out


@op
def routes(pid: int) -> dict[str, Any]:
    """A node's kernel IPv6 routes: as `ip -6 route` prints them, and as parsed."""
    import subprocess

    from mrcemu.fabric.netlink import bpf_end_ports, read_routes
    from mrcemu.fabric.netns import iproute

    with iproute(pid) as ipr:
        rs = read_routes(ipr)
        ports = bpf_end_ports(ipr) if any(r.engine == "bpf" for r in rs) else []
    text = subprocess.run(["mnexec", "-a", str(pid), "ip", "-6", "route", "show"],
                          capture_output=True, text=True).stdout
    # The kernel prints the BPF engine's End as the blackhole it is in the FIB: say what
    # performs it.
    text += "".join(f"{r.dst} End next-csid lblen {r.lblen} nflen {r.nflen}: engine bpf, "
                    f"tc ingress program usid_end on {', '.join(ports)}\n"
                    for r in rs if r.engine == "bpf")
    return {"text": text, "routes": [
        {"dst": str(r.dst), "dev": r.dev, "gateway": str(r.gateway) if r.gateway else None,
         "end_next_csid": r.end_next_csid, "lblen": r.lblen, "nflen": r.nflen,
         "engine": r.engine,
         "nexthops": [[d, str(g) if g else None] for d, g in r.nexthops]} for r in rs]}


def dumpcap_argv(pid: int, ifname: str, snaplen: int, filesize_kb: int, out: Path
                 ) -> list[str]:
    """dumpcap on one port of the node whose shell is `pid`, on the server it runs on."""
    return ["nsenter", f"--net=/proc/{pid}/ns/net", "dumpcap", "-q", "-i", ifname, "-s",
            str(snaplen), "-a", f"filesize:{filesize_kb}", "-w", str(out)]


@op
def capture_start(pid: int, ifname: str, snaplen: int, filesize_kb: int, path: str,
                  timeout: float = 10.0) -> int:
    """dumpcap on one of this server's node ports, writing `path` here, detached from the
    agent (it keeps capturing after this call returns); its PID once it is capturing."""
    import os
    import subprocess

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.with_suffix(".log")
    with open(log, "w") as err:
        p = subprocess.Popen(dumpcap_argv(pid, ifname, snaplen, filesize_kb, out),
                             stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    deadline = time.monotonic() + timeout
    while "Capturing on" not in log.read_text():
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise RuntimeError(f"dumpcap did not start: {log.read_text().strip()[:300]}")
        time.sleep(0.02)
    os.unlink(log)
    return p.pid


@op
def capture_stop(pid: int, timeout: float = 10.0) -> None:
    """SIGINT a capture_start's dumpcap (it closes its file), and wait for it to end."""
    import os
    import signal

    from mrcemu.fabric import state

    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while state.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if state.pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


# -- NIC daemons: each runs on the server of its host, started, asked and ended here --

_SPAWNER: list[Any] = []  # this server's NIC spawner (nic/spawner.py) while it runs


@op
def nic_spawner() -> int:
    """Start this server's NIC spawner, so that its imports run while the fabric is
    built; `nic_start` uses it. Returns its PID."""
    import subprocess

    from mrcemu import rundir

    if not _SPAWNER:
        rundir.RUN_DIR.mkdir(parents=True, exist_ok=True)
        with open(rundir.MANAGER_LOG, "a") as log:  # the daemons' output, and its own
            _SPAWNER.append(subprocess.Popen(
                [sys.executable, "-m", "mrcemu.nic.daemon", "--spawner"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                start_new_session=True))
    return _SPAWNER[0].pid


def _close_spawner() -> None:
    """End the spawner (at the end of its input); what it started runs on."""
    if _SPAWNER:
        p = _SPAWNER.pop()
        for f in (p.stdin, p.stdout):
            if f is not None:
                f.close()
        try:
            p.wait(timeout=10)
        except Exception:  # noqa: BLE001 - a spawner stuck in a fork: end it
            p.kill()
            p.wait()


@op
def nic_start(hosts: dict[str, list[int]], topology: str, transport: str) -> dict[str, int]:
    """A NIC daemon in each host's namespace on this server ({host: [index, shell PID]}),
    handed the topology and transport snapshots, forked by the spawner; detached from
    this agent (they live until `nic_stop`, or `clean`). Their output goes to this
    server's manager log. Returns each daemon's PID here; on a failure, ends those it
    started and raises naming the host."""
    from mrcemu.fabric.sweep import kill

    nic_spawner()
    p, out = _SPAWNER[0], {}
    try:
        for name, (index, pid) in hosts.items():
            p.stdin.write(json.dumps({"host": index, "netns_pid": pid, "topology": topology,
                                      "transport": transport}) + "\n")
            p.stdin.flush()
            line = p.stdout.readline()
            answer = json.loads(line) if line.strip() else {"error": "the spawner exited"}
            if "pid" not in answer:
                raise RuntimeError(f"the NIC daemon of {name} did not start: "
                                   f"{answer.get('error')}")
            out[name] = int(answer["pid"])
    except BaseException:
        kill(set(out.values()))
        raise
    finally:
        _close_spawner()
    return out


@op
def nic_ready(nics: dict[str, int], timeout: float = 30.0) -> None:
    """Return once every daemon ({host: PID}) answers on its socket; an error naming the
    first that exited or stayed silent."""
    from mrcemu import rundir
    from mrcemu.errors import MrcemuError
    from mrcemu.fabric import state
    from mrcemu.nic.control import request

    deadline = time.monotonic() + timeout
    for name, pid in nics.items():
        while True:
            if not state.pid_alive(pid):
                raise RuntimeError(f"the NIC daemon of {name} exited at start; see "
                                   f"{rundir.MANAGER_LOG}")
            try:
                request(name, "ping", timeout=1)
                break
            except MrcemuError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the NIC daemon of {name} did not start") from None
                time.sleep(0.05)


@op
def nic(batches: dict[str, list[dict]], timeout: float) -> dict[str, dict]:
    """Each host's batch of requests to its daemon here, the hosts at once: {host: its
    batch reply}, or {"ok": false, "error": ...} for a daemon that did not answer."""
    from concurrent.futures import ThreadPoolExecutor

    from mrcemu.errors import MrcemuError
    from mrcemu.nic.control import request

    def one(host: str) -> dict:
        try:
            return request(host, "batch", timeout, requests=batches[host])
        except MrcemuError as e:
            return {"ok": False, "error": str(e)}

    with ThreadPoolExecutor(max_workers=max(1, len(batches))) as pool:
        return dict(zip(batches, pool.map(one, batches), strict=True))


@op
def nic_stop(pids: list[int], timeout: float = 5.0) -> None:
    """End these daemons: SIGTERM, and SIGKILL for any still running after `timeout`."""
    from mrcemu.fabric.sweep import kill

    kill(set(pids), grace=timeout)


@op
def alive(pids: list[int]) -> dict[str, bool]:
    """Whether each process runs here (keys are the PIDs as text: JSON's keys are)."""
    from mrcemu.fabric import state

    return {str(p): state.pid_alive(p) for p in pids}


# -- a split fabric's check and Clustermapper: this server's hosts probed here --

_CHECK: dict[str, Any] = {}
_MAP: dict[str, Any] = {}


@op
def check_open(topology: dict, pids: dict[str, int], hosts: list[int]) -> None:
    """Open these hosts' sockets for a check (fabric/check.Probes), kept until
    `check_collect` or `check_close`."""
    from mrcemu.fabric.path_probes import Probes

    check_close()
    _CHECK["probes"] = Probes(Topology(**topology), pids, hosts)


@op
def check_send(nonce: int) -> list[list[Any]]:
    """Send the open check's probes; [src, dst, ev, why] for each not sent."""
    return [[*key, why] for key, why in _CHECK["probes"].send(nonce).items()]


@op
def check_collect(nonce: int, expect: int, timeout: float) -> list[list[Any]]:
    """What arrived at these hosts (fabric/check.Arrival each); closes the check."""
    try:
        return [list(a) for a in _CHECK["probes"].collect(nonce, expect, timeout)]
    finally:
        check_close()


@op
def check_close() -> None:
    probes = _CHECK.pop("probes", None)
    if probes is not None:
        probes.close()


@op
def map_open(topology: dict, pids: dict[str, int], hosts: list[int], interval: float,
             window: float, timeout: float) -> None:
    """Clustermapper's probes from these hosts, in the background until `map_close`."""
    import threading

    from mrcemu.fabric.link_probes import LinkProbes

    map_close()
    m = LinkProbes(_layout(topology), pids, interval, window, timeout, hosts=hosts)
    lock, halt = threading.Lock(), threading.Event()

    def probe() -> None:
        while not halt.is_set():
            with lock:
                m.step()
            time.sleep(0.001)  # let a `map_read` take the lock between steps

    thread = threading.Thread(target=probe, name="map", daemon=True)
    _MAP.update(mapper=m, lock=lock, halt=halt, thread=thread)
    thread.start()


@op
def map_read() -> dict[str, Any]:
    """The links these hosts' probes crossed, as of now: [link, probes, lost, RTT ms]
    each; and the probes sent and answered so far."""
    m = _MAP["mapper"]
    with _MAP["lock"]:
        links = m.map.links(time.monotonic())
        return {"links": [[h.link, h.probes, h.lost, h.rtt_ms] for h in links.values()],
                "sent": m.sent, "answered": m.answered}


@op
def map_close() -> None:
    if not _MAP:
        return
    _MAP["halt"].set()
    _MAP["thread"].join(timeout=5)
    _MAP["mapper"].close()
    _MAP.clear()


@op
def clean_server() -> dict[str, int]:
    from mrcemu.fabric.sweep import clean_server as clean

    return clean()


@op
def unload() -> None:
    _close_spawner()  # a build that failed before its NICs started
    bpf.unload()


def handle(request: Any) -> dict[str, Any]:
    """One request's answer; a failure is an answer too, never a crash of the agent."""
    if not isinstance(request, dict) or request.get("op") not in OPS:
        name = request.get("op") if isinstance(request, dict) else None
        return {"ok": False, "error": f"unknown op {name!r}; known: {', '.join(sorted(OPS))}"}
    args = request.get("args") or {}
    if not isinstance(args, dict):
        return {"ok": False, "error": "args must be an object"}
    try:
        return {"ok": True, "result": OPS[request["op"]](**args)}
    except Exception as e:  # noqa: BLE001 - reported to the caller, who names the server
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def main() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError as e:
            answer = {"ok": False, "error": f"not JSON: {e}"}
        else:
            answer = handle(request)
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
