"""Where streamstate's stream thread spends its time on ``bench_join``'s program: cProfile of
the stream thread over a stream-table enrichment on a local broker
(``KafkaTestCluster.from_env_or_start``: ``$STREAMSTATE_BOOTSTRAP_SERVERS`` or a new one), the
input of ``benches/bench_join.py`` scaled down; each round's sink is checked like the benchmark's.

Usage: ``.venv/bin/python -m benches.profile_join [RECORDS] [KEYS] [ROUNDS] [--no-profile]``
(default 200,000 records over 20,000 keys, one round). Prints, per round, the run time, the
process's and the stream thread's CPU seconds, then the profile (by own time and cumulative).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import tempfile
import time
import uuid
from typing import Any

from benches import bench_join
from benches._lag import CommittedLag

from streamstate.app import StreamsApp, stream_thread
from streamstate.kafka_local import KafkaTestCluster


def main(argv: list[str]) -> None:
    """Runs the rounds and prints the figures (module doc)."""
    profile = "--no-profile" not in argv
    numbers = [int(a) for a in argv if not a.startswith("--")]
    records, keys, rounds = (numbers + [200_000, 20_000, 1][len(numbers) :])[:3]
    bench_join.N = records
    profiles: list[cProfile.Profile] = []
    run = stream_thread.StreamThread.run

    def profiled_run(self: Any) -> None:
        cpu, wall = time.thread_time(), time.monotonic()
        profiler = cProfile.Profile() if profile else None
        if profiler is not None:
            profiles.append(profiler)
            profiler.enable()
        try:
            run(self)
        finally:
            if profiler is not None:
                profiler.disable()
            cpu, wall = time.thread_time() - cpu, time.monotonic() - wall
            print(f"stream thread: {cpu:.2f} CPU s over {wall:.2f} s", flush=True)

    stream_thread.StreamThread.run = profiled_run  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        kafka = KafkaTestCluster.from_env_or_start(tmp)
        try:
            data = bench_join.produce_input(kafka, records, keys)
            for _ in range(rounds):
                _round(kafka, data, records)
        finally:
            kafka.close()
    for profiler in profiles:
        for order in ("tottime", "cumulative"):
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(50)
            print(text.getvalue())


def _round(kafka: KafkaTestCluster, data: bench_join.Input, records: int) -> None:
    sink = kafka.create_topic(partitions=bench_join.PARTITIONS)
    app_id = f"profile-join-{uuid.uuid4().hex[:8]}"
    with (
        CommittedLag(kafka.bootstrap_servers, app_id, data.topic, data.ends) as lag,
        tempfile.TemporaryDirectory() as state,
    ):
        app = StreamsApp(
            bench_join.join_topology(data.table_topic, data.topic, sink),
            {
                "application.id": app_id,
                "bootstrap.servers": kafka.bootstrap_servers,
                "state.dir": state,
                "commit.interval.ms": bench_join.COMMIT_INTERVAL_MS,
            },
        )
        started, cpu = time.monotonic(), time.process_time()
        app.start()
        try:
            while not lag.zero():
                assert app.fatal_error is None, app.fatal_error
                time.sleep(bench_join.POLL_S)
            run_s, cpu_s = time.monotonic() - started, time.process_time() - cpu
        finally:
            app.close(60)
    print(f"run {run_s:.2f} s, {records / run_s:,.0f} records/s, {cpu_s:.2f} CPU s", flush=True)
    check = bench_join.check_sink(kafka, sink, data)
    assert not check.problems(), check.problems()


if __name__ == "__main__":
    main(sys.argv[1:])
