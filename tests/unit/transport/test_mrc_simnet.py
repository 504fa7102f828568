"""The MRC core in a simulated lossy, reordering multi-path network: exact, in virtual time."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from mrcemu.topology.paths import ev_fields
from mrcemu.transport.events import EvStateChanged, MessageCompleted, MessageReceived
from mrcemu.transport.evs import EvState
from mrcemu.wire import codec
from mrcemu.wire.constants import MRC_DATA, NackReason, Opcode
from mrcemu.wire.layout import BTH_AT
from tests.unit.transport.helpers import drain, pair, write


def received(c) -> list[tuple[int, int | None]]:
    return [(e.msn, e.imm) for e in drain(c, MessageReceived)]


def sha(b) -> str:
    return hashlib.sha256(b).hexdigest()


def test_clean_network_delivers_and_sprays_over_every_path():
    net, ca, cb = pair()
    data, mr = write(ca, cb, 4 << 20)
    net.run(5.0, stop=lambda: ca.idle)
    assert ca.idle and sha(mr.buf) == sha(data)
    assert received(cb) == [(0, None)]
    base_evs = {ev for ev, n in ca.stats.per_ev.items() if n}
    assert len({ev_fields(ev) for ev in base_evs}) == 32
    counts = list(ca.stats.per_ev.values())
    mean = sum(counts) / len(counts)
    assert all(abs(c - mean) <= 0.25 * mean for c in counts)
    assert ca.stats.retransmits == 0 and ca.stats.rtos == 0
    assert [c for c in drain(ca, EvStateChanged) if c.new == "ASSUMED_BAD"] == []


def test_ten_percent_loss_with_reordering_keeps_integrity():
    net, ca, cb = pair(seed=5)
    net.default.loss = 0.10
    net.default.jitter = 0.004
    net.default.dup = 0.02
    data, mr = write(ca, cb, 2 << 20)
    net.run(30.0, stop=lambda: ca.idle)
    assert ca.idle, (ca.stats.to_json(), ca.tx.outstanding)
    assert sha(mr.buf) == sha(data)
    assert ca.stats.retransmits > 0
    # The network duplicated packets: the receiver saw copies and placed each once.
    assert cb.stats.rx_dup > 0


def test_blackholed_path_goes_assumed_bad_then_probe_restores_it():
    net, ca, cb = pair()
    # 10 ms each way: the transfer lasts many RTOs. (Retransmissions avoid the path that
    # lost them, so a transfer shorter than an RTO can finish before any path is judged.)
    net.default.delay = 0.01
    bad = net.path("h0", 3, 1)
    bad.blackhole = True
    data, mr = write(ca, cb, 8 << 20)
    victim = next(e for e in ca.profile.evs.values()
                  if e.path.plane == 3 and e.path.spine == 1 and e.active)
    t_bad = {}

    def step(now):
        if victim.state is EvState.ASSUMED_BAD and "t" not in t_bad:
            t_bad["t"] = now
            t_bad["sent"] = victim.sent
    net.run(1.0, stop=lambda: "t" in t_bad and net.now > t_bad["t"] + 0.3, on_step=step)
    assert "t" in t_bad
    mine = [(t, ev, op) for t, src, ev, op in net.sent_log if src == "h0"]
    first_send = min(t for t, ev, op in mine if ev == victim.ev)
    assert t_bad["t"] - first_send <= ca.rto + 0.011  # within about one RTO
    # No new data went onto it afterwards: only probes. (h7's SACKs may use the same EV
    # number on its own reverse path.)
    after = [op for t, ev, op in mine if ev == victim.ev and t > t_bad["t"]]
    assert after and set(after) == {Opcode.RELIABILITY_PROBE_REQ}
    bad.blackhole = False
    net.run(net.now + 0.5, stop=lambda: victim.state is not EvState.ASSUMED_BAD)
    assert victim.state is EvState.GOOD
    net.run(30.0, stop=lambda: ca.idle)
    assert sha(mr.buf) == sha(data)


def test_trimmed_packet_gets_nack_and_immediate_retransmit_and_skip_not_bad():
    net, ca, cb = pair()
    net.path("h0", 2, 0).trim = 0.3
    data, mr = write(ca, cb, 4 << 20)
    # The order of what h0 does: a NACK handled, a retransmission or new data sent.
    order: list[str] = []
    on_nack, to_send = ca._on_nack, ca.packets_to_send

    def sent(now, budget=None):
        out = to_send(now, budget)
        for _ev, pkt in out:  # each data packet says in its BTH whether it is a copy
            d = codec.decode(net.deliver(pkt))
            if d.opcode in MRC_DATA:
                order.append("rtx" if d.bth["rtx"] else "new")
        return out

    ca._on_nack = lambda n, now: (order.append("nack"), on_nack(n, now))
    ca.packets_to_send = sent
    net.run(10.0, stop=lambda: ca.idle)
    changes = [c for c in drain(ca, EvStateChanged) if c.new in ("SKIP", "ASSUMED_BAD")]
    assert sha(mr.buf) == sha(data)
    assert cb.stats.dropped["trimmed"] > 0
    assert cb.stats.nacks_tx == cb.stats.dropped["trimmed"] == ca.stats.trims_nacked
    assert ca.stats.retransmits >= ca.stats.trims_nacked
    assert ca.stats.rtos == 0
    assert any(c.new == "SKIP" for c in changes)
    assert not any(c.new == "ASSUMED_BAD" for c in changes)
    # Retransmission follows each NACK at once: the next data packet h0 sends after a
    # trim NACK is a retransmission, ahead of any new data, with no timer in between.
    assert [e for i, e in enumerate(order) if i and order[i - 1] == "nack" and e != "nack"
            and e != "rtx"] == []
    assert order.count("nack") == ca.stats.trims_nacked > 0
    assert order.count("rtx") == ca.stats.retransmits and "new" in order


def test_ecn_mark_echoes_skip_once_and_sets_skip():
    net, ca, cb = pair()
    net.path("h0", 1, 2).ce = 1.0
    data, mr = write(ca, cb, 2 << 20)
    net.run(10.0, stop=lambda: ca.idle)
    assert sha(mr.buf) == sha(data)
    changes = drain(ca, EvStateChanged)
    skipped = {c.ev for c in changes if c.new == "SKIP"}
    assert skipped and all(ev_fields(ev) == (1, 2) for ev in skipped)
    # Each SKIP ends at a later rotation, and the change says when: in the run, after
    # the SKIP began (reports drop changes timed before the run's start).
    began = {}
    ended = 0
    for c in changes:
        if c.new == "SKIP":
            began[c.ev] = c.t
        elif c.old == "SKIP" and c.new == "GOOD":
            assert c.why == "skip over" and 0 < began.pop(c.ev) <= c.t <= net.now
            ended += 1
    assert ended > 0


def test_a_dead_paths_tail_is_resent_within_round_trips_and_its_ev_retired_by_its_probe():
    net, ca, cb = pair(min_rto=1.0)
    net.default.delay = 0.01
    net.path("h0", 3, 1).blackhole = True
    victim = next(e for e in ca.profile.evs.values()
                  if e.active and (e.path.plane, e.path.spine) == (3, 1))
    data, mr = write(ca, cb, 2 << 20)
    net.run(10.0, stop=lambda: ca.idle)
    assert sha(mr.buf) == sha(data)
    # Nothing later on the dead EV ever arrives, so no hole proves its packets lost: the
    # overdue scan stopped it and sent its packets again elsewhere, with no ack to
    # trigger it and long before the (1 s) RTO; its control-class probe went unanswered.
    assert ca.stats.overdue_resent > 0 and ca.stats.rtos == 0
    # A failure loss is not congestion: the window was never halved.
    assert ca.cc.decreases == 0
    events = drain(ca)
    changes = [(c.ev, c.new, c.why) for c in events
               if isinstance(c, EvStateChanged) and c.ev == victim.ev]
    assert changes[:2] == [(victim.ev, "STOPPED", "overdue"),
                           (victim.ev, "ASSUMED_BAD", "lost: probe unanswered")]
    assert ca.stats.ev_stops >= 1 and ca.stats.probe_timeouts >= 1
    done = [e for e in events if isinstance(e, MessageCompleted)]
    assert [d.msn for d in done] == [0] and done[0].done_at < 0.2


def test_a_path_that_turns_slow_is_stopped_once_and_retired_never():
    # Eight paths (spine 1 of every plane) go from 5 ms to 30 ms one way mid-transfer:
    # slow, losing nothing. Their packets fall overdue against the round trips the paths
    # had, are sent again, and then arrive late: every EV stopped is heard from again,
    # none is retired, and each path's own RTT estimate takes the late packet's age, so
    # it is stopped once.
    net, ca, cb = pair()
    net.default.delay = 0.005
    net.default.jitter = 0.002
    data, mr = write(ca, cb, 16 << 20)
    slow = [net.path("h0", plane, 1) for plane in range(8)]

    def step(now: float) -> None:
        if now > 0.05:
            for p in slow:
                p.delay = 0.03
    net.run(30.0, stop=lambda: ca.idle, on_step=step)
    assert sha(mr.buf) == sha(data)
    changes = [(c.ev, c.new, c.why) for c in drain(ca, EvStateChanged)]
    stopped = [ev for ev, new, _ in changes if new == "STOPPED"]
    assert stopped and all(ev_fields(ev)[1] == 1 for ev in stopped)
    assert len(stopped) == len(set(stopped)) <= 8
    assert sorted(ev for ev, new, why in changes if new == "GOOD") == sorted(stopped)
    assert not [c for c in changes if c[1] == "ASSUMED_BAD"] and ca.stats.hole_losses == 0
    # Nothing was lost: every packet sent again had arrived, once, before; and every
    # copy went for being overdue (a packet queued to go again whose ack came while it
    # waited for the window goes no more: `overdue_resent` counts the queued).
    assert ca.stats.retransmits == cb.stats.rx_dup > 0
    assert ca.stats.retransmits <= ca.stats.overdue_resent
    assert (ca.stats.rtos, ca.stats.trims_nacked, ca.stats.retired_resent) == (0, 0, 0)


def test_a_completed_message_is_acked_at_once_by_a_sack_and_a_cumulative_ack_on_two_paths():
    net, ca, cb = pair()
    net.default.jitter = 0.0005  # arrivals apart, all within the 2 ms SACK delay
    data, mr = write(ca, cb, 3 * 4096)  # three packets: below the SACK cadence of 4
    net.run(5.0, stop=lambda: ca.idle)
    net.run(net.now + 0.01)  # the ack that did not complete it is still on its way
    assert sha(mr.buf) == sha(data) and received(cb) == [(0, None)]
    acks = [(t, ev, op) for t, src, ev, op in net.sent_log
            if src == "h7" and op in (Opcode.RELIABILITY_SACK, Opcode.ACKNOWLEDGE)]
    first_t = min(t for t, _, _ in acks)
    first = [(ev, op) for t, ev, op in acks if t == first_t]
    assert sorted(op for _, op in first) == [Opcode.ACKNOWLEDGE, Opcode.RELIABILITY_SACK]
    assert first[0][0] != first[1][0]
    assert cb.stats.acks_tx == 1 and ca.stats.acks_rx == 1


def test_the_cumulative_ack_alone_completes_a_message_when_every_sack_is_lost():
    net, ca, cb = pair()
    send = cb.packets_to_send
    cb.packets_to_send = lambda now, budget=None: [
        (ev, p) for ev, p in send(now, budget) if p[BTH_AT] != Opcode.RELIABILITY_SACK]
    data, mr = write(ca, cb, 64 * 4096)
    net.run(5.0, stop=lambda: ca.idle)
    assert ca.idle and sha(mr.buf) == sha(data)
    assert ca.stats.sacks_rx == 0 and ca.stats.acks_rx == 1
    assert [d.msn for d in drain(ca, MessageCompleted)] == [0]


def test_one_lost_packet_retires_its_ev_at_once_and_nothing_else():
    net, ca, cb = pair()
    net.default.delay = 0.005  # a 10 ms round trip
    data, mr = write(ca, cb, 4 << 20)
    victim = next(e for e in ca.profile.evs.values() if e.active and e.path.plane == 1)
    lost: list[float] = []
    send = ca.packets_to_send

    def lose_one(now, budget=None):  # the first data packet on the victim: lost on the wire
        out = send(now, budget)
        for i, (ev, pkt) in enumerate(out):
            if ev == victim.ev and not lost and pkt[BTH_AT] in MRC_DATA:
                lost.append(now)
                return out[:i] + out[i + 1:]
        return out

    ca.packets_to_send = lose_one
    net.run(10.0, stop=lambda: ca.idle)
    assert sha(mr.buf) == sha(data) and lost
    bad = [c for c in drain(ca, EvStateChanged) if c.new == "ASSUMED_BAD"]
    # One real loss, one EV retired: the victim, found by the SACK hole it left (the next
    # packet on its EV arrived, it did not), dated by the lost packet's send time, and
    # confirmed once a NACK could have said it was trimmed.
    assert [(c.ev, c.why, c.lost_sent) for c in bad] == [(victim.ev, "lost: SACK hole", lost[0])]
    assert bad[0].t - lost[0] <= 2 * ca.srtt + ca.cfg.ack_slack
    assert ca.stats.losses == 1 and ca.stats.rtos == 0


def test_trims_at_the_last_hop_are_nacked_and_change_no_ev():
    net, ca, cb = pair()
    net.default.trim_lasthop = 0.05  # incast at the receiver's leaf, on every path
    data, mr = write(ca, cb, 4 << 20)
    net.run(10.0, stop=lambda: ca.idle)
    assert sha(mr.buf) == sha(data)
    assert ca.stats.trims_nacked == cb.stats.nacks_tx == cb.stats.dropped["trimmed"] > 0
    assert [c for c in drain(ca, EvStateChanged) if c.ev >= 0] == []


def test_every_trim_takes_its_packet_off_the_window_unless_quick_adapt_sets_it():
    """NSCC's NACK rule (transport/nscc.py): a trimmed packet's bytes leave the window
    at once, and quick adapt is flagged; no NACK halves it."""
    net, ca, cb = pair()
    net.default.trim_lasthop = 0.05
    seen: list[tuple[float, float, bool]] = []
    on_nack = ca._on_nack

    def watched(n: dict, now: float) -> None:
        before, adapted = ca.cc.cwnd, ca.cc.quick_adapts
        on_nack(n, now)
        assert ca.cc.qa_flag or ca.cc.quick_adapts > adapted
        seen.append((before, ca.cc.cwnd, ca.cc.quick_adapts > adapted))
    ca._on_nack = watched
    data, mr = write(ca, cb, 4 << 20)
    net.run(10.0, stop=lambda: ca.idle)
    assert sha(mr.buf) == sha(data)
    floor, pmtu = ca.cc.min_cwnd, ca.cfg.pmtu
    assert len(seen) == ca.stats.trims_nacked > 0
    assert any(not adapted and before - pmtu >= floor for before, _, adapted in seen)
    for before, after, adapted in seen:
        if not adapted:
            assert after == max(before - pmtu, floor)
    assert ca.cc.decreases == 0  # nothing was marked
    # what a report reads (nic/transfer.py) is the window's own count and state
    got, st = ca.cc_state(), ca.stats
    assert (st.cc_quick_adapts, st.cc_decreases, got["cwnd"]) == (
        ca.cc.quick_adapts, ca.cc.decreases, ca.cc.cwnd)
    # A NACK about a packet no longer in flight (here: long since acknowledged) frees
    # nothing, so it changes nothing.
    nack = {"nack_reason": NackReason.TRIMMED_LASTHOP, "nack_psn": 0,
            "entropy": next(iter(ca.profile.evs))}
    w, flag = ca.cc.cwnd, ca.cc.qa_flag
    on_nack(nack, net.now)
    assert (ca.cc.cwnd, ca.cc.qa_flag) == (w, flag)


CONTROL = (Opcode.RELIABILITY_SACK, Opcode.RELIABILITY_NACK, Opcode.ACKNOWLEDGE)


def moved(net, c, plane: int, spine: int | None) -> list[float]:
    """Runs `net`, noting when `c`'s reverse EV for `plane` first left `spine`."""
    at: list[float] = []

    def step(now: float) -> None:
        if not at and ev_fields(c.reverse.chosen[plane].ev)[1] != spine:
            at.append(now)
    return at, step


