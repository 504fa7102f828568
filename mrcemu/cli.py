"""The `mrcemu` command line. Errors become one clear line and an exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mrcemu.clikit import SLOWDOWN, console, err, friendly, need_root
from mrcemu.errors import FabricStateError, MrcemuError
from mrcemu.study.command import study
from mrcemu.topology import Layout, Topology, latency, load
from mrcemu.topology.faults import KINDS as FAULT_KINDS
from mrcemu.topology.model import TOPOLOGY_DIR, USID_ENGINES

try:  # every policy module in transport/lb/, found at import: one may be broken
    from mrcemu.transport.lb import POLICIES as LB_POLICIES
except MrcemuError as _e:
    Console(stderr=True).print(f"[bold red]mrcemu:[/] {_e}", highlight=False, soft_wrap=True)
    sys.exit(_e.exit_code)


DEFAULT_TOPOLOGY = str(TOPOLOGY_DIR / "default.yaml")



# What performs each switch's End with next-csid (docs/kernel.md).
ENGINE_NAMES = {"kernel": "kernel (seg6local)", "bpf": "bpf (tc ingress program)"}


def usid_engine_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--usid-engine", "usid_engine", type=click.Choice(list(USID_ENGINES)),
        default=None, help="What performs the switches' SRv6 End with next-csid: the "
        "kernel's seg6local, mrcemu's BPF program, or auto (the kernel's where it works; "
        "the topology's usid_engine, auto unless set).")(fn)


def running_topology() -> tuple[Topology, dict[str, int]]:
    from mrcemu.fabric.state import require_state

    st = require_state()
    return st.topo(), st.nodes  # the snapshot taken at `up`, not the file as it is now


def node_pid(nodes: dict[str, int], name: str) -> int:
    if name not in nodes:
        raise MrcemuError(f"no node named '{name}': nodes are "
                          + ", ".join(list(nodes)[:12]) + (" ..." if len(nodes) > 12 else ""))
    return nodes[name]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mrcemu")
def main() -> None:
    """mrcemu: emulate MRC multipath RDMA over a multi-plane SRv6 uSID fabric.

    Fabric commands need root: run them as `sudo .venv/bin/mrcemu ...`.
    """


@main.command()
@click.argument("topology", default=DEFAULT_TOPOLOGY)
@click.option("--seed", default=1, show_default=True,
              help="Transport seed: orders each connection's EV spraying.")
@click.option("--cluster", "cluster_file", default=None, type=click.Path(dir_okay=False),
              help="Split the fabric over the servers of this cluster file "
                   "(see 'mrcemu cluster local').")
@click.option("--slowdown", default="1", show_default=True, type=SLOWDOWN,
              help="Run the fabric this many times slower (links and transport clocks), "
                   "so that this host carries the programs run on it faithfully (see "
                   "docs/fidelity.md); auto: the smallest this machine's calibration "
                   "expects to be faithful for one pair of hosts at line rate.")
@usid_engine_option
@friendly
def up(topology: str, seed: int, cluster_file: str | None, slowdown: float | str,
       usid_engine: str | None) -> None:
    """Bring a fabric up and leave it running (default: topologies/default.yaml)."""
    topo = load(topology)  # validate before anything is created: exit 2 on a bad file
    if usid_engine:
        topo = replace(topo, usid_engine=usid_engine)
    if cluster_file:
        from mrcemu.topology.cluster import load as load_cluster

        load_cluster(cluster_file)  # likewise
        if slowdown == "auto":
            raise click.UsageError("--cluster takes --slowdown as a number: the "
                                   "calibration measures one machine")
    need_root("up")
    from mrcemu.fabric.launch import launch

    k = _up_slowdown(topo, slowdown)

    # Ctrl-C tears down what was built, even when started from a shell that ignores
    # SIGINT (a background job): Python installs no handler where it starts ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with Progress(TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, n: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=n)

        try:
            summary = launch(topo.slowed(k) if k != 1 else topo, progress, seed=seed,
                             slowdown=k, cluster=cluster_file)
        except KeyboardInterrupt:
            err.print("interrupted: the fabric was torn down")
            sys.exit(130)
    t = Table(title=f"fabric up: {topo.name}", show_header=False)
    for k in ("planes", "switches", "hosts", "links"):
        t.add_row(k, str(summary[k]))
    t.add_row("uSID End engine", ENGINE_NAMES.get(summary.get("usid_engine", ""), "?"))
    t.add_row("paths per host pair",
              f"{summary['paths_per_pair']['cross_leaf']} across leaves, "
              f"{summary['paths_per_pair']['same_leaf']} on one leaf")
    t.add_row("link rates", f"host {summary['host_link_mbps']} Mb/s, "
              f"fabric {summary['fabric_link_mbps']} Mb/s")
    t.add_row("seconds", f"{summary['seconds']:.2f}")
    console.print(t)
    console.print("next: [bold]mrcemu check[/], [bold]mrcemu status[/], [bold]mrcemu down[/]")


def _up_slowdown(topo: Topology, slowdown: float | str) -> float:
    """The slowdown `up` runs the fabric at: as given, or auto's pick for one pair of
    hosts at line rate (what one program and its peer ask)."""
    if slowdown != "auto":
        return float(slowdown)
    from mrcemu.scenario.calibrate import choose

    def ui(kind: str, data: dict) -> None:
        if kind in ("stage", "progress") and data.get("text"):
            err.print(data["text"])

    p = choose(topo, [[(0, topo.hosts - 1, 0)]], ui)
    err.print(p.describe())
    return p.slowdown


@main.command()
@friendly
def down() -> None:
    """Tear the running fabric down."""
    need_root("down")
    from mrcemu.fabric.launch import stop

    dt = stop()
    console.print(f"fabric down in {dt:.2f} s" if dt else "no manager was running; "
                  "removed leftovers")


@main.command()
@friendly
def clean() -> None:
    """Remove everything mrcemu created (namespaces, veths, processes, state)."""
    need_root("clean")
    from mrcemu.fabric.clean import clean as do_clean

    done = do_clean()
    console.print(f"removed {done['processes']} processes, {done['veths']} veths, "
                  f"{done['files']} state files")
    for problem in done["problems"]:
        console.print(f"[yellow]not cleaned: {problem}[/yellow]")
    if done["local_servers"]:
        console.print(f"left up: {len(done['local_servers'])} local server(s) of "
                      "'mrcemu cluster local'; remove them: sudo mrcemu cluster local --down")


@main.group()
def cluster() -> None:
    """Servers to split a fabric over (Mininet's cluster edition, VXLAN links)."""


@cluster.command("local")
@click.argument("n", type=click.IntRange(2, 65), required=False)
@click.option("--down", is_flag=True, help="Remove the local servers, leaving nothing.")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Where to write the cluster file [default: /run/mrcemu/cluster/local.yaml].")
@click.option("--placement", type=click.Choice(["plane", "rack"]), default="plane",
              show_default=True, help="plane: hosts here, each plane's switches on a server;"
              " rack: each leaf with its hosts, NIC daemons included, on a server.")
@friendly
def cluster_local(n: int | None, down: bool, out: str | None, placement: str) -> None:
    """N-1 extra "servers" on this machine: network namespaces running sshd on a private
    underlay (MTU 9100), and a cluster file for them."""
    need_root("cluster local")
    from pathlib import Path

    from mrcemu.fabric import cluster_local as local

    if down:
        done = local.down()
        console.print(f"removed {done['sshd']} sshd, {done['namespaces']} namespaces, "
                      f"{done['devices']} devices")
        return
    if n is None:
        raise click.UsageError("give N, the number of servers (this machine included), "
                               "or --down")
    with console.status(f"making {n - 1} local server(s)"):
        path, c = local.up(n, Path(out) if out else None, placement)
    t = Table("server", "address", "underlay")
    for srv in c.servers:
        t.add_row(srv.name, srv.address, srv.underlay)
    console.print(t)
    console.print(f"cluster file: {path}\ntry: {' '.join(local.ssh_args(1, 'ip', '-br', 'link'))}"
                  "\nremove: sudo mrcemu cluster local --down")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def status(as_json: bool) -> None:
    """Nodes, their namespace PIDs, interfaces, link rates and state."""
    from mrcemu.fabric import state
    from mrcemu.nic.links import OPER_UP

    st = state.load_state()
    if st is None:
        if as_json:
            click.echo(json.dumps({"running": False}))
            return
        raise FabricStateError("no fabric is running: start one with 'sudo mrcemu up'")
    need_root("status")
    from mrcemu.fabric.servers import Servers

    topo = st.topo()
    layout = Layout(topo)
    # each node as its own server sees it (a split fabric's PIDs are that server's)
    servers = Servers.of_state(st)
    seen: dict[str, dict] = {}
    for server, names in servers.group(st.nodes).items():
        seen.update(servers.call(server, "links", nodes={n: st.nodes[n] for n in names}))
    nodes = []
    for name, pid in st.nodes.items():
        alive, links = seen[name]["alive"], seen[name]["links"]
        ifaces = []
        if alive:
            for i in layout.interfaces[name]:
                ifaces.append({"name": i.name, "peer": f"{i.peer_node}:{i.peer_name}",
                               "mbps": i.mbps, "state": links.get(i.name, "MISSING")})
        nodes.append({"name": name, "pid": pid, "alive": alive, "interfaces": ifaces,
                      **({"server": st.placement[name]} if st.placement else {})})
    # each NIC daemon as its host's server sees it
    nic_alive: dict[str, bool] = {}
    for server, names in servers.group(st.nics).items():
        up_ = servers.call(server, "alive", pids=[st.nics[n] for n in names])
        nic_alive.update({n: up_[str(st.nics[n])] for n in names})
    nics = {h: {"pid": pid, "alive": nic_alive[h],
                **({"server": st.placement[h]} if st.placement else {})}
            for h, pid in st.nics.items()}
    out = {"running": state.pid_alive(st.manager_pid), "phase": st.phase,
           "manager_pid": st.manager_pid, "topology": st.topology, "summary": st.summary,
           "nodes": nodes, "nics": nics}
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    t = Table(title=f"fabric {topo.name}: {st.phase}, manager PID {st.manager_pid}, "
              f"uSID End {ENGINE_NAMES.get(topo.usid_engine, topo.usid_engine)}")
    for col in ("node", "pid", "alive", "interfaces up", "down", "NIC daemon"):
        t.add_column(col)
    for n in nodes:
        up_ = [i["name"] for i in n["interfaces"] if i["state"] in OPER_UP]
        dn = [i["name"] for i in n["interfaces"] if i["state"] not in OPER_UP]
        nic = nics.get(n["name"])
        nic_s = "-" if nic is None else (f"PID {nic['pid']}" if nic["alive"]
                                         else f"[red]DEAD (PID {nic['pid']})[/]")
        t.add_row(n["name"], str(n["pid"]), "yes" if n["alive"] else "[red]DEAD[/]",
                  f"{len(up_)}/{len(n['interfaces'])}", ", ".join(dn) or "-", nic_s)
    console.print(t)


@main.command()
@click.argument("src")
@click.argument("dst")
@click.option("--topology", "topology", default=None,
              help="Topology file (default: the running fabric's, else default.yaml).")
@click.option("--json", "as_json", is_flag=True)
@friendly
def paths(src: str, dst: str, topology: str | None, as_json: bool) -> None:
    """Every path (EV) from SRC to DST: plane, spine, container address, hops and the
    emulated base round trip (the fixed latency the NICs' delay lines add)."""
    from mrcemu.fabric.state import load_state
    from mrcemu.topology.paths import paths as all_paths

    st = load_state() if topology is None else None
    topo = st.topo() if st else load(topology or DEFAULT_TOPOLOGY)
    a, b = (_host_index(x, topo) for x in (src, dst))
    try:
        ps = all_paths(topo, a, b)
    except ValueError as e:
        raise MrcemuError(str(e)) from None
    # Every path of a pair crosses as many switches (a source-routed leaf-spine), so
    # each has the pair's base round trip.
    rtt = latency.base_rtt_s(topo, a, b)
    if as_json:
        click.echo(json.dumps([{**p.to_json(), "base_rtt_s": round(rtt, 6)} for p in ps],
                              indent=1))
        return
    scale = latency.describe(topo)
    t = Table(title=f"{len(ps)} paths {src} -> {dst}", caption=(
        f"base RTT: the fixed round trip at 1:{scale['time_scale']:g}, "
        f"{latency.on_paper(rtt, scale)}") if rtt else "latency off")
    for col in ("EV", "plane", "spine", "outer DA (uSID path)", "hops", "base RTT"):
        t.add_column(col)
    for p in ps:
        t.add_row(f"0x{p.ev:08x}", str(p.plane), "-" if p.spine is None else str(p.spine),
                  str(p.container), " > ".join(p.hops), latency.duration(rtt))
    console.print(t)


def _host_index(name: str, topo: Topology) -> int:
    if not (name.startswith("h") and name[1:].isdigit()) or int(name[1:]) >= topo.hosts:
        raise MrcemuError(f"'{name}' is not a host of this topology: use h0..h{topo.hosts - 1}")
    return int(name[1:])


@main.command()
@click.argument("node")
@click.option("--json", "as_json", is_flag=True)
@friendly
def routes(node: str, as_json: bool) -> None:
    """NODE's kernel IPv6 routes, as the kernel reports them."""
    need_root("routes")
    from mrcemu.fabric import state
    from mrcemu.fabric.servers import Servers

    st = state.require_state()
    pid = node_pid(st.nodes, node)
    servers = Servers.of_state(st)
    got = servers.call(servers.of(node), "routes", pid=pid)  # read on the node's server
    if as_json:
        click.echo(json.dumps(got["routes"], indent=1))
        return
    click.echo(got["text"], nl=False)


@main.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.option("--transport", type=click.Choice(["mrc", "roce"]), default="mrc",
              show_default=True, help="What an RDMA program's RC queue pairs carry (hosts).")
@click.argument("node")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@friendly
def exec_(node: str, cmd: tuple[str, ...], transport: str) -> None:
    """Run CMD inside NODE's namespace: mrcemu exec h0 -- ip -6 addr

    On a host, an RDMA program runs unmodified over the emulated NIC (its verbs go
    through mrcemu's shim, its queue pairs over MRC or --transport roce), and the
    other hosts resolve by name on the out-of-band network:
    mrcemu exec h7 -- ib_write_bw & mrcemu exec h0 -- ib_write_bw h7"""
    need_root("exec")
    from mrcemu.fabric import state
    from mrcemu.fabric.servers import Servers, exec_argv

    st = state.require_state()
    pid = node_pid(st.nodes, node)
    servers = Servers.of_state(st)
    if node not in st.nics:
        argv = exec_argv(servers, servers.of(node), ["mnexec", "-a", str(pid), *cmd],
                         tty=sys.stdin.isatty())
        os.execvp(argv[0], argv)
    from mrcemu.fabric import hostprog

    sys.exit(_judged(st, hostprog.argv(st, node, transport, servers, list(cmd))))


def _judged(st: Any, argv: list[str]) -> int:
    """Run the program, and say whether the host NICs were faithful while it ran (their
    self-measurements started anew at its start: a program started later starts them
    anew for both). Its exit status."""
    from mrcemu import fidelity
    from mrcemu.nic.control import request

    hosts = list(st.nics)
    for h in hosts:
        request(h, "fidelity", reset=True)
    proc = subprocess.Popen(argv)
    # Ctrl-C reaches the program (our process group's); we wait to give the verdict
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rc = proc.wait()
    v = fidelity.judge({h: request(h, "fidelity")["fidelity"] for h in hosts},
                       fidelity.cpus(), fidelity.for_links(st.topo().host_link_mbps))
    if v["ok"]:
        err.print("mrcemu: the emulated NICs were faithful while the program ran")
    else:
        err.print("mrcemu: the emulated NICs were NOT faithful while the program ran: "
                  + "; ".join(v["reasons"]) + " (bring the fabric up slower: "
                  "mrcemu up --slowdown K)")
    return rc


def _programs_line(progs: list[dict]) -> str:
    """Each program's exit, in one line: `h7 0, h0 0`."""
    return ", ".join(f"{p['host']} {'ended by ' + p['ended_by'] if p['ended_by'] else p['exit']}"
                     for p in progs)


@main.command()
@click.argument("host")
@click.option("--duration", type=click.FloatRange(min=0.1), default=None,
              help="Seconds to stream (default: until Ctrl-C).")
@click.option("--interval", type=click.FloatRange(min=0.01), default=0.1, show_default=True,
              help="Seconds between polls of the NIC.")
@friendly
def events(host: str, duration: float | None, interval: float) -> None:
    """Stream HOST's EV state changes on its MRC connections, as they happen: each EV
    marked GOOD or ASSUMED_BAD by the policy core, and why (libmrc's EV events; a
    dropped count says when the NIC's history let some go before they were read)."""
    need_root("events")
    from mrcemu.api import Fabric

    fab = Fabric.attach()
    me = fab._host(host)
    peers = [p for p in range(fab.topology.hosts) if p != me]
    # from now on: what happened before the stream started is not news
    since = {p: fab.ev_events(me, p).next for p in peers}
    end = None if duration is None else time.monotonic() + duration
    try:
        while end is None or time.monotonic() < end:
            for p in peers:
                got = fab.ev_events(me, p, since[p])
                since[p] = got.next
                if got.dropped:
                    click.echo(f"h{me}->h{p}: {got.dropped} changes dropped")
                for e in got.events:
                    click.echo(f"t={e.t:.6f} h{me}->h{p} ev 0x{e.ev & 0xFFFFFFFF:08x} "
                               f"{e.old} -> {e.new} ({e.why})")
            time.sleep(interval)
    except KeyboardInterrupt:
        pass


def _ev_arg(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise click.BadParameter(f"{text!r}: an EV, as reports print it (0x00010002) "
                                 "or a number") from None


@main.command()
@click.argument("host")
@click.argument("peer")
@click.option("--use", "use", multiple=True, metavar="EV",
              help="Use these EVs alone (repeat it; as `mrcemu paths` prints them): each "
                   "other one is denied, a denied one listed comes back through probes.")
@click.option("--min-active", type=click.IntRange(min=1), default=None,
              help="The fewest usable EVs the policy keeps in use.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def evs(host: str, peer: str, use: tuple[str, ...], min_active: int | None,
        as_json: bool) -> None:
    """Show, or set, the EV profile of HOST's MRC connection to PEER (libmrc's EV
    profile): each EV's state, whether data is sprayed over it, and its path."""
    need_root("evs")
    from mrcemu.api import Fabric

    fab = Fabric.attach()
    prof = fab.ev_profile(host, peer, [_ev_arg(e) for e in use] or None, min_active)
    if as_json:
        click.echo(json.dumps({"min_active": prof.min_active,
                               "evs": [r._asdict() for r in prof.evs]}))
        return
    table = Table(title=f"EVs {host} -> {peer} (min active {prof.min_active})")
    for col in ("EV", "state", "active", "plane", "spine"):
        table.add_column(col)
    for r in prof.evs:
        table.add_row(f"0x{r.ev & 0xFFFFFFFF:08x}", r.state, "yes" if r.active else "-",
                      str(r.plane), "-" if r.spine is None else str(r.spine))
    Console().print(table)


@main.command()
@click.argument("host")
@click.argument("peer")
@click.argument("ev")
@friendly
def probe(host: str, peer: str, ev: str) -> None:
    """Send a probe now on EV of HOST's MRC connection to PEER (libmrc's EV probe);
    `mrcemu events HOST` shows what its answer changes."""
    need_root("probe")
    from mrcemu.api import Fabric

    probe_id = Fabric.attach().probe(host, peer, _ev_arg(ev))
    click.echo(f"probe {probe_id} sent on EV 0x{_ev_arg(ev) & 0xFFFFFFFF:08x}, "
               f"{host} -> {peer}")


@main.command(name="map")
@click.option("--interval", "interval_ms", type=click.FloatRange(min=1.0), default=50.0,
              show_default=True, help="Milliseconds between probe rounds.")
@click.option("--duration", type=click.FloatRange(min=0.5), default=None,
              help="Seconds to probe (default: until Ctrl-C; 2 with --json).")
@click.option("--json", "as_json", is_flag=True,
              help="Probe for --duration, then print every link's loss and RTT and the bad "
                   "links as one JSON document.")
@friendly
def map_(interval_ms: float, duration: float | None, as_json: bool) -> None:
    """Clustermapper: every host self-probes its leaf (leaf:self) and each spine
    (leaf:spine:leaf:self) to localise a bad host link or leaf-spine link, live."""
    need_root("map")
    from mrcemu.api import Fabric

    fab = Fabric.attach()
    if as_json:
        click.echo(json.dumps(fab.map(duration or 2.0, interval_ms / 1e3), indent=1))
        return
    from rich.live import Live

    from mrcemu.fabric.mapper import Mapper
    from mrcemu.fabric.servers import split_servers

    with Mapper(fab.layout, fab.nodes, interval_ms / 1e3, servers=split_servers()) as m, \
            Live(console=console, auto_refresh=False) as live:
        def show(now: float) -> None:
            live.update(map_table(m.links(now), m.window, m.sent), refresh=True)

        m.run(duration, on_tick=show)
        show(time.monotonic())


def map_table(links: dict[str, Any], window: float, sent: int) -> Table:
    """Links with any loss first (bad ones red), then a line for the clean rest."""
    t = Table(title=f"link health over the last {window:.1f} s ({sent} probes sent)")
    for col, just in (("link", "left"), ("loss", "right"), ("RTT ms", "right"),
                      ("probes", "right"), ("", "left")):
        t.add_column(col, justify=just)
    lossy = sorted((h for h in links.values() if h.lost), key=lambda h: (-h.lost, h.link))
    for h in lossy:
        color = "red" if h.bad else "yellow"
        t.add_row(f"[{color}]{h.link}[/]", f"{100 * h.loss:.0f} %",
                  "-" if h.rtt_ms is None else f"{h.rtt_ms:.2f}", str(h.probes),
                  "[red]BAD[/]" if h.bad else "")
    clean = [h for h in links.values() if not h.lost]
    rtts = sorted(h.rtt_ms for h in clean if h.rtt_ms is not None)
    med = f"{rtts[len(rtts) // 2]:.2f}" if rtts else "-"
    t.add_row(f"[green]{len(clean)} links clean[/]", "0 %", f"{med} (median)", "", "")
    return t


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--timeout", default=5.0, show_default=True, help="Seconds to wait for probes.")
@friendly
def check(as_json: bool, timeout: float) -> None:
    """Probe every path between every ordered host pair; non-zero exit on any failure."""
    need_root("check")
    from mrcemu.api import Fabric

    fab = Fabric.attach()
    topo = fab.topology
    with Progress(TextColumn("probes"), BarColumn(), MofNCompleteColumn(), console=err,
                  transient=True) as bar:
        task = bar.add_task("probes", total=None)
        result = fab.check(timeout, lambda n, total: bar.update(task, completed=n, total=total))
    if as_json:
        click.echo(json.dumps({**result.to_json(), "usid_engine": topo.usid_engine}, indent=1))
    else:
        t = Table()
        t.add_column("src\\dst")
        for b in range(topo.hosts):
            t.add_column(f"h{b}", justify="right")
        cell = {(p.src, p.dst): p for p in result.pairs}
        for a in range(topo.hosts):
            row = []
            for b in range(topo.hosts):
                p = cell.get((a, b))
                if p is None:
                    row.append("-")
                else:
                    color = "green" if p.ok == p.total else "red"
                    row.append(f"[{color}]{p.ok}/{p.total}[/]")
            t.add_row(f"h{a}", *row)
        console.print(t)
        console.print(f"check: {sum(p.ok for p in result.pairs)}/{result.probes} paths "
                      f"delivered, each at the right port with the right hop limit "
                      f"({result.seconds:.2f} s; uSID End: the {topo.usid_engine} engine)")
        for p in result.pairs:
            for f in p.failures[:3]:
                err.print(f"[red]h{p.src} -> h{p.dst} EV {f['ev']}: {f['why']}[/]")
    if not result.ok:
        sys.exit(1)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--opcode", "opcodes", multiple=True,
              help="Only this opcode (name such as RELIABILITY_NACK, or 0xdd); repeatable.")
@click.option("--ev", "evs", multiple=True, help="Only this EV (hex); repeatable.")
@click.option("--psn", "psns", multiple=True, type=int, help="Only this PSN; repeatable.")
@click.option("--json", "as_json", is_flag=True)
@friendly
def decode(file: str, opcodes: tuple[str, ...], evs: tuple[str, ...], psns: tuple[int, ...],
           as_json: bool) -> None:
    """Decode the MRC/RoCEv2 packets of a pcap or pcapng file, one row per packet."""
    from mrcemu.wire import pcap
    from mrcemu.wire.constants import Opcode

    want_ops = set()
    for o in opcodes:
        try:
            want_ops.add(Opcode(int(o, 0)).name if o[:1].isdigit() else Opcode[o.upper()].name)
        except (KeyError, ValueError):
            raise MrcemuError(f"--opcode {o!r} is not an opcode: use one of "
                              + ", ".join(op.name for op in Opcode)) from None
    try:
        want_evs = {int(e, 16) for e in evs}
    except ValueError:
        raise MrcemuError("--ev takes a hex EV such as 0xc0010001") from None
    rows = [r for r in pcap.read(file)
            if (not want_ops or r.opcode in want_ops)
            and (not want_evs or (r.ev != "-" and int(r.ev, 16) in want_evs))
            and (not psns or r.psn in psns)]
    if as_json:
        click.echo(json.dumps([r.to_json() for r in rows], indent=1))
        return
    t = Table()
    for col in ("#", "time", "iface", "src", "dst", "EV", "DSCP", "ECN", "opcode", "PSN",
                "info"):
        t.add_column(col)
    t0 = rows[0].time if rows else 0.0
    for r in rows:
        style = "red" if r.error else ("yellow" if r.trimmed else "")
        t.add_row(str(r.n), f"{r.time - t0:.6f}", r.iface or "-", r.src, r.dst, r.ev, r.dscp,
                  str(r.ecn), r.opcode, "-" if r.psn is None else str(r.psn),
                  r.info if r.opcode != "-" else r.error, style=style)
    console.print(t)
    console.print(f"{len(rows)} packets")


@main.group()
def wireshark() -> None:
    """The MRC Wireshark dissector."""


@wireshark.command(name="install")
@friendly
def wireshark_install() -> None:
    """Copy mrc.lua to your Wireshark personal plugin folder."""
    import shutil
    from pathlib import Path

    src = Path(__file__).parent / "wireshark" / "mrc.lua"
    home = Path(os.environ.get("SUDO_USER") and os.path.expanduser(
        f"~{os.environ['SUDO_USER']}") or Path.home())
    dest_dir = home / ".local" / "lib" / "wireshark" / "plugins"
    dest_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dest_dir / "mrc.lua")
    console.print(f"installed {dest_dir / 'mrc.lua'}; restart Wireshark, then filter with "
                  "'mrc' (e.g. mrc.nack.reason == 1)")


