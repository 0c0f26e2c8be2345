"""Where streamstate's stream thread spends its time on ``bench_join``'s program: cProfile of
the stream thread over a stream-table enrichment on a local broker
(``KafkaTestCluster.from_env_or_start``: ``$STREAMSTATE_BOOTSTRAP_SERVERS`` or a new one), the
input of ``benches/bench_join.py`` scaled down; each round's sink is checked like the benchmark's.

Usage: ``.venv/bin/python -m benches.profile_join [RECORDS] [KEYS] [ROUNDS] [--no-profile]
[--no-runs] [--ab]`` (default 200,000 records over 20,000 keys, one round). Prints, per round,
the run time, the process's and the stream thread's CPU seconds, then the profile (by own time
and cumulative). ``--no-runs`` turns the task loop's batch hand-over off (``app/task_runs.py``:
records one at a time, as before it); ``--ab`` runs each round twice, hand-over on then off, on
the same input and broker (an A/B under the same load). ``--in-process`` measures the task
loop alone, with no broker: the same program in a ``TopologyTestDriver`` task, the table's rows
loaded and flushed, then the stream's records buffered and processed 1,000 per
``process`` call (as the stream thread asks), the sink's records dropped at ``produce``; the
stream thread's CPU per round, hand-over on and off alternately.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import random
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from benches import bench_join
from benches._lag import CommittedLag

from streamstate.app import StreamsApp, stream_thread, task_runs
from streamstate.kafka_local import KafkaTestCluster
from streamstate.processor.graph import TaskId
from streamstate.testing import TopologyTestDriver
from streamstate.testing import driver as driver_module


def main(argv: list[str]) -> None:
    """Runs the rounds and prints the figures (module doc)."""
    profile = "--no-profile" not in argv
    if "--in-process" in argv:
        numbers = [int(a) for a in argv if not a.startswith("--")]
        records, keys, rounds = (numbers + [200_000, 20_000, 3][len(numbers) :])[:3]
        _in_process(records, keys, rounds)
        return
    ab = "--ab" in argv
    task_runs.RUNS = "--no-runs" not in argv
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
                if ab:
                    for on in (True, False):
                        task_runs.RUNS = on
                        print(f"runs {'on' if on else 'off'}:", flush=True)
                        _round(kafka, data, records)
                else:
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


def _in_process(records: int, keys: int, rounds: int) -> None:
    """The task loop alone (module doc, ``--in-process``)."""
    rng = random.Random(1)
    row = {"name": "someone", "tier": "gold", "region": "eu-west"}
    table = [(f"user-{k:06d}".encode(), json.dumps(row).encode()) for k in range(keys)]
    stream = [
        (
            f"user-{rng.randrange(keys):06d}".encode(),
            json.dumps({"id": i, "user": "u", "amount": i % 100}).encode(),
        )
        for i in range(records)
    ]
    seconds: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for on in (True, False):
            task_runs.RUNS = on
            seconds[on].append(_process_in_driver(table, stream))
    for on in (True, False):
        median = statistics.median(seconds[on])
        print(
            f"runs {'on' if on else 'off'}: "
            + " ".join(f"{s:.3f}" for s in seconds[on])
            + f" CPU s; median {median:.3f} s, {median / records * 1e6:.2f} us per record",
            flush=True,
        )


def _process_in_driver(
    table: list[tuple[bytes, bytes]], stream: list[tuple[bytes, bytes]]
) -> float:
    class Producer(driver_module._DriverProducer):
        def produce(self, topic: str, *args: Any, **kwargs: Any) -> None:
            if topic != "out":  # the sink's records are dropped, the changelog's kept
                super().produce(topic, *args, **kwargs)

    real = driver_module._DriverProducer
    driver_module._DriverProducer = Producer  # type: ignore[misc]
    try:
        program = bench_join.join_topology("table", "stream", "out")
        with TopologyTestDriver(program, {}) as driver:
            task = driver._tasks[TaskId(0, 0)]
            for topic, data, stamp in (("table", table, 1), ("stream", stream, 2)):
                for key, value in data:
                    driver._producer.produce(topic, value, key, timestamp=stamp)
                driver._feed()
                task.update_lags(dict.fromkeys(task.partitions, 0))
                cpu = time.thread_time()
                while task.process(1_000):
                    pass
                cpu = time.thread_time() - cpu
                task.flush_caches()
            return cpu
    finally:
        driver_module._DriverProducer = real  # type: ignore[misc]


if __name__ == "__main__":
    main(sys.argv[1:])
