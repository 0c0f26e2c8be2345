"""Restoring one changelog, side by side in one run: librdkafka in C, Kafka Streams itself, a
bare confluent-kafka loop and ``streamstate restore``.

The changelog: 1M records (quick mode: 50k), 100-byte values over 100k distinct keys, lz4
(``benches/_changelog.py``), named ``<application.id>-store-changelog`` so that Kafka Streams
takes it for its store's changelog; once on 1 partition (group ``restore-peers-1p``) and once
spread round-robin over 8 (``restore-peers-8p``), on the session's local broker. Contenders,
each checking its result so that a broken one fails:

* ``kcat``: the C ceiling — Debian's kcat (librdkafka) reads every partition from the
  beginning to its end, printing one byte per record to a file (``benches/_kstreams.py``);
  timed from the process's start to its exit; the byte count must equal the record count.
* ``kafka_streams``: Kafka Streams (``benches/kstreams/RestoreBench.java``) restores its
  persistent RocksDB store from the changelog into an empty state directory, as after a
  failover; timed by its ``StateRestoreListener`` from the first ``onRestoreStart`` to the last
  ``onRestoreEnd``, so the JVM's start, the rebalance and the opening of the stores are *not*
  counted (they are in ``extra_info``: ``wall_s``, ``start_to_running_s``). Checked: records
  restored, partitions restored, the value of the last record's key in the store. On 8
  partitions also with two stream threads (two state updaters; not in quick mode).
* ``confluent_consume_loop``: ``consume(10000)`` over every partition until each one's end,
  doing nothing with the messages (the ceiling of anything that hands records to Python);
  checked: the record count. Twice: with the restore consumer's settings (``default``), and
  with ``fetch.queue.backoff.ms=0`` (``backoff0``): librdkafka's fetcher otherwise pauses for
  that long (1 s by default) whenever its prefetch queue is full, and a loop that keeps up
  with the broker spends most of its wall time in those pauses, not in Python.
* ``streamstate_restore``: :func:`streamstate.topic_restore.restore_topic` (the code of
  ``streamstate restore``), the whole call: opening the stores, the restore consumer, restoring,
  checkpoints (its own listener's first-start-to-last-end span is in ``extra_info``). Checked:
  records restored, the stores' sizes and the last record's value. On each read path:
  ``rust`` (the default: librdkafka driven from Rust, one consumer and thread per core),
  ``rust-p1`` (8 partitions on one consumer and thread) and ``confluent`` (confluent-kafka
  messages handed to ``process_next``).

``bench_peak_memory`` (group ``restore-memory``) runs ``streamstate restore --json`` under
``/usr/bin/time -f %M`` on one partition of 1M and of 10M records (quick mode: 50k and 200k), on
both read paths, and records each peak RSS and duration in ``extra_info``: the memory a restore
needs is bounded by batch and queue sizes, not by the changelog.

Each contender's CPU seconds (user + system, all threads) are recorded too, as
``extra_info["cpu_s"]`` (median): kcat's whole process, Kafka Streams' JVM over the listener's
span (restoring, JIT, GC, RocksDB's background threads), the Python contenders' whole call
(librdkafka's and fjall's threads included). On a shared machine they move far less than the
wall times.

Every contender reads with 4 MiB per partition fetch (``max.partition.fetch.bytes``, as
:func:`streamstate.changelog.restore_consumer_config`). The Kafka Streams settings and JVM
options are listed in ``benches/kstreams/BenchSupport.java`` and ``benches/_kstreams.py``.
Each round starts from an empty state directory; the rounds of one contender run one after
another, so on a shared machine compare ratios within one run.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from benches import _kstreams
from benches._changelog import DISTINCT_KEYS, consume_changelog, key, produce_changelog, value
from benches._common import QUICK, size

from streamstate import PersistentKeyValueStore
from streamstate.changelog import StateRestoreListener
from streamstate.kafka_local import KafkaTestCluster
from streamstate.topic_restore import restore_topic, store_directory

N = size(1_000_000)
ROUNDS = 3
STORE = "store"
PARTITIONS = (1, 8)
# (partitions, num.stream.threads). Each Kafka Streams round starts a JVM (several seconds on a
# busy 2-core machine), so quick mode leaves out the two-thread case.
KAFKA_STREAMS_CASES = [(1, 1), (8, 1)] + ([] if QUICK else [(8, 2)])


@dataclass(frozen=True)
class Changelog:
    """A pre-filled changelog topic and the application it belongs to."""

    application_id: str
    topic: str
    partitions: int

    @property
    def last_key(self) -> bytes:
        return key(N - 1)

    @property
    def last_value(self) -> bytes:
        return value(N - 1)


@pytest.fixture(scope="module")
def changelogs(kafka: KafkaTestCluster) -> Iterator[dict[int, Changelog]]:
    """The two changelogs, by partition count, made once for the whole module."""
    made: dict[int, Changelog] = {}
    try:
        for partitions in PARTITIONS:
            application_id = f"bench-peers-{partitions}p-{uuid.uuid4().hex[:8]}"
            made[partitions] = Changelog(
                application_id, f"{application_id}-{STORE}-changelog", partitions
            )
            kafka.create_topic(made[partitions].topic, partitions=partitions)
            # RestoreBench's source topic: empty, with the changelog's partition count.
            kafka.create_topic(f"{application_id}-input", partitions=partitions)
            produce_changelog(kafka.bootstrap_servers, made[partitions].topic, N, partitions)
        _kstreams.prepare()  # fetch and compile outside the timed rounds
        yield made
    finally:
        for changelog in made.values():
            _kstreams.delete_application(kafka.admin, changelog.application_id)


@pytest.fixture
def changelog(changelogs: dict[int, Changelog], partitions: int) -> Changelog:
    """The changelog of the test's ``partitions`` parameter."""
    return changelogs[partitions]