@main.command()
@click.argument("src")
@click.argument("dst")
@click.option("--size", default="64MiB", show_default=True, help="Bytes to write: 64MiB, 8MiB...")
@click.option("--transport", type=click.Choice(["mrc", "roce"]), default="mrc", show_default=True)
@click.option("--seed", default=1, show_default=True, help="Seed of the source data.")
@click.option("--lb", "load_balancing", type=click.Choice(list(LB_POLICIES)), default=None,
              help="MRC's load-balancing policy for this pair (docs/load-balancing.md); "
                   "default: the fabric's, mrc.")
@click.option("--json", "as_json", is_flag=True)
@friendly
def send(src: str, dst: str, size: str, transport: str, seed: int, load_balancing: str | None,
         as_json: bool) -> None:
    """One RDMA WRITE of --size bytes from SRC to DST; checks SHA-256 at both ends."""
    need_root("send")
    from mrcemu.api import Fabric
    from mrcemu.units import parse_size

    fab = Fabric.attach()
    a, b = _host_index(src, fab.topology), _host_index(dst, fab.topology)
    if a == b:
        raise MrcemuError("SRC and DST must be different hosts")
    n = parse_size(size)
    with Progress(TextColumn(f"{transport} {src}->{dst}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("send", total=None)
        res = fab.send(a, b, n, transport, seed, progress=lambda done, total: bar.update(
            task, completed=done, total=total), load_balancing=load_balancing).report
    if as_json:
        click.echo(json.dumps(res, indent=1))
    else:
        _print_transfer(res)
    if not res["integrity_ok"]:
        sys.exit(1)


def _print_transfer(res: dict) -> None:
    ok = "[green]equal[/]" if res["integrity_ok"] else "[red]DIFFERENT[/]"
    t = Table(title=f"{res['transport']} {res['src']} -> {res['dst']}, {res['size']:,} bytes",
              show_header=False)
    sc = res["scale"]
    if res["completed"]:
        t.add_row("completion", latency.on_paper(res["completion_s"], sc))
        t.add_row("goodput", f"{res['goodput_mbps']:.1f} Mb/s of {res['capacity_mbps']:.0f} "
                  f"configured ({100 * res['goodput_mbps'] / res['capacity_mbps']:.1f} %)")
    else:
        t.add_row("completion", "[red]did not complete[/]" + (
            f" (QP failed: {res.get('failed_why') or 'no reason given'})" if res["failed"]
            else ""))
    t.add_row("base round trip", latency.on_paper(res["base_rtt_s"], sc) if sc["latency"]
              else "latency off")
    t.add_row("scale", f"1:{sc['time_scale']:g} of the paper's fabric")
    t.add_row("SHA-256", f"{ok} ({res['sha256_dst'][:16]}...)")
    if "load_balancing" in res:
        t.add_row("load balancing", res["load_balancing"])
    t.add_row("paths used", str(res["paths_used"]))
    t.add_row("retransmits / trims / NACKs / RTOs",
              f"{res['retransmits']} / {res['trims']} / {res['nacks']} / {res['rtos']}")
    bad = {k: v for k, v in res["ev_states"].items() if v != "GOOD"}
    t.add_row("EV state changes", str(len(res["ev_changes"])))
    v = res.get("fidelity")
    if v is not None:
        t.add_row("fidelity", "[green]faithful[/]" if v["ok"] else
                  "[red]NOT faithful[/]: " + "; ".join(v["reasons"]))
    t.add_row("EVs not GOOD", ", ".join(f"{k}={v}" for k, v in list(bad.items())[:8]) or "-")
    console.print(t)
    h = Table(title="data packets per path")
    h.add_column("path")
    h.add_column("packets", justify="right")
    h.add_column("")
    top = max(res["packets_per_path"].values(), default=1)
    for k, v in res["packets_per_path"].items():
        h.add_row(k, str(v), "#" * max(1, round(30 * v / top)))
    console.print(h)


@main.command()
@click.argument("node", required=False)
@click.option("--json", "as_json", is_flag=True)
@friendly
def stats(node: str | None, as_json: bool) -> None:
    """Per-port counters of the switch BPF program (every switch, or NODE)."""
    need_root("stats")
    from mrcemu.fabric import bpf
    from mrcemu.fabric.inject import active_faults, path_loss_key
    from mrcemu.topology.faults import targets as fault_targets

    topo, nodes = running_topology()
    layout = Layout(topo)
    if node is not None and (node not in layout.nodes or node.startswith("h")):
        raise MrcemuError(f"'{node}' is not a switch of this fabric (e.g. p0l0, p3s1)")
    from mrcemu.fabric import state
    from mrcemu.fabric.servers import Servers

    # every server's switch program, merged (one server: this machine's)
    merged = Servers.of_state(state.require_state()).counters()
    counters = merged["state"]
    out: dict[str, dict[str, dict[str, int]]] = {}
    for sw in layout.switches:
        if node is not None and sw.name != node:
            continue
        for i in layout.interfaces[sw.name]:
            c = counters.get(i.mac, {})
            out.setdefault(sw.name, {})[i.name] = {
                k: c.get(k, 0) for k in ("packets", "bytes", "ecn_marked", "trimmed", "dropped")}
    # Active path-loss faults: their own counters, under the port they act on (a port's
    # `dropped` is its buffer's; `packets` counts what a path loss dropped too).
    losses = []
    path_losses = [f for f in active_faults() if f.kind == "path-loss"]
    per_path = {bpf.PathLossKey(mac, bytes.fromhex(src), bytes.fromhex(dst), ev_hi): v
                for mac, src, dst, ev_hi, v in merged["path_loss"]}
    for f in path_losses:
        (port,) = fault_targets(layout, f)
        c = per_path.get(path_loss_key(layout, f), {})
        row = {"path": f.target, "port": port.name, "percent": f.value,
               "matched": c.get("matched", 0), "dropped": c.get("dropped", 0)}
        if port.node in out:
            out[port.node][port.name].setdefault("path_loss", []).append(row)
            losses.append(row)
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    t = Table(title="switch egress counters (tc-BPF)")
    for col in ("port", "packets", "bytes", "ECN marked", "trimmed", "dropped"):
        t.add_column(col, justify="right" if col != "port" else "left")
    for ports in out.values():
        for name, c in ports.items():
            t.add_row(name, str(c["packets"]), str(c["bytes"]), str(c["ecn_marked"]),
                      str(c["trimmed"]), str(c["dropped"]))
    console.print(t)
    if losses:
        t = Table(title="path loss (fault path-loss): that path's packets on its port")
        for col in ("path", "port", "percent", "matched", "dropped"):
            t.add_column(col)
        for r in losses:
            t.add_row(r["path"], r["port"], f"{r['percent']:g}", str(r["matched"]),
                      str(r["dropped"]))
        console.print(t)


@main.command()
@click.argument("kind", type=click.Choice(FAULT_KINDS))
@click.argument("target")
@click.option("--value", type=float, default=None,
              help="Percent: packets lost (loss, path-loss, host-loss) or rate kept "
                   "(degrade).")
@click.option("--one-way", is_flag=True, help="gray/loss: only from the link's first node.")
@click.option("--period", type=float, default=None, help="flap: seconds per down+up cycle.")
@click.option("--duty", type=float, default=None, help="flap: fraction of the period down.")
@friendly
def fail(kind: str, target: str, value: float | None, one_way: bool, period: float | None,
         duty: float | None) -> None:
    """Inject a fault now. TARGET: a link (p2l0-p2s1), switch (p3s1), host port (h0-p2),
    plane (2), host (h3, host-loss), or for path-loss one pair's path (h0-h7/p2s1). Undo
    it with `mrcemu heal`."""
    need_root("fail")
    from mrcemu.api import Fabric

    f = Fabric.attach().fail(kind, target, value, one_way, period=period, duty=duty)
    console.print(f"injected {f.kind} on {f.target} at t={f.at:.6f} (monotonic)")


@main.command()
@click.argument("fault", required=False)
@friendly
def heal(fault: str | None) -> None:
    """Heal FAULT (as KIND:TARGET, e.g. gray:p2l0-p2s1), or every active fault."""
    need_root("heal")
    from mrcemu.api import Fabric

    healed = Fabric.attach().heal(fault)
    for f in healed:
        console.print(f"healed {f.kind} on {f.target}")
    if not healed:
        console.print("no active faults")


def _fault_line(d: dict) -> str:
    """A timeline's fault event as `run` and `paper` show it: at the fabric's full-speed
    time, as the report gives it."""
    t = d["t"] / d.get("slowdown", 1.0)
    return (f"  [yellow]fault[/] t={t:.2f} s {d['action']} {d['kind']} {d['target']}"
            + (f" FAILED: {d['error']}" if d["error"] else ""))


def print_run_table(out: Console, rep: dict) -> None:
    """`mrcemu run`'s comparison table, made to read in an 80-column terminal: short row
    labels that never wrap, and the faults they number named below it."""
    from mrcemu.scenario.report import fault_legend, table_rows

    head, rows = table_rows(rep)
    where = rep.get("cluster")
    t = Table(title=f"{rep['scenario']} on {rep['topology']}"
              + (f" over {len(where['nodes_per_server'])} servers" if where else "")
              + (" (PARTIAL)" if rep["partial"] else ""))
    for i, h in enumerate(head):
        t.add_column(h, no_wrap=not i)  # the labels are short; values may wrap
    for r in rows:
        t.add_row(*r)
    out.print(t)
    for line in fault_legend(rep):
        out.print(line)


@main.command()
@click.argument("scenario", default="failover")
@click.option("--out", "out", default="runs", show_default=True,
              type=click.Path(file_okay=False), help="Folder for the run folders.")
@click.option("--slowdown", default="auto", show_default=True, type=SLOWDOWN,
              help="Run the whole experiment this many times slower: links, transport "
                   "clocks, fault times, so that this host runs it faithfully (see "
                   "docs/fidelity.md); auto: the smallest this machine's calibration "
                   "expects to be faithful. The report still gives every time and rate "
                   "at full speed.")
@click.option("--cluster", "cluster_file", default=None, type=click.Path(dir_okay=False),
              help="Split the fabric over the servers of this cluster file "
                   "(see 'mrcemu cluster local').")
@click.option("--latency", "latency_mode", type=click.Choice(["on", "off"]), default="on",
              show_default=True,
              help="The scale model's fixed latency (the topology's nic_latency_us and "
                   "switch_latency_us); off: serialization and queueing alone, for "
                   "comparison.")
@usid_engine_option
@friendly
def run(scenario: str, out: str, slowdown: float | str, cluster_file: str | None,
        latency_mode: str, usid_engine: str | None) -> None:
    """Run SCENARIO (a built-in name or a YAML file; default: failover) over MRC and
    RoCE on one fabric, and write runs/<time>-<scenario>/ with the report, plots and
    capture. Ctrl-C stops early, still writing a partial report."""
    from pathlib import Path

    from mrcemu import fidelity
    from mrcemu.scenario import load as load_scenario
    from mrcemu.scenario.job import run as run_job
    from mrcemu.scenario.pace import paced
    from mrcemu.slowdown import next_slowdown

    # A bad file stops here, before anything starts.
    sc = load_scenario(scenario).as_run(1.0, latency=latency_mode == "on")
    if usid_engine:
        sc = replace(sc, topology=replace(sc.topology, usid_engine=usid_engine))
    if cluster_file:
        from mrcemu.topology.cluster import load as load_cluster

        load_cluster(cluster_file)  # likewise
        if slowdown == "auto":
            raise click.UsageError("--slowdown auto calibrates this machine alone: with "
                                   "--cluster, give the slowdown as a number")
    need_root("run")
    from mrcemu.fabric import state

    running = state.load_state()
    if running is not None and state.pid_alive(running.manager_pid):
        raise FabricStateError("a fabric is already running: 'mrcemu run' brings up its own; "
                               "stop the other with 'sudo mrcemu down'")
    console.print(f"[bold]{sc.name}[/]: {sc.description.strip()}")
    with Progress(TextColumn("{task.description:>10}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("{task.fields[info]}"), console=err) as bar:
        tasks: dict[str, Any] = {}
        goodput: dict[str, float] = {}

        def ui(event: str, d: dict) -> None:
            if event == "up":
                key = "up:" + d["stage"]
                if key not in tasks:
                    tasks[key] = bar.add_task(d["stage"], total=d["total"], info="")
                bar.update(tasks[key], completed=d["n"])
            elif event == "transport":
                tasks[d["transport"]] = bar.add_task(d["transport"], total=d["iterations"],
                                                     info="")
            elif event == "iteration":
                rec = d["record"]
                size = sum(f["size"] for f in rec["flows"] if f.get("ok"))
                if rec.get("end"):
                    # at full speed, as the report gives it
                    goodput[d["transport"]] = (size * 8 / (rec["end"] - rec["start"]) / 1e6
                                               * d.get("slowdown", 1.0))
                info = (f"programs: {_programs_line(rec['programs'])}" if "programs" in rec
                        else f"{goodput.get(d['transport'], 0):.0f} Mb/s last iteration")
                bar.update(tasks[d["transport"]], completed=d["index"] + 1, info=info)
            elif event == "fault":
                bar.console.print(_fault_line(d))
            elif event == "stage":
                bar.console.print(f"  {d['text']}")
            elif event == "interrupt":
                bar.console.print("  [red]interrupted[/]: finishing the partial report and "
                                  "tearing down (Ctrl-C again to hurry)")
            elif event == "transport_done":
                s = d["summary"]
                job = s["job_completion_s"]
                bar.console.print(f"  {d['transport']}: job "
                                  f"{'-' if job is None else f'{job:.3f}'} s, " + (
                                      f"programs: {_programs_line(s['programs'])}"
                                      if "programs" in s else
                                      f"intact: {s['integrity_ok']}"))

        # Ctrl-C ends the calibration and the programs' probe too (their fabric torn
        # down), even from a shell that started us with SIGINT ignored; the job then
        # takes the signal itself, for a partial report.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            sc, pace = paced(sc, slowdown, ui)
        except KeyboardInterrupt:
            err.print("[bold red]mrcemu:[/] interrupted while choosing the slowdown: nothing "
                      "was run, and its fabric was torn down")
            sys.exit(130)
        folder = run_job(sc, Path(out), ui, cluster=cluster_file, pace=pace)
    rep = json.loads((folder / "report.json").read_text())
    if rep["transports"]:
        print_run_table(console, rep)
    verdict = rep.get("fidelity")
    if verdict and not verdict["ok"]:
        # The figures above are this host's as much as the fabric's: say why, and the way out.
        console.print(f"[yellow]{fidelity.line(verdict)}[/] A slower run gives figures to "
                      f"trust: --slowdown {next_slowdown(sc.slowdown):g} (docs/fidelity.md).")
    console.print(f"report: [bold]{folder}[/]")
    if rep["partial"]:
        sys.exit(130)
    failed = [f"{n}: {p['host']} '{p['command']}' exit {p['exit']}"
              for n, t in rep["transports"].items() for p in t.get("programs", [])
              if p["exit"] != 0]
    if failed:
        err.print("[bold red]mrcemu:[/] a program failed: " + "; ".join(failed)
                  + f" (its output: {folder / 'report.md'})")
        sys.exit(1)
    mrc = rep["transports"].get("mrc")
    if mrc is not None and mrc["integrity_ok"] is False:
        err.print("[bold red]mrcemu:[/] MRC did not deliver every message intact")
        sys.exit(1)


@main.command()
@click.argument("ids", nargs=-1)
@click.option("--quick", is_flag=True, help="Short runs (about 5 minutes in all here).")
@click.option("--out", "out", default="paper", show_default=True,
              type=click.Path(file_okay=False), help="Folder for paper.md, paper.json and a "
              "folder per experiment.")
@click.option("--slowdown", default="auto", show_default=True, type=SLOWDOWN,
              help="Run every experiment this many times slower; auto: each at the "
                   "smallest this machine's calibration expects to be faithful, and a "
                   "run that is not run again a step slower (twice at most).")
@click.option("--latency", "latency_mode", type=click.Choice(["on", "off"]), default="on",
              show_default=True,
              help="The scale model's fixed latency (the topology's nic_latency_us and "
                   "switch_latency_us); off: serialization and queueing alone, for "
                   "comparison.")
@friendly
def paper(ids: tuple[str, ...], quick: bool, out: str, slowdown: float | str,
          latency_mode: str) -> None:
    """Reproduce the white paper's testbed experiments (E0..E11, or the IDS given): run
    each, measure it, and judge it against what the paper observed."""
    from pathlib import Path

    from mrcemu.paper import run as paper_run

    paper_run.select(list(ids))  # an unknown id stops here, before anything starts
    need_root("paper")

    def ui(event: str, d: dict) -> None:
        if event == "experiment":
            console.print(f"[bold]{d['id']}[/]: {d['description']}")
        elif event == "judged":
            word = paper_run.verdict(d)
            mark = f"[green]{word}[/]" if d["consistent"] else f"[red]{word}[/]"
            console.print(f"  {d['id']}: {mark}: {d['reason']}")
        elif event == "skipped":
            console.print(f"[dim]{d['id']}: {d['reason']}[/]")
        elif event == "stage":
            console.print(f"  {d['text']}")
        elif event == "fault":
            console.print(_fault_line(d))
        elif event == "interrupt":
            console.print("  [red]interrupted[/]: finishing this run's partial report; no "
                          "experiment after it starts (Ctrl-C again to hurry)")

    # Ctrl-C stops the whole reproduction, not only the run it lands in (paper.run), and
    # between runs too, even from a shell that started us with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    doc = paper_run.run(list(ids), Path(out), quick, slowdown, ui,
                        latency=latency_mode == "on")
    words = [paper_run.verdict(r) for r in doc["experiments"]]
    unjudged = words.count("not judged")
    console.print(f"{words.count('consistent')} of {len(words) - words.count('not run')} run "
                  "consistent with the paper"
                  + (f" ({unjudged} not judged)" if unjudged else "")
                  + f"; {Path(out) / 'paper.md'}")
    if doc.get("interrupted"):
        err.print(f"interrupted during {doc['interrupted']}: the experiments before it are "
                  "judged; the fabric was torn down")
        sys.exit(130)


@main.command()
@click.argument("topology", default="default")
@click.option("--scenario", "scenario", default=None,
              help="Also say what `--slowdown auto` picks for this scenario (a built-in "
                   "name or a YAML file); a workload of programs is run once to measure "
                   "what they cost the NICs, anew.")
@friendly
def calibrate(topology: str, scenario: str | None) -> None:
    """Measure what a packet through TOPOLOGY's fabric costs this machine (its fabric up
    for a short all-to-all, then down), which `--slowdown auto` picks from. Runs
    measure it themselves the first time they need it; this measures it anew."""
    from mrcemu.scenario import load as load_scenario
    from mrcemu.scenario.calibrate import calibration
    from mrcemu.scenario.pace import choose_for
    from mrcemu.topology import load as load_topology

    sc = load_scenario(scenario) if scenario else None  # a bad file stops here
    topo = sc.topology if sc else load_topology(topology)
    need_root("calibrate")

    def ui(event: str, d: dict) -> None:
        if event == "stage":
            err.print(f"  {d['text']}")

    cal = calibration(topo, ui, fresh=True)
    console.print(f"{topo.name}: {cal.cpu_us_per_packet:.1f} us of CPU per delivered packet "
                  f"({cal.packets} packets in {cal.seconds:.1f} s at slowdown {cal.slowdown:g}"
                  f", the machine {cal.busy_share:.0%} busy, {cal.cpus} CPUs)")
    if sc is not None:
        console.print(choose_for(sc, ui, fresh=True).describe())


@main.command(name="cli")
@friendly
def mn_cli() -> None:
    """The Mininet CLI on the running fabric (e.g. `h0 ip -6 route`)."""
    need_root("cli")
    from mrcemu.fabric.attach import attached_cli

    topo, nodes = running_topology()
    attached_cli(nodes)


if __name__ == "__main__":
    main()


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--brief", is_flag=True, help="One line: what is missing, if anything.")
@click.option("--again", is_flag=True, help="Probe again (once per boot otherwise).")
@friendly
def doctor(as_json: bool, brief: bool, again: bool) -> None:
    """Each kernel and system capability mrcemu uses: found or missing, what is lost
    without it, and the fix. Exits 1 when the fabric cannot run here."""
    if os.geteuid() != 0 and brief:  # `make install` as a user: say how, probe nothing
        console.print("mrcemu doctor: the kernel's capabilities are probed as root: run "
                      "'sudo .venv/bin/mrcemu doctor'", highlight=False, soft_wrap=True)
        return
    need_root("doctor")  # the probes make namespaces, qdiscs and BPF programs
    from mrcemu import preflight
    from mrcemu.fabric import preflight_probe, usid_engine

    found = preflight_probe.found(refresh=again)
    missing = preflight.missing_for_fabric(found)
    try:
        engine: str | None = usid_engine.choose("auto", {"kernel": found["usid_kernel"],
                                                         "bpf": found["usid_bpf"]})
    except usid_engine.EngineError as e:
        engine = None
        missing.append(str(e))
    if as_json:
        click.echo(json.dumps({"found": found, "usid_engine": engine, "fabric_ok": not missing},
                              indent=1))
    elif brief:
        gone = [c.name for c in preflight.CAPABILITIES if found[c.key] is not None]
        console.print(f"mrcemu doctor: uSID End engine {ENGINE_NAMES.get(engine or '', 'none')}"
                      + (f"; missing: {', '.join(gone)}" if gone else "; everything found")
                      + " ('mrcemu doctor' says more)", highlight=False, soft_wrap=True)
    else:
        t = Table("capability", "here", "without it", "fix", title="what mrcemu uses")
        for name, here, without, fix in preflight.rows(found):
            t.add_row(name, here if here == "found" else f"[yellow]{here}[/]", without, fix)
        console.print(t)
        console.print(f"uSID End engine: {ENGINE_NAMES.get(engine or '', 'none')}"
                      + (" (this kernel has no seg6local: the BPF program performs the End)"
                         if engine == "bpf" else ""), highlight=False)
    if missing:
        for line in missing:
            err.print(f"[bold red]mrcemu:[/] {line}", highlight=False, soft_wrap=True)
        sys.exit(1)

main.add_command(study)
