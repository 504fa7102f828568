"""The NIC loop's schedule: due timers in order, rescheduling, and the send-budget line."""

from hypothesis import given
from hypothesis import strategies as st

from mrcemu.nic.wakeups import TimerHold, Wakeups

NOW = 0.0  # when the schedules below are made: every deadline is in the future


def test_nothing_scheduled_nothing_due():
    w: Wakeups[str] = Wakeups()
    assert w.next_due() is None
    assert w.pop_due(1e9) == []
    assert len(w) == 0


def test_due_timers_come_out_earliest_first_with_their_due_time():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 3.0, NOW)
    w.schedule("b", 1.0, NOW)
    w.schedule("c", 2.0, NOW)
    assert w.next_due() == 1.0
    assert w.pop_due(2.5) == [("b", 1.0), ("c", 2.0)]
    assert w.next_due() == 3.0
    assert len(w) == 1


def test_a_due_time_at_now_is_due():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 5.0, NOW)
    assert w.pop_due(4.999) == []
    assert w.pop_due(5.0) == [("a", 5.0)]


def test_rescheduling_replaces_the_old_time_later_or_earlier():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 1.0, NOW)
    w.schedule("a", 4.0, NOW)  # an ack moved the RTO later: not woken at 1.0
    assert w.next_due() == 4.0
    assert w.pop_due(2.0) == []
    w.schedule("a", 3.0, NOW)  # and earlier again
    assert w.pop_due(3.5) == [("a", 3.0)]
    assert w.pop_due(10.0) == []  # the stale 4.0 is gone with it


def test_no_timer_unschedules():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 1.0, NOW)
    w.schedule("a", None, NOW)
    assert w.next_due() is None and w.pop_due(5.0) == [] and len(w) == 0


def test_popped_connections_are_unscheduled_until_scheduled_again():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 1.0, NOW)
    assert w.pop_due(1.0) == [("a", 1.0)]
    assert w.pop_due(2.0) == []
    w.schedule("a", 1.0, NOW)  # the same time again is a new timer, not a duplicate
    assert w.pop_due(2.0) == [("a", 1.0)]


def test_the_budget_line_is_round_robin_and_fed_connections_leave_it():
    w: Wakeups[str] = Wakeups()
    for c in "abc":
        w.starve(c)
    assert list(w.starved()) == ["a", "b", "c"]
    w.starve("a")  # a used its slots again: back of the line
    assert list(w.starved()) == ["b", "c", "a"]
    w.fed("b")
    assert list(w.starved()) == ["c", "a"]
    w.fed("zzz")  # never waited: nothing happens
    assert len(w) == 2


def test_iterating_the_line_while_feeding_it_is_safe():
    w: Wakeups[str] = Wakeups()
    for c in "abc":
        w.starve(c)
    seen = []
    for c in w.starved():
        seen.append(c)
        w.fed(c) if c != "b" else w.starve(c)
    assert seen == ["a", "b", "c"] and list(w.starved()) == ["b"]


def test_len_counts_a_connection_once_whether_timed_starved_or_both():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 1.0, NOW)
    w.starve("a")
    w.starve("b")
    assert len(w) == 2


@given(st.lists(st.tuples(st.sampled_from("abcdef"),
                          st.one_of(st.none(), st.floats(0, 100, allow_nan=False))),
                max_size=60),
       st.floats(0, 100, allow_nan=False))
def test_due_is_exactly_the_last_schedule_of_each_connection(ops, now):
    w: Wakeups[str] = Wakeups()
    last: dict[str, float | None] = {}
    for c, t in ops:
        w.schedule(c, t, NOW)
        last[c] = t
    want = sorted(((t, c) for c, t in last.items() if t is not None and t <= now))
    got = w.pop_due(now)
    assert sorted((t, c) for c, t in got) == want
    assert [t for _, t in got] == sorted(t for _, t in got)
    later = [t for t in last.values() if t is not None and t > now]
    assert w.next_due() == (min(later) if later else None)


def test_a_deadline_past_when_first_known_counts_from_when_it_became_known():
    # A probe due since the EV's last probe, computed at 10.0: due at once, not "late"
    # by the seconds before anyone knew of it.
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 2.0, now=10.0)
    assert w.pop_due(10.0) == [("a", 10.0)]


def test_a_stall_keeps_an_overdue_timer_late_when_it_is_rescheduled():
    # Known at 1.0, due at 1.5; the NIC stalls until 1.8, then reads frames and
    # reschedules before the timer pass: the lateness still counts from 1.5...
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 1.5, now=1.0)
    w.schedule("a", 1.2, now=1.8)  # an earlier deadline, overdue too: still from 1.5
    assert w.pop_due(1.8) == [("a", 1.5)]
    # ...or from a later but still overdue deadline the new state gives.
    w.schedule("a", 1.5, now=1.0)
    w.schedule("a", 1.7, now=1.8)
    assert w.pop_due(1.8) == [("a", 1.7)]


def test_a_future_timer_replaced_by_an_overdue_one_counts_from_now():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 9.0, now=1.0)
    w.schedule("a", 0.5, now=2.0)  # an ack made a silence judgeable, due since 0.5
    assert w.pop_due(2.0) == [("a", 2.0)]


def test_timers_run_at_once_when_no_frames_are_left_unread():
    hold = TimerHold(limit_s=0.001)
    assert hold.may_run(left=False, now=5.0)
    assert hold.may_run(left=False, now=5.0001)


def test_timers_wait_while_frames_are_left_but_not_past_the_limit_in_time():
    hold = TimerHold(limit_s=0.001)
    # Held from the first round that left frames, however many rounds follow...
    assert [hold.may_run(True, 1.0 + i * 0.0001) for i in range(10)] == [False] * 10
    # ...until the limit has passed since that first round: then they run,
    assert hold.may_run(True, 1.0011)
    # and a flood that goes on is held again from then.
    assert not hold.may_run(True, 1.0012)
    assert hold.may_run(True, 1.0023)


def test_a_round_that_reads_everything_ends_the_hold():
    hold = TimerHold(limit_s=0.001)
    assert not hold.may_run(True, 2.0)
    assert hold.may_run(False, 2.0002)
    # the next flood is held for its own limit, not the rest of the last one's
    assert not hold.may_run(True, 2.0003)
    assert not hold.may_run(True, 2.0012)
    assert hold.may_run(True, 2.0014)