def test_a_connection_that_only_receives_moves_its_acks_off_a_dead_path_by_probing():
    # B9: h7 only receives, so no data of its own tests its EVs toward h0. The path its
    # acks take on plane 2 is dead from the start; a probe an RTT finds it another.
    net, ca, cb = pair(probe_interval=0.01)  # the RTT here: no floor above it
    net.default.delay = 0.005
    dead = cb.reverse.chosen[2]
    spine = ev_fields(dead.ev)[1]
    net.path("h7", 2, spine).blackhole = True
    data, mr = write(ca, cb, 16 << 20)
    at, step = moved(net, cb, 2, spine)
    net.run(30.0, stop=lambda: ca.idle, on_step=step)
    assert ca.idle and sha(mr.buf) == sha(data)
    assert cb.stats.tx_data == 0 and cb.stats.reverse_probes > 0
    assert cb.stats.reverse_adopted >= 1 and at
    ctl = [(t, ev) for t, src, ev, op in net.sent_log if src == "h7" and op in CONTROL]
    on_dead = [t for t, ev in ctl if ev_fields(ev) == (2, spine)]
    # Acks went into the dead path until the set moved, and never after.
    assert on_dead and max(on_dead) <= at[0]
    # One EV a plane: the acks sent at one moment never take two EVs of one plane.
    at_once: dict[float, set[int]] = {}
    for t, ev in ctl:
        at_once.setdefault(t, set()).add(ev)
    assert all(len(evs) == len({ev_fields(ev)[0] for ev in evs}) for evs in at_once.values())
    assert max(len(evs) for evs in at_once.values()) == 8
    # The acks lost to the dead path retired none of h0's EVs toward h7.
    assert [c for c in drain(ca, EvStateChanged) if c.new == "ASSUMED_BAD"] == []
    # Data stopped: the probes stop, and the receiver waits on no timer.
    probes = cb.stats.reverse_probes
    net.run(net.now + 1.0)
    assert cb.next_timer() is None and cb.stats.reverse_probes <= probes + 1


