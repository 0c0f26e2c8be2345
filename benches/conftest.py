"""Benchmark settings: sizes, and a guard against timing a debug build.

``STREAMSTATE_BENCH_QUICK=1`` (used by ``make bench-quick`` in CI) shrinks every input so the
suite runs in seconds and still prints its comparison tables; ``make bench`` uses full sizes.
"""

from __future__ import annotations

import os

import pytest

from streamstate import _core

QUICK = os.environ.get("STREAMSTATE_BENCH_QUICK") == "1"


def size(full: int) -> int:
    """The input size for a benchmark whose full size is ``full``."""
    return max(1, full // 20) if QUICK else full


@pytest.fixture(autouse=True)
def _release_build_only(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("benchmark_disable"):
        return  # plain test runs execute each benchmark body once, as a correctness check
    if _core.build_profile() != "release":
        pytest.fail("benchmarks need a release build of the extension: run `make build`")
