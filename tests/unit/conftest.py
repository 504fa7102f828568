"""The fuzzer runs (datapath/fuzzing.py) start with the first unit test when their tests
are in the session, and their tests run last: the fuzzers then run beside the other
unit tests on the second core, instead of after them (the suite's time budget)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.datapath.fuzzing import Runs, fuzzer_runs

FUZZ_MODULE = "tests/unit/datapath/test_fuzz.py"


def _is_fuzz(item: pytest.Item) -> bool:
    return item.nodeid.startswith(FUZZ_MODULE)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_is_fuzz)  # stable: every other test keeps its order


@pytest.fixture(scope="session")
def fuzz_runs(tmp_path_factory) -> Iterator[Runs]:
    with fuzzer_runs(tmp_path_factory.mktemp) as runs:
        yield runs


@pytest.fixture(scope="session", autouse=True)
def _fuzzers_start_early(request) -> None:
    if any(_is_fuzz(item) for item in request.session.items):
        request.getfixturevalue("fuzz_runs")