def test_with_data_flowing_the_set_leaves_a_dead_path_before_the_monitor_retires_it():
    # B9: h7 sends too, so its own data tests its EVs toward h0: the plane's ack EV
    # leaves the dead path as soon as the data on that path is overdue and the path
    # monitor stops it, before the stop's probe goes unanswered and retires it.
    net, ca, cb = pair()
    net.default.delay = 0.005
    dead = cb.reverse.chosen[2]
    spine = ev_fields(dead.ev)[1]
    net.path("h7", 2, spine).blackhole = True
    data, mr = write(ca, cb, 4 << 20)
    back, mr_back = write(cb, ca, 8 << 20, seed=9)  # h7 sends for as long as it receives
    at, step = moved(net, cb, 2, spine)
    probes_then: list[int] = []

    def watch(now: float) -> None:
        step(now)
        if at and not probes_then:
            probes_then.append(cb.stats.reverse_probes)
    net.run(30.0, stop=lambda: ca.idle and cb.idle, on_step=watch)
    assert sha(mr.buf) == sha(data) and sha(mr_back.buf) == sha(back)
    changes = [(c.t, c.new) for c in drain(cb, EvStateChanged) if c.ev == dead.ev]
    stopped = [t for t, new in changes if new == "STOPPED"]
    retired = [t for t, new in changes if new == "ASSUMED_BAD"]
    assert at and stopped and retired and at[0] == stopped[0] < retired[0]
    assert probes_then == [0]  # its own data's feedback did it, not B9's probes
    on_dead = [t for t, src, ev, op in net.sent_log
               if src == "h7" and op in CONTROL and ev_fields(ev) == (2, spine)]
    assert max(on_dead, default=0.0) <= at[0]


