"""The fault model: what each kind of fault is, what it may target, which parameters
it needs, and which paths it breaks. Pure: no root, no clock, no Linux.

The one list of fault kinds and the one parameter check: the CLI, scenario files
and live injection (`mrcemu.fabric.inject`) all use these.

Targets use the topology's names: a node (`p2s1`, `h3`), a link (`p2l0-p2s1`), a
host port (`h3-p2`), a plane (`2`), `all-spines` (loss on every spine port), or one path
of one host pair (`h0-h7/p2s1`, path-loss: the packets from h0 to h7 over spine p2s1).
A host-loss targets a host (`h3`): random loss of what reaches it, on every plane.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mrcemu.errors import MrcemuError
from mrcemu.topology.layout import Interface, Layout
from mrcemu.topology.paths import ev_fields

KINDS = ("link-down", "gray", "loss", "degrade", "flap", "switch-down", "host-port-down",
         "plane-down", "path-loss", "host-loss")
# What each kind does and what it targets: `mrcemu fail`'s and the scenario page's words.
KIND_DOCS: dict[str, tuple[str, str]] = {
    "link-down": ("a link, `p2l0-p2s1` or `h3-p2l1`", "carrier lost at both ends"),
    "gray": ("a link, or a switch (every port)",
             "a silent blackhole: the carrier stays up and every packet is dropped"),
    "loss": ("a link, a switch, or `all-spines` (every spine port)",
             "drops `value` percent at random"),
    "degrade": ("a link", "re-rated to `value` percent of its rate: it queues, drops nothing "
                "itself"),
    "flap": ("a link", "down `duty` of every `period`, up the rest"),
    "switch-down": ("a switch, `p3s1` or `p0l1`", "every link of the switch down"),
    "host-port-down": ("a host port, `h0-p2`", "the host loses its port on that plane"),
    "plane-down": ("a plane number, `2`", "every link of the plane down"),
    "path-loss": ("one pair's path, `h0-h7/p2s1`", "drops `value` percent of that path's "
                  "packets, one way"),
    "host-loss": ("a host, `h3`", "drops `value` percent of what reaches the host, every "
                  "plane"),
}
LINK_KINDS = ("link-down", "gray", "loss", "degrade", "flap")
CARRIER_KINDS = ("link-down", "switch-down", "host-port-down", "plane-down")
LOSS_KINDS = ("loss", "path-loss", "host-loss")  # value: the percent lost
DROP_KINDS = ("gray", "loss", "host-loss")  # applied as drop rules on switch egress
# A fault that loses nothing itself: a slowed link only queues, and what its queue drops
# the switch counts.
LOSSLESS_KINDS = ("degrade",)
ALL_SPINES = "all-spines"  # loss: every spine port, i.e. each cross-leaf path once
MIN_FLAP_PERIOD = 0.05  # seconds: shorter than this the flapper cannot keep time


class FaultParamError(MrcemuError):
    """A fault parameter out of range. `field` is the parameter's name, so the CLI can
    say `--value` and a scenario file `faults[2].value`."""

    def __init__(self, kind: str, field: str, value: object, problem: str) -> None:
        self.kind, self.field, self.value, self.problem = kind, field, value, problem
        super().__init__(f"{kind}: --{field} {value}: {problem}")


@dataclass
class Fault:
    kind: str
    target: str
    value: float | None = None  # percent: lost (loss) or of the rate kept (degrade)
    one_way: bool = False  # gray: only the direction from the link's first node
    at: float = 0.0  # when it took effect, on the NICs' monotonic clock (set by inject)
    period: float | None = None  # flap: seconds per down+up cycle
    duty: float | None = None  # flap: fraction of the period the link is down
    pid: int | None = None  # flap: the flapping process
    dropped: int | None = None  # path-loss, once healed: the packets it dropped

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.target}"


def check(fault: Fault) -> None:
    """Raise FaultParamError unless the fault's kind and parameters make sense."""
    k = fault.kind
    if k not in KINDS:
        raise MrcemuError(f"unknown fault kind '{k}': use one of {', '.join(KINDS)}")
    if k in LOSS_KINDS and (fault.value is None or not 0 <= fault.value <= 100):
        raise FaultParamError(k, "value", fault.value, "must be a percentage of packets "
                              "lost, 0 <= x <= 100")
    if k == "degrade" and (fault.value is None or not 0 < fault.value <= 100):
        raise FaultParamError(k, "value", fault.value, "must be a percentage of the rate "
                              "kept, 0 < x <= 100 (to stop the link, use link-down)")
    if k == "flap":
        if fault.period is None or fault.period < MIN_FLAP_PERIOD:
            raise FaultParamError(k, "period", fault.period, "must be seconds per down+up "
                                  f"cycle, >= {MIN_FLAP_PERIOD} (give --period and --duty)")
        if fault.duty is None or not 0 < fault.duty < 1:
            raise FaultParamError(k, "duty", fault.duty, "must be the fraction of the period "
                                  "the link is down, 0 < x < 1")