@pytest.fixture
def state_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bench-restore-peers-") as d:
        yield Path(d)


def _group(benchmark: Any, changelog: Changelog) -> None:
    benchmark.group = f"restore-peers-{changelog.partitions}p"
    benchmark.extra_info.update(records=N, partitions=changelog.partitions)


def _record_cpu(benchmark: Any, cpu: list[float]) -> None:
    """The median of the rounds' CPU seconds (user + system, every thread of the contender's
    process), steadier than wall time on a shared machine."""
    benchmark.extra_info["cpu_s"] = statistics.median(cpu)


class _ReportedClock:
    """A pytest-benchmark timer that moves only by the durations a contender reports itself.

    Kafka Streams' restore time is measured inside its JVM (by its ``StateRestoreListener``);
    timing the process from here would add the JVM's start and the rebalance. The benchmark
    calls the timer just before and just after each round, so a round that adds its reported
    duration to ``now`` is recorded with exactly that duration.
    """

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _use_reported_time(benchmark: Any) -> _ReportedClock:
    clock = _ReportedClock()
    # pytest-benchmark (pinned in constraints.txt) reads the timer from this attribute when a
    # round starts; fail loudly if a new version renames it rather than time the wrong thing.
    assert hasattr(benchmark, "_timer"), "pytest-benchmark no longer has BenchmarkFixture._timer"
    benchmark._timer = clock
    return clock


@pytest.mark.parametrize("partitions", PARTITIONS)
def bench_kcat(benchmark: Any, kafka: KafkaTestCluster, changelog: Changelog) -> None:
    _group(benchmark, changelog)

    cpu: list[float] = []

    def run() -> int:
        report = _kstreams.kcat_consume(kafka.bootstrap_servers, changelog.topic, records=N)
        cpu.append(report.cpu_s)
        return report.records

    assert benchmark.pedantic(run, rounds=ROUNDS, iterations=1) == N
    _record_cpu(benchmark, cpu)


@pytest.mark.parametrize(("partitions", "threads"), KAFKA_STREAMS_CASES)
def bench_kafka_streams(
    benchmark: Any,
    kafka: KafkaTestCluster,
    changelog: Changelog,
    threads: int,
    state_dir: Path,
) -> None:
    _group(benchmark, changelog)
    benchmark.extra_info["num.stream.threads"] = threads
    clock = _use_reported_time(benchmark)
    reports: list[_kstreams.RestoreReport] = []

    def run() -> None:
        directory = state_dir / f"round-{len(reports)}"
        report = _kstreams.run_restore_bench(
            kafka.bootstrap_servers,
            changelog.application_id,
            STORE,
            directory,
            probe_keys=[changelog.last_key],
            config={"num.stream.threads": str(threads)},
        )
        shutil.rmtree(directory, ignore_errors=True)
        assert report.restored == N
        assert report.partitions_restored == changelog.partitions
        assert report.probes == {changelog.last_key: changelog.last_value}
        assert report.approximate_entries >= min(N, DISTINCT_KEYS) // 2
        reports.append(report)
        clock.now += report.restore_s

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    _record_cpu(benchmark, [r.restore_cpu_s for r in reports])
    benchmark.extra_info.update(
        kafka_streams_version=reports[0].kafka_streams_version,
        wall_s=statistics.median(r.wall_s for r in reports),
        start_to_running_s=statistics.median(r.start_to_running_s for r in reports),
        jvm_options=" ".join(_kstreams.JVM_OPTIONS),
    )


@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("fetch_queue_backoff_ms", [None, 0], ids=["default", "backoff0"])
def bench_confluent_consume_loop(
    benchmark: Any,
    kafka: KafkaTestCluster,
    changelog: Changelog,
    fetch_queue_backoff_ms: int | None,
) -> None:
    _group(benchmark, changelog)
    config = {} if fetch_queue_backoff_ms is None else {"fetch.queue.backoff.ms": 0}
    benchmark.extra_info["config"] = config
    cpu: list[float] = []

    def run() -> int:
        before = time.process_time()
        read = consume_changelog(
            kafka.bootstrap_servers, changelog.topic, lambda batch: None, config
        )
        cpu.append(time.process_time() - before)
        return read

    assert benchmark.pedantic(run, rounds=ROUNDS, iterations=1) == N
    _record_cpu(benchmark, cpu)