def test_one_ev_a_plane_sprays_every_rotation_without_a_new_order(tmp_path):
    # Two planes with one spine each: one usable EV a plane, so every rotation's order is
    # the last one's, and the compiled sender sprays it again without asking Python for
    # it (EvProfile.new_rotation's fast path). The data still alternates the planes.
    f = tmp_path / "thin.yaml"
    f.write_text("planes: 2\nleaves_per_plane: 2\nspines_per_plane: 1\nhosts: 4\n"
                 "host_link_mbps: 20\nfabric_link_mbps: 20\nmtu: 9000\n")
    net, ca, cb = pair(str(f), 0, 3)
    told = []
    spray = ca.profile.on_rotation
    ca.profile.on_rotation = lambda order: (told.append(list(order)), spray(order))[1]
    data, mr = write(ca, cb, 1 << 20)
    net.run(10.0, stop=lambda: ca.idle)
    assert ca.idle and bytes(mr.buf) == data
    per_ev = ca.stats.per_ev
    assert len(per_ev) == 2 and abs(per_ev[min(per_ev)] - per_ev[max(per_ev)]) <= 1
    assert ca.profile.rotation >= 128  # 256 packets, two a rotation
    assert len(told) == 1  # (rotations that changed nothing were not handed over)


def _stale_copies(gen: int) -> tuple[bool, bool, int]:
    """A 1 MiB write on a pair, then a 1 MiB write on the pair made again at generation
    `gen`: once the new requester has sent its every packet, every frame the old pair
    sent arrives again (a delay line's backlog, a duplicate's SACK). Returns (the new
    write completed at the requester, its bytes intact at the responder, the frames the
    new ends dropped as another QP's)."""
    log: list[tuple[str, bytes]] = []
    net, ca, cb = pair(seed=8)
    send = net._transmit
    net._transmit = lambda src, ev, pkt: (log.append((src, net.deliver(pkt))),
                                          send(src, ev, pkt))[1]
    write(ca, cb, 1 << 20, seed=1)
    net.run(5.0, stop=lambda: ca.idle)
    assert ca.idle
    net2, ca2, cb2 = pair(seed=8, gen=gen)
    data, mr = write(ca2, cb2, 1 << 20, seed=2)
    replayed = False

    def replay(now: float) -> None:
        nonlocal replayed
        if not replayed and ca2.tx.pending == 0:
            replayed = True
            for src, pkt in log:
                (ca2 if src == "h7" else cb2).receive(pkt, now)
    net2.run(5.0, stop=lambda: ca2.idle, on_step=replay)
    assert replayed
    done = [m.msn for m in drain(ca2, MessageCompleted)]
    wrong = ca2.stats.dropped["wrong_qp"] + cb2.stats.dropped["wrong_qp"]
    return done == [0], sha(mr.buf) == sha(data), wrong