@dataclass(frozen=True)
class PathTarget:
    """A path-loss target: the packets from host `src` to host `dst` over one spine."""
    src: int
    dst: int
    plane: int
    spine: int


def path_target(layout: Layout, t: str) -> PathTarget:
    """Parse SRC-DST/pPLANEsSPINE (e.g. h0-h7/p2s1), or raise an error saying why not."""
    form = f"a path-loss target is SRC-DST/pPLANEsSPINE, e.g. h0-h{layout.topo.hosts - 1}/p0s0"
    pair, _, sw = t.partition("/")
    a, _, b = pair.partition("-")
    for h in (a, b):
        if h not in layout.nodes or not h.startswith("h"):
            raise MrcemuError(f"no host '{h}' in path '{t}': {form}")
    node = layout.nodes.get(sw)
    if node is None or node.kind.name != "SPINE":
        raise MrcemuError(f"no spine '{sw}' in path '{t}': {form}")
    topo = layout.topo
    src, dst = int(a[1:]), int(b[1:])
    if src == dst or topo.leaf_of(src) == topo.leaf_of(dst):
        raise MrcemuError(f"{a} and {b} share a leaf: their packets cross no spine; "
                          "pick hosts on different leaves")
    return PathTarget(src, dst, node.plane, node.index)


def targets(layout: Layout, fault: Fault) -> list[Interface]:
    """The interfaces a fault acts on, each seen from its own node; raises a clear
    error for a target the topology does not have."""
    t = fault.target
    if fault.kind == "host-loss":
        # The host's ingress, every plane (paper experiment E9/E10's "loss applied at NICs"): the
        # leaves' ports to it, since hosts receive on AF_PACKET where nothing else drops.
        if t not in layout.nodes or not t.startswith("h"):
            raise MrcemuError(f"no host '{t}': a host-loss target is a host, e.g. h0")
        return [i for link in layout.links for i in (link.a, link.b)
                if i.peer_node == t]
    if fault.kind == "path-loss":
        # Where the path enters the fabric's core: its source leaf's port to the spine.
        pt = path_target(layout, t)
        leaf = f"p{pt.plane}l{layout.topo.leaf_of(pt.src)}"
        link = layout.links_by_name[f"{leaf}-p{pt.plane}s{pt.spine}"]
        return [link.a if link.a.node == leaf else link.b]
    if fault.kind == "loss" and t == ALL_SPINES:
        return [i for sw in layout.switches if sw.kind.name == "SPINE"
                for i in layout.interfaces[sw.name]]
    if fault.kind in DROP_KINDS and t in layout.nodes and not t.startswith("h"):
        return list(layout.interfaces[t])  # every egress port of that switch
    if fault.kind in LINK_KINDS:
        link = layout.links_by_name.get(t)
        if link is None:
            extra = (f", a switch, or {ALL_SPINES}" if fault.kind == "loss" else
                     ", or a switch" if fault.kind == "gray" else "")
            raise MrcemuError(f"no link '{t}': links are named NODE-NODE, e.g. "
                              f"{layout.links[-1].name}{extra}")
        first = link.a if t.startswith(link.a.node + "-") else link.b
        other = link.b if first is link.a else link.a
        return [first] if fault.one_way else [first, other]
    if fault.kind == "switch-down":
        if t not in layout.nodes or t.startswith("h"):
            raise MrcemuError(f"no switch '{t}' (e.g. p3s1, p0l0)")
        return list(layout.interfaces[t])
    if fault.kind == "host-port-down":
        host, _, plane = t.partition("-p")
        ifs = [i for i in layout.interfaces.get(host, []) if i.name == t]
        if not ifs or not plane.isdigit():
            raise MrcemuError(f"no host port '{t}' (e.g. h0-p2)")
        return ifs
    if fault.kind == "plane-down":
        if not t.isdigit() or int(t) >= layout.topo.planes:
            raise MrcemuError(f"no plane '{t}': planes are 0..{layout.topo.planes - 1}")
        return [link.a for link in layout.links if link.a.plane == int(t)]
    raise MrcemuError(f"unknown fault kind '{fault.kind}': use one of {', '.join(KINDS)}")


