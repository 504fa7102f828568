"""The fuzzer runs (datapath/fuzzing.py) start with the first unit test when a test marked
`fuzz` is in the session; tests/conftest.py puts those tests last in the session, so the
fuzzers run beside everything else instead of after it (the suite's time budget)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.datapath.fuzzing import Runs, fuzzer_runs


def _is_fuzz(item: pytest.Item) -> bool:
    return item.get_closest_marker("fuzz") is not None


@pytest.fixture(scope="session", autouse=True)
def fuzz_runs(request, tmp_path_factory) -> Iterator[Runs]:
    """The running fuzzers by name, from before the first test; {} when no fuzz test is
    selected (nothing is started)."""
    if not any(_is_fuzz(item) for item in request.session.items):
        yield {}
        return
    with fuzzer_runs(tmp_path_factory.mktemp) as runs:
        yield runs
