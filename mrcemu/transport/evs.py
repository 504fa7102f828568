"""The per-destination EV profile and the EV state machine (docs/transport.md).

| state       | entered on                              | leaves by                         |
| GOOD        |                                         |                                   |
| SKIP        | CE echoed, a mid-path trim (a hot path: | GOOD after its rotations (and its |
|             | thinned, in use 1 rotation in n + 1)    | round trips, thinned)             |
| STOPPED     | its oldest packet overdue against its   | GOOD on feedback from it or its   |
|             | own round trips (no verdict yet)        | probe answered; ASSUMED_BAD on    |
|             |                                         | proof of a loss                   |
| ASSUMED_BAD | a loss proven (per-EV order, a probe    | enough reliability probes answered|
|             | unanswered, the RTO), SACK              |                                   |
|             | m=ALWAYS_SKIP                           |                                   |
| DENIED      | admin only                              | admin allow                       |

Which fact moves an EV where is the path monitor's (transport/pathmon.py); this module
is the mechanism: states, the backup set, the spraying order.

A failed active EV is replaced from the same plane's backups; `ev_min_active`
keeps at least that many usable EVs whatever the feedback says. A plane whose
local or remote port is down is out of the rotation altogether.
"""

from __future__ import annotations

import enum
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from mrcemu.datapath import EvSlot
from mrcemu.topology.paths import ev_variant
from mrcemu.transport.config import TransportConfig
from mrcemu.transport.events import EvStateChanged
from mrcemu.transport.lb import DEFAULT, Feedback, LoadBalancer, make

MAX_SKIP = 16  # rotations: the longest a SKIP lasts, however often the EV is marked
# A thinned path's skip_len grows further, while marks keep coming on its visits: at 16
# a path another flow fills (paper experiment E8's EV-A) kept 1/17 of the flow's rotations, 0.06
# of its packets, and the flow pinned to it 0.89 of its port.
MAX_THIN = 64
# plane_share `capacity`: after a mark on a doubled path, the plane sprays its own paths
# for this many of the path's round trips before it doubles one again, twice as long at
# each mark after (up to 2**MAX_HOLDS times). Long against a failure's few round trips:
# a try costs a round trip of queueing on the doubled path, and the marks it brings cut
# the one window every plane shares.
HOLD_RTTS = 32
MAX_HOLDS = 4
HOLD_NO_RTT = 0.1  # seconds, for a path with no round trip sampled yet


class EvState(enum.Enum):
    GOOD = "GOOD"
    SKIP = "SKIP"
    STOPPED = "STOPPED"
    ASSUMED_BAD = "ASSUMED_BAD"
    DENIED = "DENIED"


@dataclass(frozen=True)
class PathInfo:
    """Everything needed to put a packet on one path."""

    ev: int
    plane: int
    spine: int | None
    src: bytes  # our address on that plane
    container: bytes  # the uSID path: MRC's outer DA, the plain RoCE DA as sent
    delivered: bytes  # the destination port's address: MRC's inner DA, RoCE's on arrival


def _slot_field(name: str, doc: str) -> property:
    return property(lambda e: getattr(e.fb, name), lambda e, v: setattr(e.fb, name, v),
                    doc=doc)


