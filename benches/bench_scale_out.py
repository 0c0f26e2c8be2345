"""Scaling out on one backlog: 1, 2 and 4 instances, and 1 instance with 2 stream threads.

The input: 2,000,000 records (quick mode: 100,000) over 4 partitions and 10,000 keys, about 14 s
of work for one instance: long enough that the rebalances a joining member costs (a few seconds
each: librdkafka hears of one at its next heartbeat, every 3 s) do not decide the result. Each
instance is a process running ``tests/chaos/scale_app.py``: the one-function form counting keys
into a persistent, logged, caching store and sending each count to a sink, commits every second
(the shape of ``bench_app.py``), all its work on the CPU (no sleep). A round starts its
instances together on a fresh group and sink and ends when the group's committed offsets reach
the end of every partition (lag 0): that is the time measured. Each round's CPU seconds (over
every instance), outputs per input and forced rejoins are in ``extra_info``.

On a 2-core machine that also runs the broker, more instances cannot add cores: the figure to
watch is how far they fall behind one (before the scale-out fix, two instances took 124 s where
one took 4 s). ``docs/PERFORMANCE.md`` quotes this benchmark.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from benches._common import size
from tests.chaos.scale_out import Group, finish, produce_backlog, wait_for_lag_zero

from streamstate.kafka_local import KafkaTestCluster

N = size(2_000_000)
KEYS = 10_000
PARTITIONS = 4
ROUNDS = 2


def _cpu_ticks() -> tuple[int, int]:
    """The machine's (busy, total) CPU ticks since boot, over every core (``/proc/stat``)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def _busy(before: tuple[int, int], after: tuple[int, int]) -> float:
    """How many cores were busy on average between two :func:`_cpu_ticks` readings (the
    broker's and every instance's work): on 2 cores, 2.0 means nothing was left idle."""
    total = after[1] - before[1]
    cores = os.cpu_count() or 1
    return round(cores * (after[0] - before[0]) / total, 2) if total else 0.0


@pytest.fixture(scope="module")
def backlog(kafka: KafkaTestCluster) -> str:
    topic = kafka.create_topic(partitions=PARTITIONS)
    produce_backlog(kafka.bootstrap_servers, topic, N, KEYS)
    return topic


@pytest.mark.benchmark(group="scale-out")
@pytest.mark.parametrize(
    ("instances", "threads"), [(1, 1), (2, 1), (4, 1), (1, 2)], ids=["1x1", "2x1", "4x1", "1x2"]
)
def bench_scale_out(
    benchmark: Any, kafka: KafkaTestCluster, backlog: str, instances: int, threads: int
) -> None:
    groups: list[Group] = []
    times: list[float] = []
    busy: list[float] = []  # the machine's cores busy over each round, of os.cpu_count()

    with tempfile.TemporaryDirectory() as state_root:

        def setup() -> tuple[tuple[Group], dict[str, Any]]:
            group = Group(
                kafka.bootstrap_servers,
                [backlog],
                kafka.create_topic(partitions=PARTITIONS),
                Path(state_root) / f"round-{len(groups)}",
                threads=threads,
            )
            groups.append(group)
            return (group,), {}

        def run(group: Group) -> None:
            before = _cpu_ticks()
            for _ in range(instances):
                group.start()
            seconds = wait_for_lag_zero(group, 600)
            assert seconds is not None, "the group did not reach lag 0 in 600 s"
            times.append(seconds)
            busy.append(_busy(before, _cpu_ticks()))

        try:
            benchmark.pedantic(run, setup=setup, rounds=ROUNDS)
        finally:
            seconds: list[float | None] = [*times, *[None] * (len(groups) - len(times))]
            runs = [finish(g, t) for g, t in zip(groups, seconds, strict=True)]
    for run in runs:
        assert not run.died, run.died
        assert run.outputs >= N
    benchmark.extra_info.update(
        {
            "seconds_to_lag_0": times,
            "cpu_seconds": [round(r.cpu, 2) for r in runs],
            "outputs_per_input": [round(r.outputs / N, 3) for r in runs],
            "forced_rejoins": [r.rejoins for r in runs],
            "machine_cores_busy": busy,
        }
    )