class _Span(StateRestoreListener):
    """The first ``on_restore_start`` to the last ``on_restore_end``, as RestoreBench times
    Kafka Streams."""

    def __init__(self) -> None:
        self.first_start: float | None = None
        self.last_end = 0.0

    def on_restore_start(
        self, tp: Any, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        if self.first_start is None:
            self.first_start = time.monotonic()

    def on_restore_end(self, tp: Any, store_name: str, total_restored: int) -> None:
        self.last_end = time.monotonic()

    @property
    def seconds(self) -> float:
        assert self.first_start is not None, "no restoration started"
        return self.last_end - self.first_start


# (partitions, read path, parallelism): the default (rust, one consumer per core), 8 partitions
# on one consumer, and the confluent-kafka path.
STREAMSTATE_CASES = [
    (1, "rust", None),
    (1, "confluent", None),
    (8, "rust", None),
    (8, "rust", 1),
    (8, "confluent", None),
]


@pytest.mark.parametrize(
    ("partitions", "fetch", "parallelism"),
    STREAMSTATE_CASES,
    ids=[f"{p}p-{f}" + (f"-p{n}" if n else "") for p, f, n in STREAMSTATE_CASES],
)
def bench_streamstate_restore(
    benchmark: Any,
    kafka: KafkaTestCluster,
    changelog: Changelog,
    state_dir: Path,
    *,
    fetch: str,
    parallelism: int | None,
) -> None:
    _group(benchmark, changelog)
    benchmark.extra_info.update(fetch=fetch, parallelism=parallelism)
    spans: list[float] = []

    def setup() -> None:
        shutil.rmtree(state_dir / STORE, ignore_errors=True)

    cpu: list[float] = []

    def run() -> int:
        span = _Span()
        before = time.process_time()
        results = restore_topic(
            kafka.bootstrap_servers,
            changelog.topic,
            state_dir,
            store_name=STORE,
            restore_listener=span,
            fetch=fetch,
            parallelism=parallelism,
        )
        cpu.append(time.process_time() - before)
        spans.append(span.seconds)
        return sum(r.restored for r in results)

    assert benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1) == N
    _record_cpu(benchmark, cpu)
    benchmark.extra_info["listener_span_s"] = statistics.median(spans)
    entries = 0
    for partition in range(changelog.partitions):
        directory = store_directory(state_dir, STORE, partition)
        with PersistentKeyValueStore(STORE, directory) as store:
            entries += store.approximate_num_entries()
            if partition == (N - 1) % changelog.partitions:
                assert store.get(changelog.last_key) == changelog.last_value
    assert entries >= min(N, DISTINCT_KEYS) // 2


def _peak_rss(bootstrap: str, topic: str, state_dir: Path, fetch: str) -> tuple[float, float, int]:
    """Peak RSS (MB), wall seconds and records restored of one ``streamstate restore --json``."""
    out = state_dir / f"time-{fetch}.txt"
    command = [
        "/usr/bin/time", "-f", "%M %e", "-o", str(out),
        sys.executable, "-m", "streamstate", "restore", "--json",
        "--bootstrap-servers", bootstrap, "--topic", topic,
        "--state-dir", str(state_dir / fetch), "--fetch", fetch,
    ]  # fmt: skip
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    restored = int(json.loads(done.stdout)["total_restored"])
    kb, seconds = out.read_text().split()[-2:]
    return int(kb) / 1024, float(seconds), restored


@pytest.mark.benchmark(group="restore-memory")
def bench_peak_memory(benchmark: Any, kafka: KafkaTestCluster, state_dir: Path) -> None:
    """Peak RSS of ``streamstate restore`` at two changelog sizes, on both read paths."""
    sizes = (50_000, 200_000) if QUICK else (1_000_000, 10_000_000)
    topics = {}
    for n in sizes:
        topics[n] = kafka.create_topic(f"bench-memory-{n}-{uuid.uuid4().hex[:8]}", partitions=1)
        produce_changelog(kafka.bootstrap_servers, topics[n], n, partitions=1)

    def run() -> dict[str, float]:
        report: dict[str, float] = {}
        for n, topic in topics.items():
            for fetch in ("rust", "confluent"):
                shutil.rmtree(state_dir / fetch, ignore_errors=True)
                mb, seconds, restored = _peak_rss(kafka.bootstrap_servers, topic, state_dir, fetch)
                assert restored == n
                report[f"{fetch}_{n}_peak_rss_mb"] = round(mb, 1)
                report[f"{fetch}_{n}_wall_s"] = seconds
        return report

    report = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(report)
    print(json.dumps(report))
