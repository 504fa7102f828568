"""The one way the CLI side talks to a fabric's NIC daemons.

Requests go one batch per host, the hosts in parallel; a refused request is an
error naming the host. On top of that, the three steps of any workload of RDMA
WRITEs: `post` (register at the destination, write at the source), `wait` (poll
until each completes, fails or the caller gives up) and `verify` (SHA-256 at the
destination against the source's, then free the region). `mrcemu send`, the
scenario runner and the Python API all use these.

A write is a dict (it goes into reports as it is): src, dst, size, transport, seed, and
qp (which of the pair's QPs, RoCE's QP scaling; 0 if absent); after
`post` rkey, va, msn, sha_src; after `wait` posted_at, done_at, failed, acked_pkts,
npkts; after `verify` sha_dst and ok.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from mrcemu.errors import MrcemuError
from mrcemu.nic import ops
from mrcemu.nic.control import Relay, request
from mrcemu.transport.config import clock_scale

POLL = 0.02  # seconds between polls while waiting for completions, on 20 Mb/s links
TIMEOUT = 120.0  # seconds a batch may take (hashing a large region does)
# The longest a NIC holds a client's `wait`: how often a waiting client looks at its
# time limit, Ctrl-C and its progress display.
HOLD = 0.25


def poll_interval(host_link_mbps: float) -> float:
    """How often to ask the NICs whether writes completed, on a fabric with these host
    links. A completion's time is the NIC's own, so polling only decides how soon the
    next phase starts: on links k times slower (`--slowdown`), k times less often keeps
    that delay the same in round trips, and spares the NICs k times the requests. Never
    more often than at 20 Mb/s."""
    return POLL * max(1.0, clock_scale(host_link_mbps))


class NicClient:
    """Requests to the NIC daemons of `hosts`: by their sockets here, or through
    `relay` for those on other servers (the fabric's agents)."""

    def __init__(self, hosts: Iterable[int], relay: Relay | None = None) -> None:
        self.hosts = list(hosts)
        self.relay = relay
        self.pool = ThreadPoolExecutor(max_workers=max(1, len(self.hosts)),
                                       thread_name_prefix="nic-client")

    def __enter__(self) -> NicClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    def ask(self, calls: list[tuple[int, ops.Op]]) -> list[dict]:
        """Each (host, request): the replies in the order of `calls`. One batch a host,
        the hosts at once; those another server runs, one relayed batch a server."""
        per_host: dict[int, list[dict]] = {}
        for h, req in calls:
            per_host.setdefault(h, []).append(req.to_json())
        relayed: dict[Hashable, dict[str, list[dict]]] = {}
        futs: dict[int, Future] = {}
        for h, rs in per_host.items():
            via = self.relay.via(f"h{h}") if self.relay else None
            if via is None:
                futs[h] = self.pool.submit(request, f"h{h}", "batch", TIMEOUT, requests=rs)
            else:
                relayed.setdefault(via, {})[f"h{h}"] = rs
        assert self.relay is not None or not relayed
        groups = {via: self.pool.submit(self.relay.relay, via, batches, TIMEOUT)
                  for via, batches in relayed.items()} if self.relay else {}
        replies: dict[int, Iterator[dict]] = {h: iter(f.result()["replies"])
                                              for h, f in futs.items()}
        for fut in groups.values():
            for host, reply in fut.result().items():
                if not reply.get("ok"):
                    raise MrcemuError(reply.get("error") or f"{host}: request failed")
                replies[int(host[1:])] = iter(reply["replies"])
        out = [next(replies[h]) for h, _ in calls]
        for (h, _), r in zip(calls, out, strict=True):
            if not r.get("ok"):
                raise MrcemuError(f"h{h}: {r.get('error')}")
        return out

    def ask_each(self, op: ops.Op) -> list[dict]:
        """The same request to every host."""
        return self.ask([(h, op) for h in self.hosts])

    def match_settings(self, writes: list[dict], stats: list[dict]) -> bool:
        """Make each write's connection again where it was made with other settings
        than the write's (a write's settings, such as its load-balancing policy, are its
        connection's for life): at the source with the write's, at the destination with
        its own, so both ends start their PSNs afresh; and where the connection failed
        (a QP in error is made again, as a program would). An error if either is busy.
        `stats`: each write's connection's stats reply, as the caller already asked for
        them. True if any connection was made again (its counters start afresh)."""
        stale = {(w["src"], w["dst"], w["transport"], w.get("qp", 0)):
                 (w.get("settings") or {}, r.get("gen", 0) + 1)
                 for w, r in zip(writes, stats, strict=True)
                 if r["stats"] is not None and (r.get("settings", {}) != (w.get("settings") or {})
                                                or r.get("failed"))}
        if stale:
            # Both ends at the next generation of the pair's QPN: what either end's old
            # QP still has on the wire reaches neither new one.
            self.ask([(a, ops.Reconnect(peer=b, transport=t, qp=q, settings=settings, gen=gen))
                      for (a, b, t, q), (settings, gen) in stale.items()]
                     + [(b, ops.Reconnect(peer=a, transport=t, qp=q, gen=gen))
                        for (a, b, t, q), (_s, gen) in stale.items()])
        return bool(stale)

    def post(self, writes: list[dict]) -> list[dict]:
        """Register each write's region at its destination, then post it at its source.
        If any is refused (over a NIC's memory budget, say), the regions already made
        are freed before the error is raised."""
        regions = self.ask([(w["dst"], ops.Register(size=w["size"])) for w in writes])
        for w, mr in zip(writes, regions, strict=True):
            w["rkey"], w["va"] = mr["rkey"], mr["va"]
        try:
            wrote = self.ask([(w["src"], ops.Write(
                peer=w["dst"], transport=w["transport"], size=w["size"], seed=w["seed"],
                va=w["va"], rkey=w["rkey"], qp=w.get("qp", 0),
                settings=w.get("settings") or None)) for w in writes])
        except MrcemuError:
            self.free(writes)
            raise
        for w, r in zip(writes, wrote, strict=True):
            w["msn"], w["sha_src"] = r["msn"], r["sha256"]
        return writes

    def poll(self, writes: list[dict]) -> None:
        states = self.ask([(w["src"], ops.Msg(peer=w["dst"], transport=w["transport"],
                                              msn=w["msn"], qp=w.get("qp", 0)))
                           for w in writes])
        for w, m in zip(writes, states, strict=True):
            for k in ("posted_at", "done_at", "failed", "why", "acked_pkts", "npkts"):
                w[k] = m[k]

    def hold(self, writes: list[dict], timeout: float) -> None:
        """Each write's progress as soon as all of its source's writes have completed or
        failed, or after `timeout` seconds: one held `wait` a source host, the hosts at
        once (their sockets here: the relay answers batches only)."""
        per_host: dict[int, list[dict]] = {}
        for w in writes:
            per_host.setdefault(w["src"], []).append(w)
        futs = {h: self.pool.submit(request, f"h{h}", ops.Wait(msgs=[
            ops.Msg(peer=w["dst"], transport=w["transport"], msn=w["msn"],
                    qp=w.get("qp", 0)).to_json() for w in ws], timeout=timeout),
            timeout + TIMEOUT) for h, ws in per_host.items()}
        for h, fut in futs.items():
            for w, m in zip(per_host[h], fut.result()["replies"], strict=True):
                if not m["ok"]:
                    raise MrcemuError(f"h{h}: {m['error']}")
                for k in ("posted_at", "done_at", "failed", "why", "acked_pkts", "npkts"):
                    w[k] = m[k]

    def wait(self, writes: list[dict], give_up: Callable[[], bool],
             progress: Callable[[list[dict]], None] | None = None,
             every: float = POLL) -> bool:
        """Until every write completed or its QP failed (True), or `give_up()` says stop
        (False): held by the NICs until their writes are done (`hold`), looking at
        `give_up` and `progress` at least every HOLD seconds; on other servers, polled
        every `every` seconds."""
        pending = list(writes)
        while pending:
            if give_up():
                return False
            if self.relay is None or all(self.relay.via(f"h{w['src']}") is None
                                         for w in pending):
                self.hold(pending, max(every, HOLD))
            else:
                time.sleep(every)
                self.poll(pending)
            if progress:
                progress(writes)
            pending = [w for w in pending if not (w["done_at"] or w["failed"])]
        return True

    def verify(self, writes: list[dict]) -> None:
        """SHA-256 of each destination region against the source's; frees the regions."""
        try:
            hashes = self.ask([(w["dst"], ops.Hash(rkey=w["rkey"])) for w in writes])
        finally:
            self.free(writes)
        for w, h in zip(writes, hashes, strict=True):
            w["sha_dst"] = h["sha256"]
            w["ok"] = bool(w.get("done_at")) and w["sha_dst"] == w["sha_src"]

    def free(self, writes: list[dict]) -> None:
        # Best effort: a region that is already gone is not an error here.
        calls: list[tuple[int, ops.Op]] = [(w["dst"], ops.Free(rkey=w["rkey"]))
                                           for w in writes if "rkey" in w]
        try:
            self.ask(calls)
        except MrcemuError:
            pass
