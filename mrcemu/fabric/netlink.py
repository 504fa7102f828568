"""Writing a NodeTable into a kernel with pyroute2, and reading it back.

pyroute2 0.9 cannot express the seg6local `flavors` attribute (its NLA map stops
at SEG6_LOCAL_VRFTABLE). `Seg6LocalEncap` adds SEG6_LOCAL_COUNTERS (10) and
SEG6_LOCAL_FLAVORS (11) from the kernel UAPI, and is registered as the decoder
for LWTUNNEL_ENCAP_SEG6_LOCAL. And pyroute2 computes each htb class's rate tables in
Python (256 transmit times for the rate, 256 for the ceil) on every request, the same
tables for every port at one rate: `_cached_calc_rtab` keeps them. This is the one
place we extend pyroute2.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from ipaddress import IPv6Address, IPv6Network

from pyroute2 import IPRoute
from pyroute2.netlink import nla
from pyroute2.netlink.rtnl.rtmsg import rtmsg
from pyroute2.netlink.rtnl.tcmsg.common import nla_plus_rtab

from mrcemu.topology.routes import END_DEV, NodeTable, Route

LWTUNNEL_ENCAP_SEG6_LOCAL = 7
SEG6_LOCAL_FLV_OP_NEXT_CSID = 1 << 4
LCBLOCK_BITS = 32
LCNODE_FN_BITS = 16
RTPROT_STATIC = 4
RTN_BLACKHOLE = 6
# Where a BPF engine's End reads back (KernelRoute.dev): it runs at every port's ingress.
END_INGRESS = "ingress"
TC_H_CLSACT_INGRESS = 0xFFFFFFF2
NUD_PERMANENT = 0x80
IFA_F_NODAD = 0x02


class Seg6LocalEncap(rtmsg.seg6local_encap_info):
    __slots__ = ()

    nla_map = rtmsg.seg6local_encap_info.nla_map + (
        ("SEG6_LOCAL_COUNTERS", "hex"),
        # The kernel parses this nest strictly: it must carry NLA_F_NESTED.
        ("SEG6_LOCAL_FLAVORS", "flavors|nested"),
    )

    class flavors(nla):
        __slots__ = ()

        nla_map = (
            ("SEG6_LOCAL_FLV_UNSPEC", "none"),
            ("SEG6_LOCAL_FLV_OPERATION", "uint32"),
            ("SEG6_LOCAL_FLV_LCBLOCK_BITS", "uint8"),
            ("SEG6_LOCAL_FLV_LCNODE_FN_BITS", "uint8"),
        )


rtmsg.encaps[LWTUNNEL_ENCAP_SEG6_LOCAL] = Seg6LocalEncap


_calc_rtab = nla_plus_rtab.parms.calc_rtab
_RTABS: dict[tuple, tuple[tuple[int, ...], int]] = {}


def _cached_calc_rtab(self: nla, kind: str) -> list[int]:
    """pyroute2's `calc_rtab` (a rate table, and the cell size it chose), computed once
    for each set of inputs it reads: a default fabric's bring-up asked for it 1,536
    times, a third of the time it spent shaping."""
    key = (kind, self.get("mtu", 0), self[f"{kind}_cell_log"], self[f"{kind}_mpu"],
           self.get(kind, "rate"))
    hit = _RTABS.get(key)
    if hit is None:
        rtab = _calc_rtab(self, kind)
        _RTABS[key] = (tuple(rtab), self[f"{kind}_cell_log"])
        return rtab
    self[f"{kind}_cell_align"] = -1
    self[f"{kind}_cell_log"] = hit[1]
    return list(hit[0])


nla_plus_rtab.parms.calc_rtab = _cached_calc_rtab


def end_next_csid_encap() -> dict:
    return {"attrs": [
        ("SEG6_LOCAL_ACTION", "End"),  # pyroute2 maps the action by its name
        ("SEG6_LOCAL_FLAVORS", {"attrs": [
            ("SEG6_LOCAL_FLV_OPERATION", SEG6_LOCAL_FLV_OP_NEXT_CSID),
            ("SEG6_LOCAL_FLV_LCBLOCK_BITS", LCBLOCK_BITS),
            ("SEG6_LOCAL_FLV_LCNODE_FN_BITS", LCNODE_FN_BITS),
        ]}),
    ]}


def ifindexes(ipr: IPRoute) -> dict[str, int]:
    """The node's interface indexes by name, from one dump (a lookup by name is a dump
    each)."""
    return {x.get_attr("IFLA_IFNAME"): x["index"] for x in ipr.get_links()}


def add_route(ipr: IPRoute, route: Route, ifindex: dict[str, int], command: str = "add",
              engine: str = "kernel") -> None:
    """One route of the model. An End under the BPF engine is a blackhole for the
    switch's own /48: the ingress program shifts every packet for it before the
    routing decision, and drops those with nothing left to shift, so the FIB entry only
    keeps the locator from ever matching a wider route."""
    kw: dict = dict(dst=str(route.dst.network_address), dst_len=route.dst.prefixlen,
                    family=socket.AF_INET6, proto=RTPROT_STATIC)
    if route.end and engine == "bpf":
        ipr.route(command, type=RTN_BLACKHOLE, **kw)
        return
    kw["oif"] = ifindex[route.dev]
    if route.end:
        kw.update(encap_type=LWTUNNEL_ENCAP_SEG6_LOCAL,
                  attrs=[("RTA_ENCAP", end_next_csid_encap())])
    if route.also:
        # ECMP: one route, a next hop per spine; the kernel hashes each flow onto one.
        del kw["oif"]
        kw["multipath"] = [{"gateway": str(gw), "oif": ifindex[dev]}
                           for dev, gw in route.nexthops]
    elif route.gateway is not None:
        kw["gateway"] = str(route.gateway)
    if route.src is not None:
        kw["prefsrc"] = str(route.src)
    ipr.route(command, **kw)


def restore(ipr: IPRoute, table: NodeTable, devs: set[str]) -> None:
    """Put back what the kernel flushed when `devs` went administratively down: their
    addresses, neighbours and routes (IPv6 drops all three on link down)."""
    ifindex = ifindexes(ipr)
    for dev, addr, plen in table.addresses:
        if dev in devs:
            try:
                ipr.addr("add", index=ifindex[dev], address=str(addr), prefixlen=plen,
                         family=socket.AF_INET6, flags=IFA_F_NODAD)
            except Exception as e:  # noqa: BLE001 - kept across the down: fine
                if getattr(e, "code", None) != 17:
                    raise
    for n in table.neighbours:
        if n.dev in devs:
            ipr.neigh("replace", dst=str(n.address), lladdr=n.mac, ifindex=ifindex[n.dev],
                      state=NUD_PERMANENT, family=socket.AF_INET6)
    for route in table.routes:
        if any(dev in devs for dev, _ in route.nexthops):
            add_route(ipr, route, ifindex, "replace")


def set_multipath(ipr: IPRoute, table: NodeTable, full: NodeTable) -> None:
    """An ECMP leaf's multipath routes as `table` has them (its routing converged around
    dead links): each route of `full` with several next hops replaced by `table`'s, or
    deleted where `table` has none."""
    ifindex = ifindexes(ipr)
    now = {r.dst: r for r in table.routes}
    for r in full.routes:
        if not r.also:
            continue
        if r.dst in now:
            add_route(ipr, now[r.dst], ifindex, "replace")
        else:
            try:
                ipr.route("del", dst=str(r.dst.network_address), dst_len=r.dst.prefixlen,
                          family=socket.AF_INET6)
            except Exception as e:  # noqa: BLE001 - gone already: what we wanted
                if getattr(e, "code", None) not in (3, 2):  # ESRCH/ENOENT
                    raise


def program(ipr: IPRoute, table: NodeTable, mtu: int, engine: str = "kernel"
            ) -> dict[str, int]:
    """Addresses, neighbours and routes of one node. Interfaces must exist. Returns the
    node's interface indexes by name (`ifindexes`, with the End device it made: the
    kernel engine's End routes hang on it)."""
    ifindex = ifindexes(ipr)
    ipr.link("set", index=ifindex["lo"], state="up")
    if engine == "kernel" and any(r.end for r in table.routes):
        ipr.link("add", ifname=END_DEV, kind="veth", peer=f"{END_DEV}-peer")
        for name in (END_DEV, f"{END_DEV}-peer"):
            idx = ipr.link_lookup(ifname=name)[0]
            ipr.link("set", index=idx, state="up")
            ifindex[name] = idx
    devs = {dev for dev, _, _ in table.addresses}
    for dev in sorted(devs):
        ipr.link("set", index=ifindex[dev], mtu=mtu, state="up")
    for dev, addr, plen in table.addresses:
        ipr.addr("add", index=ifindex[dev], address=str(addr), prefixlen=plen,
                 family=socket.AF_INET6, flags=IFA_F_NODAD)
    for n in table.neighbours:
        ipr.neigh("add", dst=str(n.address), lladdr=n.mac, ifindex=ifindex[n.dev],
                  state=NUD_PERMANENT, family=socket.AF_INET6)
    for route in table.routes:
        add_route(ipr, route, ifindex, engine=engine)
    return ifindex


