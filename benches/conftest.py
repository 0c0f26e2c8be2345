"""Benchmark settings: a guard against timing a debug build (sizes: ``benches/_common.py``)."""

from __future__ import annotations

import pytest

from streamstate import _core


@pytest.fixture(autouse=True)
def _release_build_only(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("benchmark_disable"):
        return  # plain test runs execute each benchmark body once, as a correctness check
    if _core.build_profile() != "release":
        pytest.fail("benchmarks need a release build of the extension: run `make build`")
