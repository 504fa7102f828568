"""Memory registration has a budget: a request over it is refused before allocating."""

from __future__ import annotations

import tracemalloc

import pytest

from mrcemu.transport.memory import BudgetExceeded, MemoryTable


def test_registrations_fit_the_budget_and_one_over_it_allocates_nothing():
    t = MemoryTable(budget=1 << 20)
    a = t.register(600 << 10)
    assert t.used == 600 << 10
    tracemalloc.start()
    try:
        with pytest.raises(BudgetExceeded, match="budget of 1,048,576 bytes"):
            t.register(10 << 30)  # 10 GiB: refused at once
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20 and list(t.regions) == [a.rkey]
    # Bytes held outside the regions (the sources of unfinished writes) count too.
    with pytest.raises(BudgetExceeded):
        t.register(300 << 10, also_held=200 << 10)
    t.register(300 << 10, also_held=100 << 10)
    assert t.used == 900 << 10


def test_freed_regions_return_to_the_budget():
    t = MemoryTable(budget=1 << 20)
    a = t.register(1 << 20)
    with pytest.raises(BudgetExceeded):
        t.register(1)
    del t.regions[a.rkey]
    t.register(1 << 20)


@pytest.mark.parametrize("size", [0, -5])
def test_sizes_must_be_positive(size):
    with pytest.raises(BudgetExceeded, match="positive"):
        MemoryTable(budget=None).register(size)
