"""Clustermapper (the white paper, 3): self-probes that localise a bad link, as data. Pure: no
root, no sockets, no clock (times are passed in).

Static source routing lets a host send a probe that comes back to itself: to its leaf
and back (`leaf : self`), or to a spine and back (`leaf : spine : leaf : self`). The
first crosses the host's link to its leaf; the second that link and one leaf-spine link.
A host link is judged by its leaf loop; a leaf-spine link by the spine loops of the
hosts under that leaf whose own link is healthy, so a bad host link is not blamed on
the spines above it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from ipaddress import IPv6Address

from mrcemu.topology.addressing import Kind, container, usid
from mrcemu.topology.layout import Layout, host_name, leaf_name, spine_name

# A link is bad when at least this share of its probes was lost, over at least
# MIN_PROBES probes. A broken link (down, or silently dropping all) loses them all; a
# probe travels in the CONTROL class, served first and never dropped for a full queue,
# so congestion alone does not reach this.
BAD_LOSS = 0.2
MIN_PROBES = 5


@dataclass(frozen=True)
class Loop:
    """One self-probe route: from `host`'s plane-`plane` port back to itself."""

    host: int
    plane: int
    spine: int | None  # None: to the leaf and back
    container: IPv6Address  # the DA: the uSIDs of the way out and back
    links: tuple[str, ...]  # the links it crosses (each both ways), host link first


def loops(layout: Layout) -> list[Loop]:
    """Every self-probe of every host: per plane, one to the leaf and one per spine."""
    topo = layout.topo
    out = []
    for h in range(topo.hosts):
        la = topo.leaf_of(h)
        for p in range(topo.planes):
            leaf, me = usid(p, Kind.LEAF, la), usid(p, Kind.HOST, h)
            host_link = f"{host_name(h)}-{leaf_name(p, la)}"
            out.append(Loop(h, p, None, container(leaf, me), (host_link,)))
            for s in range(topo.spines_per_plane):
                up = f"{leaf_name(p, la)}-{spine_name(p, s)}"
                out.append(Loop(h, p, s, container(leaf, usid(p, Kind.SPINE, s), leaf, me),
                                (host_link, up)))
    return out


@dataclass
class LinkHealth:
    link: str
    probes: int  # probes decided (answered, or unanswered past the timeout)
    lost: int
    rtt_ms: float | None  # mean round trip of the answered ones

    @property
    def loss(self) -> float | None:
        return self.lost / self.probes if self.probes else None

    @property
    def bad(self) -> bool:
        return self.probes >= MIN_PROBES and self.lost >= BAD_LOSS * self.probes

    def to_json(self) -> dict:
        loss = self.loss
        return {"link": self.link, "loss": None if loss is None else round(loss, 4),
                "rtt_ms": None if self.rtt_ms is None else round(self.rtt_ms, 3),
                "probes": self.probes}


@dataclass
class _Probe:
    sent: float
    rtt: float | None = None  # None: not answered (yet)


@dataclass
class LinkMap:
    """What the probes of `loops` found, over the last `window` seconds of decided probes.
    A probe unanswered `timeout` seconds after it was sent is lost."""

    loops: list[Loop]
    window: float = 0.5
    timeout: float = 0.3
    _probes: list[dict[int, _Probe]] = field(default_factory=list)
    _order: list[deque[int]] = field(default_factory=list)
    seq: int = 0

    def __post_init__(self) -> None:
        self._probes = [{} for _ in self.loops]
        self._order = [deque() for _ in self.loops]

    def sent(self, loop: int, now: float) -> int:
        """Record a probe sent on loop index `loop`; returns its sequence number."""
        self.seq += 1
        self._probes[loop][self.seq] = _Probe(now)
        self._order[loop].append(self.seq)
        return self.seq

    def restamp(self, loop: int, seq: int, now: float) -> None:
        """The probe left later than recorded (the prober stalled before sending it):
        time it from `now`, so our own stall is not counted against the link."""
        p = self._probes[loop].get(seq)
        if p is not None and p.rtt is None:
            p.sent = now

    def answered(self, loop: int, seq: int, now: float) -> bool:
        """A probe came back; False if it is not one we are waiting for (a duplicate, a
        stranger, or one already given up as lost)."""
        if not 0 <= loop < len(self.loops):
            return False
        p = self._probes[loop].get(seq)
        if p is None or p.rtt is not None or now - p.sent > self.timeout:
            return False
        p.rtt = max(0.0, now - p.sent)
        return True

    def _decided(self, loop: int, now: float) -> list[_Probe]:
        """Probes of `loop` sent in the window that ends `timeout` ago, plus those
        answered since (an answer decides at once); older ones are forgotten."""
        probes, order = self._probes[loop], self._order[loop]
        while order and probes[order[0]].sent < now - self.timeout - self.window:
            del probes[order.popleft()]
        return [p for s in order if (p := probes[s]).rtt is not None
                or now - p.sent > self.timeout]

    def links(self, now: float) -> dict[str, LinkHealth]:
        per_loop = [self._decided(i, now) for i in range(len(self.loops))]

        def health(link: str, idx: list[int]) -> LinkHealth:
            ps = [p for i in idx for p in per_loop[i]]
            rtts = [p.rtt for p in ps if p.rtt is not None]
            return LinkHealth(link, len(ps), len(ps) - len(rtts),
                              1e3 * sum(rtts) / len(rtts) if rtts else None)

        out: dict[str, LinkHealth] = {}
        for i, lp in enumerate(self.loops):
            if lp.spine is None:
                out[lp.links[0]] = health(lp.links[0], [i])
        ups: dict[str, list[int]] = {}
        for i, lp in enumerate(self.loops):
            if lp.spine is not None:
                ups.setdefault(lp.links[1], []).append(i)
        for link, idx in ups.items():
            # Only through hosts whose own link is fine: its losses are not the spine's.
            fine = [i for i in idx if not out[self.loops[i].links[0]].bad]
            out[link] = health(link, fine or idx)
        return out

    def bad(self, now: float) -> list[str]:
        return sorted(name for name, h in self.links(now).items() if h.bad)


def merge(parts: list[dict[str, LinkHealth]]) -> dict[str, LinkHealth]:
    """Several mappers' judgements as one (a split fabric's servers, each probing from
    its own hosts): a link more than one judged is judged on all their probes."""
    out: dict[str, LinkHealth] = {}
    for part in parts:
        for name, h in part.items():
            if name not in out:
                out[name] = h
                continue
            o = out[name]
            answered = (o.probes - o.lost, h.probes - h.lost)
            rtt = None
            if sum(answered):
                rtt = sum(n * r for n, r in zip(answered, (o.rtt_ms, h.rtt_ms), strict=True)
                          if n and r is not None) / sum(answered)
            out[name] = LinkHealth(name, o.probes + h.probes, o.lost + h.lost, rtt)
    return out