def test_a_pair_made_again_on_the_next_qpns_hears_none_of_the_old_ones_copies():
    """A QP destroyed and made again starts its PSNs at 0 (daemon.remake). On the QPNs
    it had, the old pair's copies still on the wire are the new one's: the old responder's
    final ack acknowledges the new packets before they arrive, and the old data takes the
    new PSNs' places, so the requester completes what the responder never got (CI saw
    the requester stall so, una past what it had sent). At the next generation's QPNs
    they are another QP's, dropped, and the write is intact."""
    completed, intact, dropped = _stale_copies(gen=1)
    assert completed and intact
    assert dropped > 256  # the old data and every ack of it
    completed, intact, dropped = _stale_copies(gen=0)
    assert completed and not intact and dropped == 0


def test_a_probe_asked_for_brings_a_retired_ev_back_before_its_interval():
    net, ca, cb = pair()
    ev = next(e.ev for e in ca.profile.evs.values() if e.active)
    ca.profile.assume_bad(ev, 0.0, "test")
    ca.profile.evs[ev].last_probe = 0.0  # its own probe is an interval away
    # as many answered as bring an EV back (each one counts, asked for or not)
    pids = [ca.probe(ev, 0.001) for _ in range(ca.cfg.probes_to_restore)]
    net.run(0.05, stop=lambda: ca.profile.evs[ev].state is EvState.GOOD)
    assert ca.profile.evs[ev].state is EvState.GOOD, ca.profile.evs[ev].state
    assert net.now < ca.cfg.probe_interval  # answered, not its interval's probe
    assert [c.why for c in drain(ca, EvStateChanged) if c.ev == ev][-1].startswith("probe")
    assert pids[-1] == ca.profile.evs[ev].probe_seq & 0xFFFF and len(set(pids)) == len(pids)


