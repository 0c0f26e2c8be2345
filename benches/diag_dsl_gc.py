"""What CPython's cyclic garbage collector costs the DSL counts: ``bench_dsl``'s streamstate
program with the collector's work counted, or switched off.

Not a benchmark (no pytest-benchmark, no comparison kept): a diagnostic script for
``docs/PERFORMANCE.md`` ("Garbage collection, the producer and ``produce_batch``"). It starts a
broker (or uses ``STREAMSTATE_BOOTSTRAP_SERVERS``), writes ``bench_dsl``'s input (``records``
JSON records, 10k keys, 4 partitions), runs each program through a
:class:`~streamstate.StreamsApp` to lag 0 and prints its run and CPU seconds, the collections
of each generation during the run and their seconds (``gc.callbacks``), and the CPU seconds of
the process's threads by name::

    .venv/bin/python -m benches.diag_dsl_gc [records] [count|windowed ...] [--gc-off]

``--gc-off`` disables the collector for each run (what it would save at most).
"""

from __future__ import annotations

import collections
import gc
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benches import bench_dsl
from benches._lag import run_to_lag_zero

from streamstate.kafka_local import KafkaTestCluster


class _Collections:
    """Collections per generation and their wall seconds, while :attr:`on`."""

    def __init__(self) -> None:
        self.on = False
        self.count: collections.Counter[int] = collections.Counter()
        self.seconds: collections.defaultdict[int, float] = collections.defaultdict(float)
        self._started: dict[int, float] = {}

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        """A ``gc.callbacks`` entry."""
        thread = threading.get_ident()
        if phase == "start":
            self._started[thread] = time.perf_counter()
            return
        started = self._started.pop(thread, None)
        if self.on and started is not None:
            self.count[info["generation"]] += 1
            self.seconds[info["generation"]] += time.perf_counter() - started


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads, summed by thread name (``/proc``)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = collections.defaultdict(float)
    for tid in os.listdir("/proc/self/task"):
        try:
            name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        found[f"{name}/{tid}"] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def _run(
    kafka: KafkaTestCluster, data: Any, program: str, gc_off: bool, seen: _Collections
) -> None:
    after: dict[str, float] = {}

    def stop_counting() -> None:
        # At lag 0, before the app closes: its threads' CPU is read while they still run, and
        # neither the close's collections nor its time with the collector off are counted.
        after.update(_thread_cpu())
        seen.on = False
        gc.enable()

    with bench_dsl.dsl_app(kafka, data, program, "diag-gc") as (app, lag, _):
        before = _thread_cpu()
        if gc_off:
            gc.disable()
        seen.on = True
        try:
            run_s, cpu_s, _ = run_to_lag_zero(
                app, lag, timeout_s=900, poll_s=0.05, at_lag_zero=stop_counting
            )
        finally:
            seen.on = False
            gc.enable()
    print(f"== {program}: run {run_s:.2f} s, CPU {cpu_s:.2f} s")
    print(
        "   collections by generation (count, s):",
        {g: (seen.count[g], round(seen.seconds[g], 3)) for g in sorted(seen.count)},
    )
    by_name: dict[str, float] = collections.defaultdict(float)
    for key, cpu in after.items():
        by_name[key.split("/")[0]] += cpu - before.get(key, 0.0)
    for name, cpu in sorted(by_name.items(), key=lambda item: -item[1]):
        if cpu >= 0.01:
            print(f"   thread {name:<20} {cpu:6.2f} CPU s")


def main(argv: list[str]) -> None:
    """Runs the programs named in ``argv`` (module doc)."""
    gc_off = "--gc-off" in argv
    args = [a for a in argv if a != "--gc-off"]
    records = int(args[0]) if args else 500_000
    programs = args[1:] or list(bench_dsl.PROGRAMS)
    seen = _Collections()
    gc.callbacks.append(seen)
    with tempfile.TemporaryDirectory() as broker_dir:
        kafka = KafkaTestCluster.from_env_or_start(Path(broker_dir))
        try:
            data = bench_dsl.produce_input(kafka, records)
            print(f"{records:,} records; the collector {'off' if gc_off else 'on'}")
            for program in programs:
                seen.count.clear()
                seen.seconds.clear()
                _run(kafka, data, program, gc_off, seen)
        finally:
            kafka.close()


if __name__ == "__main__":
    main(sys.argv[1:])
