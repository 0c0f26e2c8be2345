"""Where the DSL counts' time goes: ``bench_dsl``'s streamstate program under cProfile.

Not a benchmark (no pytest-benchmark, no comparison kept): a diagnostic script for
``docs/PERFORMANCE.md`` ("The DSL: a count per key and a 1-minute tumbling-window count"). It
starts a broker (or uses ``STREAMSTATE_BOOTSTRAP_SERVERS``), writes ``bench_dsl``'s input
(``records`` JSON records, 10k keys, 4 partitions), runs each program through a
:class:`~streamstate.StreamsApp` to lag 0 with the stream thread under cProfile, and prints the
run's seconds and CPU seconds, then the profile by own time and by cumulative time::

    .venv/bin/python -m benches.diag_dsl_profile [records] [count|windowed ...] [--cpu]

``--cpu`` profiles the thread's CPU time (``time.thread_time``) instead of wall time: fairer
on a loaded machine, but each profiled call costs more, so a run takes longer, commits more
often per record and so flushes more.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benches import bench_dsl
from benches._lag import run_to_lag_zero

from streamstate.app import stream_thread
from streamstate.kafka_local import KafkaTestCluster


def _profiled_threads(cpu: bool) -> list[cProfile.Profile]:
    """Wraps ``StreamThread.run`` in a profiler; returns the list each thread's is added to."""
    profiles: list[cProfile.Profile] = []
    run = stream_thread.StreamThread.run

    def profiled(self: Any) -> None:
        profile = cProfile.Profile(time.thread_time) if cpu else cProfile.Profile()
        profiles.append(profile)
        profile.enable()
        try:
            run(self)
        finally:
            profile.disable()

    stream_thread.StreamThread.run = profiled  # type: ignore[method-assign]
    return profiles


def _print(profile: cProfile.Profile) -> None:
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(order).print_stats(40)
        print(out.getvalue(), flush=True)


def main(argv: list[str]) -> None:
    """Runs the programs named in ``argv`` (module doc)."""
    cpu = "--cpu" in argv
    args = [a for a in argv if a != "--cpu"]
    records = int(args[0]) if args else 200_000
    programs = args[1:] or list(bench_dsl.PROGRAMS)
    profiles = _profiled_threads(cpu)
    with tempfile.TemporaryDirectory() as broker_dir:
        kafka = KafkaTestCluster.from_env_or_start(Path(broker_dir))
        try:
            data = bench_dsl.produce_input(kafka, records)
            for program in programs:
                profiles.clear()
                with bench_dsl.dsl_app(kafka, data, program, "diag-dsl") as (app, lag, _):
                    run_s, cpu_s, _ = run_to_lag_zero(app, lag, timeout_s=900, poll_s=0.05)
                print(f"== {program}: {records:,} records, run {run_s:.2f} s, CPU {cpu_s:.2f} s")
                for profile in profiles:
                    _print(profile)
        finally:
            kafka.close()


if __name__ == "__main__":
    main(sys.argv[1:])