@dataclass(frozen=True)
class KernelRoute:
    dst: IPv6Network
    dev: str
    gateway: IPv6Address | None
    end_next_csid: bool
    lblen: int | None
    nflen: int | None
    # An ECMP route's next hops, (dev, gateway) each, the first also in dev/gateway.
    nexthops: tuple[tuple[str, IPv6Address | None], ...] = ()
    engine: str | None = None  # of an End: "kernel" (seg6local) or "bpf"


def end_dev(engine: str) -> str:
    """The dev an End of `engine` reads back with (the model's routes name END_DEV)."""
    return END_INGRESS if engine == "bpf" else END_DEV


def link_names(ipr: IPRoute) -> dict[int, str]:
    """The node's interface names by index, from one dump."""
    return {x["index"]: x.get_attr("IFLA_IFNAME") for x in ipr.get_links()}


def bpf_end_ports(ipr: IPRoute, names: dict[int, str] | None = None) -> list[str]:
    """The node's interfaces whose clsact ingress runs the BPF engine's End program
    (`names`: link_names, when the caller has it)."""
    names = link_names(ipr) if names is None else names
    out = []
    for idx, name in names.items():
        try:
            filters = ipr.get_filters(index=idx, parent=TC_H_CLSACT_INGRESS)
        except Exception:  # noqa: BLE001 - no clsact on this interface
            continue
        for f in filters:
            opts = f.get_attr("TCA_OPTIONS")
            if opts is not None and str(opts.get_attr("TCA_BPF_NAME") or "").startswith(
                    "usid_end"):
                out.append(name)
                break
    return sorted(out)