@dataclass
class Ev:
    path: PathInfo
    state: EvState = EvState.GOOD
    active: bool = True
    skip_until_rotation: int = 0
    skip_ended: float = float("-inf")  # when its last SKIP ended
    # A hot path is thinned until then (EvProfile.skip): in SKIP, but in use one rotation
    # in skip_len + 1 (`visiting`: this one); 0, not thinned.
    thin_until: float = 0.0
    visiting: bool = False
    grown_at: float = float("-inf")  # when a mark last doubled a thinned EV's skip_len
    last_mark: float = float("-inf")  # when feedback last said its path queues
    last_probe: float = -1.0
    # When its probes became due: it turned ASSUMED_BAD, or its plane came back. Its first
    # probe is due then, not an interval after a probe of an earlier retirement.
    probe_from: float = float("-inf")
    probe_seq: int = 0
    acks_heard: int = 0  # of fb.acks, those the load balancer has heard
    # What the compiled data path writes per packet and the policy reads per event
    # (sender.c): one record both share, so nothing is copied back and forth.
    fb: EvSlot = field(default_factory=EvSlot, repr=False, compare=False)

    last_feedback = _slot_field("last_feedback", "when feedback last came on this EV")
    unanswered = _slot_field("unanswered", "packets sent since the last feedback")
    heard_sent = _slot_field("heard_sent",
                             "send time of the latest packet on this EV known to arrive")
    sent = _slot_field("sent", "data packets sent on this EV")
    sent_bytes = _slot_field("sent_bytes", "their bytes")
    skip_len = _slot_field("skip_len",
                           "rotations the next SKIP lasts: doubles while marks keep coming, "
                           "halves for each quiet round trip (EvProfile.skip)")

    @property
    def silent_since(self) -> float | None:
        """The first send not yet followed by feedback."""
        t = self.fb.silent_since_raw
        return None if t != t else t  # NaN: none

    @silent_since.setter
    def silent_since(self, t: float | None) -> None:
        self.fb.silent_since_raw = float("nan") if t is None else t

    @property
    def ev(self) -> int:
        return self.path.ev


