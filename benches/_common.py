"""Benchmark sizes: ``STREAMSTATE_BENCH_QUICK=1`` (``make bench-quick``, used in CI) shrinks every
input twenty-fold so the suite runs in seconds and still prints its comparison tables."""

from __future__ import annotations

import os

QUICK = os.environ.get("STREAMSTATE_BENCH_QUICK") == "1"


def size(full: int) -> int:
    """The input size for a benchmark whose full size is ``full``."""
    return max(1, full // 20) if QUICK else full
