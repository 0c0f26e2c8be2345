"""Memory: a RecordQueue holding 1M records vs the raw bytes it holds (target: at most 2x).

Measured in a fresh interpreter (``benches/memory_record_queue.py``) so earlier tests' memory
does not blur the reading; the figure is reported in the benchmark's extra_info and printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benches._common import size

N = size(1_000_000)
SCRIPT = Path(__file__).with_name("memory_record_queue.py")


def measure() -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(N)], capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@pytest.mark.benchmark(group="memory: RecordQueue holding 1M records (Long key, 100-byte value)")
def bench_record_queue_memory(benchmark: Any) -> None:
    result = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    print(
        f"\nRecordQueue memory: {result['records']} records, raw {result['raw_bytes'] / 1e6:.1f}"
        f" MB, queue {result['queue_bytes'] / 1e6:.1f} MB, ratio {result['ratio']:.2f}"
    )
    assert result["raw_bytes"] == N * 108
    assert result["rss_growth_bytes"] > 0
