"""The NIC loop's schedule: due timers in order, rescheduling, and the send-budget line."""

from hypothesis import given
from hypothesis import strategies as st

from mrcemu.nic.wakeups import Wakeups


def test_nothing_scheduled_nothing_due():
    w: Wakeups[str] = Wakeups()
    assert w.next_due() is None
    assert w.pop_due(1e9) == []
    assert len(w) == 0


def test_due_timers_come_out_earliest_first_with_their_due_time():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 3.0)
    w.schedule("b", 1.0)
    w.schedule("c", 2.0)
    assert w.next_due() == 1.0
    assert w.pop_due(2.5) == [("b", 1.0), ("c", 2.0)]
    assert w.next_due() == 3.0
    assert len(w) == 1


def test_a_due_time_at_now_is_due():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 5.0)
    assert w.pop_due(4.999) == []
    assert w.pop_due(5.0) == [("a", 5.0)]


def test_rescheduling_replaces_the_old_time_later_or_earlier():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 1.0)
    w.schedule("a", 4.0)  # an ack moved the RTO later: not woken at 1.0
    assert w.next_due() == 4.0
    assert w.pop_due(2.0) == []
    w.schedule("a", 3.0)  # and earlier again
    assert w.pop_due(3.5) == [("a", 3.0)]
    assert w.pop_due(10.0) == []  # the stale 4.0 is gone with it


def test_no_timer_unschedules():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 1.0)
    w.schedule("a", None)
    assert w.next_due() is None and w.pop_due(5.0) == [] and len(w) == 0


def test_popped_connections_are_unscheduled_until_scheduled_again():
    w: Wakeups[str] = Wakeups()
    w.schedule("a", 1.0)
    assert w.pop_due(1.0) == [("a", 1.0)]
    assert w.pop_due(2.0) == []
    w.schedule("a", 1.0)  # the same time again is a new timer, not a duplicate
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
    w.schedule("a", 1.0)
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
        w.schedule(c, t)
        last[c] = t
    want = sorted(((t, c) for c, t in last.items() if t is not None and t <= now))
    got = w.pop_due(now)
    assert sorted((t, c) for c, t in got) == want
    assert [t for _, t in got] == sorted(t for _, t in got)
    later = [t for t in last.values() if t is not None and t > now]
    assert w.next_due() == (min(later) if later else None)
