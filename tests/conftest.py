"""The session's order: the unit tests first, then the integration tests, then the fuzz
tests. The fuzzers (tests/unit/datapath/fuzzing.py) start with the first unit test and
run at idle priority: beside the unit tests on the second core, then in whatever CPU the
integration tests leave idle, so nobody waits for them (the suite's time budget); the
fuzz tests, last, read their verdicts."""

from __future__ import annotations

import pytest


def _rank(item: pytest.Item) -> int:
    if item.get_closest_marker("fuzz") is not None:
        return 2
    return 1 if "integration" in item.path.parts else 0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: tests keep their order within each rank
