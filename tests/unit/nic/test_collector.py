"""The garbage collector's pauses measured, and the daemon's long-lived heap frozen."""

from __future__ import annotations

import gc
import weakref

from mrcemu.nic import collector


def test_a_pause_is_the_time_from_a_collections_start_to_its_stop():
    times = iter([10.0, 10.004, 20.0, 20.0005])
    p = collector.Pauses(clock=lambda: next(times))
    p("start", {})
    p("stop", {})
    p("start", {})
    p("stop", {})
    assert p.hist.n == 2
    assert abs(p.hist.max - 0.004) < 1e-9


def test_a_stop_without_its_start_is_not_a_pause():
    p = collector.Pauses(clock=lambda: 1.0)
    p("stop", {})
    assert p.hist.n == 0


def test_installed_it_measures_real_collections_and_closed_it_does_not():
    p = collector.Pauses().install()
    try:
        gc.collect()
        assert p.hist.n == 1
    finally:
        p.close()
    gc.collect()
    assert p.hist.n == 1
    assert p not in gc.callbacks


def test_frozen_objects_are_out_of_the_collectors_view_until_thawed():
    try:
        kept = [[i] for i in range(1000)]
        collector.freeze()
        assert gc.get_freeze_count() >= len(kept)
        collector.thaw()
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


def test_a_thaw_collects_a_cycle_let_go_while_frozen():
    class Node:
        pass

    try:
        a = Node()
        a.self = a  # a cycle: reference counting alone never frees it
        collector.freeze()
        gone: list[bool] = []
        weakref.finalize(a, gone.append, True)
        del a
        gc.collect()
        assert gone == []  # frozen: the collector does not look at it
        collector.thaw()
        assert gone == [True]
    finally:
        gc.unfreeze()