def plane_share(net, c, plane: int, since: float) -> float:
    """`plane`'s fraction of the data packets h0 sent since `since`."""
    data = [ev for t, src, ev, op in net.sent_log
            if src == "h0" and t >= since and op in MRC_DATA]
    return sum(c.profile.evs[ev].path.plane == plane for ev in data) / len(data)


def queues_when_doubled(net, c, plane: int):
    """An on_step hook: a path of `plane` carrying more than its own EV (two shares
    through spines every host's flows already fill) marks half its packets CE."""
    def step(now: float) -> None:
        per = Counter(e.path.spine for e in c.profile.evs.values()
                      if e.path.plane == plane and e.active)
        for spine in range(4):
            net.path("h0", plane, spine).ce = 0.5 if per[spine] > 1 else 0.0
    return step


def lose_and_restore(down, share: str = "capacity", full_spines: bool = True):
    """h0 writes to h7 while spines `down` of plane 3 forward nothing, then again once
    they are back and probed: plane 3's share of the data packets sent after the
    retirements, and after the restores."""
    net, ca, cb = pair(plane_share=share)
    net.default.delay = 0.002
    step = queues_when_doubled(net, ca, 3) if full_spines else None
    for s in down:
        net.path("h0", 3, s).blackhole = True
    data, mr = write(ca, cb, 8 << 20)
    victims = [e for e in ca.profile.evs.values()
               if e.path.plane == 3 and e.path.spine in down and e.active]
    net.run(2.0, stop=lambda: all(e.state is EvState.ASSUMED_BAD for e in victims),
            on_step=step)
    assert all(e.state is EvState.ASSUMED_BAD for e in victims)
    retired = net.now
    net.run(60.0, stop=lambda: ca.idle, on_step=step)
    assert ca.idle and sha(mr.buf) == sha(data)
    during = plane_share(net, ca, 3, retired)
    for s in down:
        net.path("h0", 3, s).blackhole = False
    net.run(net.now + 1.0, stop=lambda: all(e.state is EvState.GOOD for e in victims),
            on_step=step)
    assert all(e.state is EvState.GOOD and e.active for e in victims)
    back = net.now
    data, mr = write(ca, cb, 4 << 20, now=back)
    net.run(60.0, stop=lambda: ca.idle, on_step=step)
    assert ca.idle and sha(mr.buf) == sha(data)
    return during, plane_share(net, ca, 3, back)