@dataclass
class EvProfile:
    evs: dict[int, Ev]
    planes: list[int]
    min_active: int = 1
    rotation: int = 0
    # At most this many active EVs a plane (0: one per path). A restricted set (the
    # white paper's E7: 2 a plane) sprays over fewer paths; a retired EV's replacement
    # then comes from a path the set did not use, and the EV, once its probes are
    # answered, waits as a backup while the set is full.
    per_plane: int = 0
    # Active EVs a path (TransportConfig.ev_per_path): its variants 0 to per_path - 1.
    per_path: int = 1
    # TransportConfig.plane_share: whether a retired EV's backup may go onto a path that
    # has its share of active EVs (two shares through one spine): `capacity`, while that
    # path is quiet; `paths`, never; `full`, always.
    share: str = "capacity"
    # plane_share `capacity`: the backups made active on a path that has its share, by
    # (plane, spine); when a plane may double a path again after a mark made one hand its
    # share back, and how many times one has; the planes waiting for that.
    _extra: dict[tuple[int, int | None], Ev] = field(default_factory=dict, repr=False)
    _hold: dict[int, tuple[float, int]] = field(default_factory=dict, repr=False)
    _short: set[int] = field(default_factory=set, repr=False)
    # The owner's last clock reading. A SKIP ends at a rotation, and the compiled sender
    # starts rotations without the time; its owner sets this before it sends, so the
    # "skip over" change carries when it happened (without it the report never saw a
    # SKIP end, and ev-states.png showed every SKIP as lasting to the end of the run).
    now: float = 0.0
    planes_down: set[int] = field(default_factory=set)  # our port or the peer's
    # Where state changes go: the owning connection's event queue (a bare profile
    # reports to nobody).
    emit: Callable[[EvStateChanged], None] = field(default=lambda _e: None, repr=False)
    _rng: random.Random = field(default_factory=lambda: random.Random(1))
    # The load-balancing policy (transport/lb): which usable EVs each rotation sprays.
    # None: MRC's own profile, drawing from this profile's generator.
    lb: LoadBalancer | None = None
    _order: list[int] = field(default_factory=list)
    _pos: int = 0
    # The EVs in ASSUMED_BAD, by EV: probing visits these, not every EV in the profile
    # (next_timer asks after every flush, and a profile holds hundreds).
    bad: dict[int, Ev] = field(default_factory=dict)
    # Told each new rotation's order (the compiled sender sprays by it).
    on_rotation: Callable[[list[int]], None] = field(default=lambda _o: None, repr=False)
    # The EVs in SKIP: a rotation ends the skips of these, not a scan of every EV.
    skipping: dict[int, Ev] = field(default_factory=dict)
    # Each plane's usable EVs in profile order (before shuffling): what a rotation
    # orders, kept until an EV's usability changes. Between rotations an EV's
    # `fb.usable` is its usable() (a SKIP ends only at a rotation), so _sync sees every
    # change. The compiled sender asks for a rotation as often as every packet when a
    # profile has one EV a plane.
    _usable_by_plane: dict[int, list[int]] | None = field(default=None, repr=False)
    # That cache, when the order built from it is the order of every rotation after it
    # (at most one EV a plane: new_rotation's fast path).
    _repeats: tuple[dict[int, list[int]], Callable[[list[int]], None]] | None = field(
        default=None, repr=False)

    def __post_init__(self) -> None:
        if self.lb is None:
            self.lb = make(DEFAULT, TransportConfig(), self._rng)
        self.lb.bind(self)
        # Each plane's EVs (an EV never changes plane): what a mark compares the EV with,
        # without a scan of the whole profile (hundreds of EVs with several a path).
        self._in_plane: dict[int, list[Ev]] = {}
        for e in self.evs.values():
            self._in_plane.setdefault(e.path.plane, []).append(e)
        # Each plane's active EVs as built: what a plane short of one is short of.
        self._want = {p: sum(e.active for e in evs) for p, evs in self._in_plane.items()}
        self._sync_all()

    @property
    def policy(self) -> LoadBalancer:
        assert self.lb is not None  # set in __post_init__
        return self.lb

    @classmethod
    def build(cls, paths: list[PathInfo], backups_per_path: int = 1, min_active: int = 1,
              seed: int = 1, per_plane: int = 0,
              cfg: TransportConfig | None = None, per_path: int = 1) -> EvProfile:
        """`per_plane`: the first that many paths of each plane (in path order: the lowest
        spines) are active, the rest backups; 0, every path. `per_path`: active EVs on
        each active path (its first variants). `cfg` names the load-balancing policy
        (and MRC's SKIP lengths); none, MRC's with defaults."""
        evs: dict[int, Ev] = {}
        in_plane: Counter[int] = Counter()
        for p in paths:
            in_plane[p.plane] += 1
            used = not per_plane or in_plane[p.plane] <= per_plane
            evs[p.ev] = Ev(p, active=used)
            for v in range(1, per_path + backups_per_path):
                b = PathInfo(ev_variant(p.ev, v), p.plane, p.spine, p.src, p.container,
                             p.delivered)
                evs[b.ev] = Ev(b, active=used and v < per_path)
        planes = sorted({p.plane for p in paths})
        rng = random.Random(seed)  # one generator: MRC's spraying order is the seed's
        cfg = cfg or TransportConfig()
        return cls(evs, planes, min_active, per_plane=per_plane, per_path=per_path, _rng=rng,
                   lb=make(cfg.load_balancing, cfg, rng), share=cfg.plane_share)

    def usable(self, e: Ev) -> bool:
        return (e.active and e.path.plane not in self.planes_down
                and (e.state is EvState.GOOD
                     or (e.state is EvState.SKIP and self._skip_over(e))))

    def _skip_over(self, e: Ev) -> bool:
        return e.skip_until_rotation <= self.rotation

    @staticmethod
    def _thinned(e: Ev) -> bool:
        """In a thinning: it lasts until the first rotation after `thin_until` ends it
        (new_rotation), so the data path's `fb.thinned` and `skip` agree throughout."""
        return e.state is EvState.SKIP and e.thin_until > 0.0

    @staticmethod
    def _path_evs(e: Ev, plane: list[Ev]) -> list[Ev]:
        """The EVs of e's plane (`plane`: its list) on e's path (its spine): they cross
        the same queues."""
        return [x for x in plane if x.path.spine == e.path.spine]

    def _sync(self, e: Ev) -> None:
        """The data path's copies of `usable` and of the state being GOOD: set wherever
        what they depend on changes."""
        u = self.usable(e)
        if e.fb.usable != u:
            e.fb.usable = u
            self._usable_by_plane = None
        e.fb.good = e.state is EvState.GOOD
        e.fb.stopped = e.state is EvState.STOPPED
        e.fb.thinned = self._thinned(e)

    def _sync_all(self) -> None:
        self._usable_by_plane = None
        for e in self.evs.values():
            self._sync(e)

    def new_rotation(self) -> bool:
        """Order the next rotation: planes interleaved so they stay evenly loaded, and
        each plane's EVs in a fresh pseudo-random order. next_ev calls it at the end of
        a rotation, and so does the compiled sender (through `on_rotation`'s owner).

        False when the order is the last one again, and on_rotation is not told: with at
        most one usable EV a plane and no SKIP to end, a shuffle draws nothing from the
        generator, so the order cannot change. The compiled sender then sprays its order
        again, without a Python call per packet where a profile has one EV a plane."""
        self.rotation += 1
        if self.skipping:
            over = [e for e in self.skipping.values() if self._skip_over(e)]
            if len(over) > 1:  # their events go out in profile order
                rank = {ev: i for i, ev in enumerate(self.evs)}
                over.sort(key=lambda e: rank[e.ev])
            for e in over:
                if e.thin_until > self.now:
                    # Thinned: one rotation in use, then skip_len rotations out again,
                    # in SKIP throughout (no state change to report per visit).
                    if e.visiting:
                        e.skip_until_rotation = self.rotation + e.skip_len
                    e.visiting = not e.visiting
                    self._sync(e)
                    continue
                e.skip_ended = self.now
                self._set(e, EvState.GOOD, self.now, "skip over")
        lb = self.policy
        if lb.wants_acks:
            self._hear_acks()
        usable = self._usable_by_plane
        rep = self._repeats
        if rep is not None and rep[0] is usable and rep[1] is self.on_rotation:
            self._pos = 0
            return False
        if usable is None:
            # One pass over the EVs, not one per plane.
            usable = {plane: [] for plane in self.planes}
            for e in self.evs.values():
                ids = usable.get(e.path.plane)
                if ids is not None and self.usable(e):
                    ids.append(e)
            self._usable_by_plane = usable
        # Chosen in plane order, so that MRC's seeded order is the same with any policy.
        per_plane = {plane: lb.choose(plane, usable[plane], self.now) if usable[plane] else []
                     for plane in self.planes}
        order: list[int] = []
        depth = max((len(v) for v in per_plane.values()), default=0)
        for i in range(depth):
            for plane in self.planes:
                if i < len(per_plane[plane]):
                    order.append(per_plane[plane][i])
        self._order, self._pos = order, 0
        # Who was told this order, and from which cache: a new listener (the compiled
        # sender, attached after this profile already rotated) must be told anew.
        self._repeats = (usable, self.on_rotation) if lb.repeats(usable) else None
        self.on_rotation(order)
        return True

    def _hear_acks(self) -> None:
        """The unmarked SACKs the compiled sender counted on each EV since the last
        rotation, to a policy that recycles good paths: oldest first."""
        fresh = [e for e in self.evs.values() if e.fb.acks != e.acks_heard]
        fresh.sort(key=lambda e: e.fb.last_feedback)
        for e in fresh:
            n = e.fb.acks - e.acks_heard
            e.acks_heard = e.fb.acks
            self.policy.hear(e, Feedback.ACK, self.now, n)

    def next_ev(self) -> Ev | None:
        for _ in range(2):
            while self._pos < len(self._order):
                e = self.evs[self._order[self._pos]]
                self._pos += 1
                if self.usable(e):
                    return e
            self.new_rotation()
        return None

    def at_floor(self) -> bool:
        """No more usable EVs than `min_active`: none may be taken out of use."""
        return self.count_usable(self.min_active + 1) <= self.min_active

    def count_usable(self, limit: int | None = None) -> int:
        """The usable EVs, counted no further than `limit` (None: all of them)."""
        n = 0
        for e in self.evs.values():
            if self.usable(e):
                n += 1
                if n == limit:
                    break
        return n

    def _set(self, e: Ev, state: EvState, now: float, why: str,
             lost_sent: float | None = None) -> None:
        if e.state is not state:
            self.emit(EvStateChanged(now, e.ev, e.state.value, state.value, why, lost_sent))
            for held, kind in ((self.bad, EvState.ASSUMED_BAD), (self.skipping, EvState.SKIP)):
                if state is kind:
                    held[e.ev] = e
                else:
                    held.pop(e.ev, None)
            was, e.state = e.state, state
            if state is EvState.ASSUMED_BAD:
                e.probe_from = now
            if state is not EvState.SKIP:  # a thinning ends with its SKIP
                e.thin_until, e.visiting = 0.0, False
            self._sync(e)
            if state is EvState.ASSUMED_BAD:
                self.policy.hear(e, Feedback.RETIRED, now)
            elif was is EvState.ASSUMED_BAD:
                self.policy.hear(e, Feedback.RESTORED, now)

    def skip(self, ev: int, now: float, why: str, rotations: int = 1) -> None:
        e = self.evs.get(ev)
        if e is None:
            return
        e.last_mark = now
        thinned = self._thinned(e)
        if e.state is not EvState.GOOD and not thinned:
            return
        plane = self._in_plane[e.path.plane]
        # A SKIP moves load between the paths of a plane; the plane's last usable path
        # keeps it, or the host's port on that plane sits idle for the SKIP's round
        # trips (its share cannot move to another plane's port, already at line rate).
        if not any(x is not e and self.usable(x) for x in plane):
            return
        # The floor guards what is in use. A thinned EV is out of use between its
        # visits, when its visits' marks come back: with two EVs (paper experiment E8) the set
        # sits at its floor then, and refusing those marks kept its share from halving
        # again and let its thinning run out (flow 1 kept 0.05 of its packets on EV-A).
        if not thinned and self.at_floor():
            return
        rtt = e.fb.rtt_raw
        if thinned:
            # A mark on a thinned path: its share is still too much; half of it again,
            # once a round trip (the marks on what was sent before are the same news).
            if rtt == rtt and rtt > 0 and now - e.grown_at >= rtt:
                n = min(rotations * e.skip_len, MAX_SKIP)
                e.skip_len = min(e.skip_len * 2, MAX_THIN)
                for x in self._path_evs(e, plane):
                    if self._thinned(x):
                        x.skip_len, x.grown_at = e.skip_len, now
                        x.thin_until = max(x.thin_until, now + n * rtt)
            return
        # `rotations` for an occasional mark; an EV marked again as soon as it is back
        # skips twice as long (up to MAX_SKIP rotations), so a path that stays hot
        # sheds most of its share instead of half of it. A hot path is thinned for as
        # many of the EV's own round trips too: MRC's EV sets (hundreds of paths) take
        # about a round trip to rotate, ours (32 on `default`, 2 in paper experiment E8) a
        # fraction of one, and a SKIP that ends before the feedback on the packets sent
        # after it can return sends the path a full share again for that round trip,
        # every time. Thinned, not switched off for them: in use one rotation in
        # skip_len + 1, it keeps a share its marks go on sizing. Switched off, the
        # flows that share a slowed spine's queue, marked by it at once, would leave it
        # and come back to it together, so that it sat idle and then took every flow's
        # share at once, and trimmed much of it. A mark on a thinned path reaches NSCC as
        # unmarked (sender.c: `fb.thinned`): its queue is this rule's business.
        # The memory fades with quiet time, not with unmarked acks: a round trip after
        # a SKIP ends, the first feedback on what went after it can come; each round
        # trip more without a mark halves the next SKIP (UEC's bitmap likewise forgets
        # a penalty only as turns pass). Halving on every unmarked SACK undid it: a
        # path another flow fills still acks some packets unmarked, and the SKIP never
        # outgrew two round trips (paper experiment E8: flow 1 kept 0.15-0.19 on EV-A).
        sampled = rtt == rtt and rtt > 0  # NaN: no sample yet
        if sampled:
            quiet = (now - e.skip_ended) / rtt - 1.0
            if quiet >= 1.0:
                e.skip_len = max(1, e.skip_len >> int(min(quiet, 5.0)))
        # Only a path hotter than the others of its plane is shed for round trips: when
        # they were marked too within the last round trip, the plane is loaded
        # throughout (the window's business, not the spraying's), and rotations decide.
        # The other paths, not the other EVs: with several EVs a path (ev_per_path) its
        # other EVs are marked by the same queue, and the path would never be hotter.
        hotter = sampled and not any(
            x.path.spine != e.path.spine and x.active and now - x.last_mark < rtt
            for x in plane)
        n = min(rotations * e.skip_len, MAX_SKIP)
        group = [e]
        if hotter:
            e.skip_len = min(e.skip_len * 2, MAX_SKIP)
            # The path, not only the EV, is shed: its other EVs (ev_per_path) cross the
            # same queues (an EV names its route: SRv6), and a mark on one of fifteen
            # shed a fifteenth of the path's share while each EV's memory faded between
            # its own marks (the paper's degraded spine: 0.151 of the packets on
            # the slowed spines with 15 EVs a path, 0.081 with one). They share the
            # SKIP and its memory, as one EV a path has them alone. The plane keeps a
            # path: a plane whose other paths are all out of use keeps this one.
            siblings = [x for x in self._path_evs(e, plane) if x is not e
                        and x.active and x.state in (EvState.GOOD, EvState.SKIP)]
            if siblings and any(x.path.spine != e.path.spine and self.usable(x)
                                for x in plane):
                group += siblings
        until_rotation = self.rotation + n
        for x in group:
            x.skip_until_rotation = max(until_rotation, x.skip_until_rotation)
            if hotter:
                x.thin_until = max(now + n * rtt, x.thin_until)
                x.visiting, x.grown_at = False, now
            x.skip_len, x.last_mark = e.skip_len, now
            self._set(x, EvState.SKIP, now, why)
            self._sync(x)  # a sibling already in SKIP: thinned now, or out of its visit

    def stop(self, ev: int, now: float, why: str, lost_sent: float | None = None) -> bool:
        """Take a GOOD or SKIP EV out of use until a verdict: it stays in the active set
        (its share is not handed to a backup for a suspicion). False, and nothing changed
        but the data path's copy, where the EV is in another state or is the last
        usable one."""
        e = self.evs.get(ev)
        if (e is None or e.state not in (EvState.GOOD, EvState.SKIP)
                or (self.usable(e) and self.at_floor())):
            if e is not None:
                self._sync(e)  # the sender marked it stopped: not so
            return False
        self._set(e, EvState.STOPPED, now, why, lost_sent)
        return True

    def resume(self, ev: int, now: float, why: str) -> None:
        """A STOPPED EV proved alive: back in use."""
        e = self.evs.get(ev)
        if e is not None and e.state is EvState.STOPPED:
            self._set(e, EvState.GOOD, now, why)

    def assume_bad(self, ev: int, now: float, why: str,
                   lost_sent: float | None = None) -> None:
        """`lost_sent`: when the lost packet that condemned the EV was sent."""
        e = self.evs.get(ev)
        if e is None or e.state in (EvState.ASSUMED_BAD, EvState.DENIED):
            return
        if self.usable(e) and self.at_floor():
            return
        self._set(e, EvState.ASSUMED_BAD, now, why, lost_sent)
        if e.active:
            e.active = False
            self._sync(e)
            self._promote_backup(e.path.plane, now, e.path.spine)

    def _promote_backup(self, plane: int, now: float, spine: int | None = None) -> None:
        """A GOOD backup of the same plane, on a path with no EV under suspicion: a backup
        on the accused EV's own path would only fail in turn (and take new data with it).
        A wrongly accused path gets its share back when its probe is answered."""
        evs = self._in_plane[plane]
        suspect = {b.path.spine for b in evs
                   if b.state in (EvState.ASSUMED_BAD, EvState.DENIED)} | {spine}
        pool = [b for b in evs if not b.active and b.state is EvState.GOOD]
        used = Counter(b.path.spine for b in evs if b.active)
        if self.share == "full":  # the reference design's: a full or suspect path last, but taken
            pool.sort(key=lambda b: (b.path.spine in suspect,
                                     used[b.path.spine] >= self.per_path))
            if pool:
                self._activate(pool[0], now, "replaces a bad EV")
            return
        pool = [b for b in pool if b.path.spine not in suspect]
        # A path short of its active EVs first (a restricted set's unused paths).
        free = [b for b in pool if used[b.path.spine] < self.per_path]
        if free:
            self._activate(free[0], now, "replaces a bad EV")
            return
        # Then one more EV on a path that has its share: the plane's share of the
        # spraying stays whole, which its port can carry where its spines have room
        # (one flow's). Where they have none (every host's flows cross them), the
        # doubled path queues, and its first mark hands the share back (congested):
        # the plane then sprays its own paths, and its share follows what they carry.
        pool = [b for b in pool if used[b.path.spine] == self.per_path]  # not doubled yet
        if self.share == "paths" or not pool:
            return
        if now < self._hold.get(plane, (0.0, 0))[0]:
            self._short.add(plane)
            return
        # the path marked longest ago
        pool.sort(key=lambda b: max(x.last_mark for x in self._path_evs(b, evs)))
        self._extra[(plane, pool[0].path.spine)] = pool[0]
        self._activate(pool[0], now, "replaces a bad EV on a path that has its own")

    def _activate(self, b: Ev, now: float, why: str) -> None:
        b.active = True
        self._sync(b)
        self.emit(EvStateChanged(now, b.ev, "BACKUP", "ACTIVE", why))

    def congested(self, e: Ev, now: float) -> None:
        """Feedback said e's path queues (a mark, a mid-path trim). If a backup was made
        active on that path beside the path's own EV (plane_share `capacity`), it hands
        its share back: the path cannot carry two. The plane may try again after a hold
        that doubles each time (HOLD_RTTS round trips, then twice as many...)."""
        e.last_mark = now  # whichever policy hears it: a doubled path is the quietest
        x = self._extra.pop((e.path.plane, e.path.spine), None)
        if x is None:
            return
        if x.active:
            x.active = False
            self._sync(x)
            self.emit(EvStateChanged(now, x.ev, "ACTIVE", "BACKUP",
                                     "its path queues: the plane sprays its own paths"))
        rtt = e.fb.rtt_raw
        rtt = rtt if rtt == rtt and rtt > 0 else HOLD_NO_RTT
        n = self._hold.get(e.path.plane, (0.0, 0))[1]
        self._hold[e.path.plane] = (now + HOLD_RTTS * rtt * 2 ** min(n, MAX_HOLDS), n + 1)
        self._short.add(e.path.plane)

    def next_retry(self) -> float | None:
        """When a plane short of an EV may next double a path (congested's hold)."""
        return min((self._hold[p][0] for p in self._short), default=None)

    def retry(self, now: float) -> None:
        """Each plane whose hold is over, still short of an active EV, tries again."""
        for plane in [p for p in self._short if now >= self._hold[p][0]]:
            self._short.discard(plane)
            evs = self._in_plane[plane]
            for _ in range(self._want[plane] - sum(x.active for x in evs)):
                self._promote_backup(plane, now)

    def restore(self, ev: int, now: float, marked: bool) -> None:
        """An ASSUMED_BAD EV is trusted again (its probes were answered): GOOD, or SKIP
        for a rotation if the last answer came through a marking queue."""
        e = self.evs.get(ev)
        if e is None or e.state is not EvState.ASSUMED_BAD:
            return
        e.last_feedback = now
        e.heard_sent = max(e.heard_sent, e.last_probe)  # the probe went out then
        if marked:
            e.skip_until_rotation = self.rotation + 1
        self._set(e, EvState.SKIP if marked else EvState.GOOD, now, "probes answered")
        # Back into the pool: active if its path has no active EV, else a backup. A
        # backup promoted in its place on another path (_promote_backup) steps back, or
        # the wrongly accused path would carry nothing for the rest of the connection
        # while another carried two shares.
        plane = self._in_plane[e.path.plane]
        # Counting the others only: an EV judged while it stayed active (its plane came
        # back, an admin allow) is on its own path, and must not crowd itself out. When
        # it did, an EV restored after its path's backup left the path with no active EV
        # at all: a host port that came back carried nothing (paper experiment E2).
        others = [x for x in plane if x is not e]
        used = Counter(x.path.spine for x in others if x.active)
        full = (self.per_plane and e.path.spine not in used
                and len(used) >= self.per_plane)
        e.active = not full and used[e.path.spine] < self.per_path
        self._sync(e)
        if e.active:
            per_path = Counter(x.path.spine for x in plane if x.active)
            doubled = [x for x in plane if x.active and per_path[x.path.spine] > self.per_path]
            doubled.sort(key=lambda x: x.ev == ev_variant(x.ev, 0))  # a variant first
            if doubled:
                doubled[0].active = False
                self._sync(doubled[0])
                key = (e.path.plane, doubled[0].path.spine)
                if self._extra.get(key) is doubled[0]:
                    del self._extra[key]
                self.emit(EvStateChanged(now, doubled[0].ev, "ACTIVE", "BACKUP",
                                         "its path's own EV is back"))

    def deny(self, ev: int, now: float) -> None:
        e = self.evs[ev]
        self._set(e, EvState.DENIED, now, "admin deny")
        if e.active:
            e.active = False
            self._sync(e)
            self._promote_backup(e.path.plane, now)

    def allow(self, ev: int, now: float) -> None:
        e = self.evs[ev]
        if e.state is EvState.DENIED:
            self._set(e, EvState.ASSUMED_BAD, now, "admin allow: probe first")

    def use_only(self, evs: set[int], now: float) -> None:
        """An explicit profile (libmrc's): these EVs and no other. Each other one is
        denied; a listed one that was denied is allowed back, through a probe first.
        Which listed EVs are active follows the profile's own rules (per plane, per
        path, backups promoted as actives are denied). Raises ValueError naming an EV
        this connection does not have, or for an empty list."""
        unknown = sorted(evs - self.evs.keys())
        if unknown:
            raise ValueError("no EV " + ", ".join(f"0x{ev:08x}" for ev in unknown))
        if not evs:
            raise ValueError("an explicit profile needs at least one EV")
        for ev, e in self.evs.items():
            if ev in evs:
                self.allow(ev, now)
            elif e.state is not EvState.DENIED:
                self.deny(ev, now)

    def set_plane(self, plane: int, up: bool, now: float) -> None:
        if up and plane in self.planes_down:
            self.planes_down.discard(plane)
            self._sync_all()
            # Back only once probes succeed.
            for e in self.evs.values():
                if e.path.plane == plane and e.state is not EvState.DENIED:
                    self._set(e, EvState.ASSUMED_BAD, now, "plane back: probe first")
                    e.probe_from = now  # one retired before its plane went down too
        elif not up and plane not in self.planes_down:
            self.planes_down.add(plane)
            self._sync_all()
            self.emit(EvStateChanged(now, -1, f"plane {plane}", "DOWN", "port status"))

    @property
    def bad_count(self) -> int:
        return len(self.bad)

    def needs_probe(self, now: float, interval: float) -> list[Ev]:
        return [e for e in self.bad.values()
                if e.path.plane not in self.planes_down and e.last_probe + interval <= now]

    def states(self) -> dict[str, str]:
        return {f"0x{e.ev:08x}": e.state.value for e in self.evs.values()}