def links_of(layout: Layout, fault: Fault) -> set[str]:
    """The names of the links a fault acts on (either end): what a link map should name."""
    if fault.kind == "path-loss":
        return set()  # one pair's packets: a link map's probes never cross that path
    name = {(i.node, i.name): link.name for link in layout.links for i in (link.a, link.b)}
    return {name[(i.node, i.name)] for i in targets(layout, fault)}


# What an ECMP fabric's routing detects and converges around (a routing session over a
# link that drops everything goes down, BFD's or the protocol's timers): links down,
# blackholed, or taken with a switch or plane. Loss, a slow link or a flap it does not.
ROUTED_AROUND = ("link-down", "gray", "switch-down", "plane-down")


def routed_around(layout: Layout, active: list[Fault]) -> frozenset[str]:
    """The links an ECMP fabric's routing has removed once it converged on `active`."""
    return frozenset(n for f in active if f.kind in ROUTED_AROUND
                     for n in links_of(layout, f))


def affects(layout: Layout, fault: Fault) -> Callable[[int, int, int], bool]:
    """Whether the data path of EV `ev` from host `src` to host `dst` crosses what the
    fault breaks (either direction, but a path-loss only its own). Reports use it to find
    the failed paths."""
    topo = layout.topo
    t = fault.target
    if fault.kind == "path-loss":  # one direction: the packets from src to dst
        pt = path_target(layout, t)
        return lambda s, d, ev: (s, d) == (pt.src, pt.dst) and ev_fields(ev) == (
            pt.plane, pt.spine)
    if fault.kind == "plane-down":
        return lambda s, d, ev: ev_fields(ev)[0] == int(t)
    if fault.kind == "host-loss":  # its data, and the acks of what it sends
        host = int(t[1:])
        return lambda s, d, ev: host in (s, d)
    if fault.kind == "host-port-down":
        host, plane = int(t.split("-p")[0][1:]), int(t.split("-p")[1])
        return lambda s, d, ev: ev_fields(ev)[0] == plane and host in (s, d)
    if fault.kind == "loss" and t == ALL_SPINES:
        return lambda s, d, ev: ev_fields(ev)[1] is not None
    if fault.kind == "switch-down" or t in layout.nodes:
        node = layout.nodes[t]
        if node.kind.name == "SPINE":
            return lambda s, d, ev: ev_fields(ev) == (node.plane, node.index)
        return lambda s, d, ev: ev_fields(ev)[0] == node.plane and node.index in (
            topo.leaf_of(s), topo.leaf_of(d))
    link = layout.links_by_name[t]
    a, b = layout.nodes[link.a.node], layout.nodes[link.b.node]
    if a.kind.name == "HOST" or b.kind.name == "HOST":
        host, leaf = (a, b) if a.kind.name == "HOST" else (b, a)
        return lambda s, d, ev: ev_fields(ev)[0] == leaf.plane and host.index in (s, d)
    leaf, spine = (a, b) if a.kind.name == "LEAF" else (b, a)
    return lambda s, d, ev: (ev_fields(ev) == (spine.plane, spine.index)
                             and leaf.index in (topo.leaf_of(s), topo.leaf_of(d)))