@pytest.mark.parametrize("down", [(1,), (1, 2)])
def test_a_plane_whose_spines_are_full_gets_the_share_its_paths_carry_and_gets_it_back(down):
    """Plane 3 loses 1 of its 4 spines (a quarter of its capacity), or 2, where every
    spine is full: a path given a second EV queues. The backup that doubled a path hands
    its share back at the first mark, so the plane's share of the spraying is what its
    paths carry (0.75 or 0.5 of the others'), and a full plane's once they are back.
    (The rule before, `full`, kept the backup: the plane kept a share its spines could
    not carry, its doubled path marked and shed for rounds.)"""
    during, after = lose_and_restore(down)
    capacity = (4 - len(down)) / 4
    fair = capacity / (7 + capacity)  # plane 3's share were every port paced to its paths
    assert abs(during / fair - 1) <= 0.10, (during, fair)
    assert abs(after / (1 / 8) - 1) <= 0.10, after


def test_a_plane_whose_spines_have_room_keeps_its_whole_share():
    """One flow: plane 3's other spines carry a second share without queueing, so the
    plane's capacity is its port's, and its share stays a full plane's (`paths`, one
    share a usable path, gave it 3/4 of one: its port a quarter idle)."""
    during, after = lose_and_restore((1,), full_spines=False)
    assert abs(during / (1 / 8) - 1) <= 0.10, during
    assert abs(after / (1 / 8) - 1) <= 0.10, after