def read_routes(ipr: IPRoute) -> list[KernelRoute]:
    """The node's static IPv6 routes in the main table, decoded (flavors included). A
    blackhole for a /48 reads back as an End of the BPF engine when that engine's
    program runs on the node's ports (`bpf_end_ports`)."""
    names = link_names(ipr)
    bpf_ends = bpf_end_ports(ipr, names)
    out = []
    for r in ipr.get_routes(family=socket.AF_INET6, table=254):
        if r["proto"] != RTPROT_STATIC:
            continue
        dst = r.get_attr("RTA_DST")
        gw = r.get_attr("RTA_GATEWAY")
        encap = r.get_attr("RTA_ENCAP")
        end = False
        lblen = nflen = engine = None
        if r["type"] == RTN_BLACKHOLE:
            if bpf_ends and r["dst_len"] == LCBLOCK_BITS + LCNODE_FN_BITS:
                out.append(KernelRoute(IPv6Network(f"{dst}/{r['dst_len']}"), END_INGRESS,
                                       None, True, LCBLOCK_BITS, LCNODE_FN_BITS,
                                       engine="bpf"))
            continue
        if encap is not None and r.get_attr("RTA_ENCAP_TYPE") == LWTUNNEL_ENCAP_SEG6_LOCAL:
            flv = encap.get_attr("SEG6_LOCAL_FLAVORS")
            if flv is not None:
                op = flv.get_attr("SEG6_LOCAL_FLV_OPERATION") or 0
                lblen = flv.get_attr("SEG6_LOCAL_FLV_LCBLOCK_BITS")
                nflen = flv.get_attr("SEG6_LOCAL_FLV_LCNODE_FN_BITS")
                end = encap.get_attr("SEG6_LOCAL_ACTION") == 1 and bool(
                    op & SEG6_LOCAL_FLV_OP_NEXT_CSID)
                engine = "kernel" if end else None
        hops = tuple((names.get(nh["oif"], "?"),
                      IPv6Address(g) if (g := nh.get_attr("RTA_GATEWAY")) else None)
                     for nh in r.get_attr("RTA_MULTIPATH") or ())
        if hops:
            dev, gw_addr = hops[0]
        else:
            dev, gw_addr = names.get(r.get_attr("RTA_OIF"), "?"), IPv6Address(gw) if gw else None
        out.append(KernelRoute(IPv6Network(f"{dst}/{r['dst_len']}"), dev, gw_addr, end,
                               lblen, nflen, hops if len(hops) > 1 else (), engine))
    return out
