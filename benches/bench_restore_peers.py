"""Restoring one changelog, side by side in one run: kcat (librdkafka in C), Kafka Streams 4.4,
``streamstate restore`` and a ``StreamsApp`` restoring the same store.

**Shapes** (each a group ``restore-peers-<partitions>p-<records>-<value>B``): 1 and 8
partitions x 1M and 10M records x values of 100 B and 1 kB (quick mode, ``make bench-quick``:
1 partition x 50k x 100 B and 8 x 50k x 1 kB). The changelog: records round-robin over the
partitions, keys over 100k distinct keys, values that start with the record's number in hex
followed by random hex text (about 2:1 compressible; the 100-byte values are
``benches/_changelog.py``'s), lz4, named ``<application.id>-store-changelog`` so that Kafka
Streams and the app take it for their store's changelog. A shape's topics are
made when its first contender needs them and deleted after its last (10M x 1 kB is ~10 GB).

**Contenders**, each in a process of its own (so that its peak RSS is its own), each checking its
result so that a broken one fails, each recording in ``extra_info`` its median CPU seconds
(user + system, every thread) and its peak RSS (MB, median and max over the rounds):

* ``kcat``: Debian's kcat reads every partition from the beginning, printing one byte per
  record to a file, and stops at the record count; timed from its start to its exit (CPU and
  peak RSS from ``/usr/bin/time``); the byte count must equal the record count.
* ``kafka_streams``: Kafka Streams (``benches/kstreams/RestoreBench.java``, the jars of
  ``benches/_kstreams.py``, 4.4.0) restores its persistent RocksDB store from the changelog into
  an empty state directory, as after a failover; timed by its ``StateRestoreListener`` from the
  first ``onRestoreStart`` to the last ``onRestoreEnd`` (the JVM's start, the rebalance and the
  store opening are not counted; ``wall_s`` and ``start_to_running_s`` are in ``extra_info``);
  CPU over that span; peak RSS the JVM's VmHWM (heap and RocksDB's native memory). One stream
  thread. Checked: records and partitions restored, the last record's value in the store.
* ``streamstate_restore``: :func:`streamstate.topic_restore.restore_topic` (the code of
  ``streamstate restore``, default read path), the whole call: its own seconds, opening the
  stores and the restore consumer and the last checkpoints included (its listener's span is in
  ``extra_info``). Checked: records restored, the stores' sizes, the last record's value.
* ``streamstate_app``: a ``StreamsApp`` whose task owns the store (``application.id`` and store
  as Kafka Streams', its source topic empty) starts on an empty state directory; timed by its
  global restore listener from the first ``on_restore_start`` to the last ``on_restore_end``, as
  Kafka Streams is (the group join before it is not counted). Checked as the restore.

The two streamstate contenders run in ``benches/_restore_contender.py``. Every contender reads
with 4 MiB per partition fetch (``max.partition.fetch.bytes``). Each round starts from an empty
state directory; the rounds of one contender run one after another, then the next contender's,
so on a shared machine compare ratios within one run. ``python -m benches.bench_restore_peers
table out.json`` prints the table of ``docs/PERFORMANCE.md`` (rates, ratios, targets) from a run's
``--benchmark-json``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from benches import _kstreams
from benches._changelog import DISTINCT_KEYS, key
from benches._changelog import value as value_100
from benches._common import QUICK
from confluent_kafka import Producer

from streamstate.kafka_local import KafkaTestCluster

# Quick mode (CI) times one round per contender: each Kafka Streams round starts a JVM.
ROUNDS = 1 if QUICK else 3
STORE = "store"
_CONTENDER = Path(__file__).resolve().parent / "_restore_contender.py"
# Seconds any one round may take (10M records of 1 kB on a loaded 2-core machine).
_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Shape:
    """A changelog's partitions, records and value size."""

    partitions: int
    records: int
    value_bytes: int

    @property
    def id(self) -> str:
        n = self.records
        text = f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k"
        return f"{self.partitions}p-{text}-{self.value_bytes}B"


SHAPES = (
    # Quick mode: each Kafka Streams round starts a JVM (several seconds on a busy machine).
    [Shape(1, 50_000, 100), Shape(8, 50_000, 1000)]
    if QUICK
    else [Shape(p, n, v) for p in (1, 8) for n in (1_000_000, 10_000_000) for v in (100, 1000)]
)

_rng = random.Random(1000)
_TEXT: dict[int, list[bytes]] = {}


def value(i: int, size: int) -> bytes:
    """The ``size``-byte value of record ``i``: its number in hex, then random hex text (the
    100-byte one is ``benches/_changelog.py``'s)."""
    if size == 100:
        return value_100(i)
    texts = _TEXT.get(size)
    if texts is None:
        texts = _TEXT[size] = [_rng.randbytes((size - 16) // 2).hex().encode() for _ in range(4096)]
    return b"%016x" % i + texts[i % len(texts)]


def produce(bootstrap: str, topic: str, shape: Shape) -> None:
    """Produces ``shape.records`` records round-robin over its partitions."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1 << 20,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    for i in range(shape.records):
        record = value(i, shape.value_bytes)
        while True:
            try:
                producer.produce(topic, record, key(i), partition=i % shape.partitions)
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(600)
    if remaining:
        raise RuntimeError(f"{remaining} records to {topic!r} were not delivered")


@dataclass(frozen=True)
class Changelog:
    """A pre-filled changelog topic, its shape and the application it belongs to."""

    shape: Shape
    application_id: str

    @property
    def topic(self) -> str:
        return f"{self.application_id}-{STORE}-changelog"

    @property
    def input_topic(self) -> str:
        return f"{self.application_id}-input"

    @property
    def last_key(self) -> bytes:
        return key(self.shape.records - 1)

    @property
    def last_value(self) -> bytes:
        return value(self.shape.records - 1, self.shape.value_bytes)

    @property
    def last_partition(self) -> int:
        return (self.shape.records - 1) % self.shape.partitions


@pytest.fixture(scope="module", params=SHAPES, ids=[s.id for s in SHAPES])
def changelog(request: pytest.FixtureRequest, kafka: KafkaTestCluster) -> Iterator[Changelog]:
    """One shape's changelog (module-scoped and parametrized: pytest runs every contender of a
    shape, then deletes its topics, before it makes the next shape's)."""
    shape: Shape = request.param
    made = Changelog(shape, f"bench-peers-{shape.id}-{uuid.uuid4().hex[:8]}")
    try:
        kafka.create_topic(made.topic, partitions=shape.partitions)
        # The source topic of RestoreBench and of the app: empty, with the changelog's
        # partition count.
        kafka.create_topic(made.input_topic, partitions=shape.partitions)
        produce(kafka.bootstrap_servers, made.topic, shape)
        _kstreams.prepare()  # fetch and compile outside the timed rounds
        yield made
    finally:
        _kstreams.delete_application(kafka.admin, made.application_id)


@pytest.fixture
def state_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bench-restore-peers-") as d:
        yield Path(d)


class _ReportedClock:
    """A pytest-benchmark timer that moves only by the durations a contender reports itself.

    Each contender is timed inside its own process (Kafka Streams by its restore listener, the
    streamstate contenders by theirs or around their call); timing the process from here would
    add the start of a JVM or an interpreter. The benchmark calls the timer just before and just
    after each round, so a round that adds its reported duration to ``now`` is recorded with
    exactly that duration.
    """

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _start(benchmark: Any, changelog: Changelog) -> _ReportedClock:
    shape = changelog.shape
    benchmark.group = f"restore-peers-{shape.id}"
    benchmark.extra_info.update(
        records=shape.records, partitions=shape.partitions, value_bytes=shape.value_bytes
    )
    clock = _ReportedClock()
    # pytest-benchmark (pinned in constraints.txt) reads the timer from this attribute when a
    # round starts; fail loudly if a new version renames it rather than time the wrong thing.
    assert hasattr(benchmark, "_timer"), "pytest-benchmark no longer has BenchmarkFixture._timer"
    benchmark._timer = clock
    return clock


def _record(benchmark: Any, cpu: Sequence[float], rss: Sequence[float]) -> None:
    """The rounds' median CPU seconds and peak RSS (and the largest peak RSS)."""
    benchmark.extra_info.update(
        cpu_s=statistics.median(cpu),
        peak_rss_mb=round(statistics.median(rss), 1),
        peak_rss_mb_max=round(max(rss), 1),
    )


def _delete_group(admin: Any, group: str) -> None:
    """Deletes the consumer group a previous contender (or round) left, so that the next one
    joins a group of its own kind (Kafka Streams' and librdkafka's assignors differ)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            for future in admin.delete_consumer_groups([group], request_timeout=30).values():
                future.result(timeout=30)
            return
        except Exception as exc:
            if "GROUP_ID_NOT_FOUND" in str(exc):
                return
            # A fresh broker loads its coordinator; a member that just left is still leaving.
            if time.monotonic() > deadline or not any(
                code in str(exc) for code in ("COORDINATOR", "NON_EMPTY_GROUP")
            ):
                raise
            time.sleep(0.5)


def _timed_process(command: Sequence[str], stdout: Any, timeout_s: float) -> tuple[float, float]:
    """Runs ``command`` under ``/usr/bin/time``: its (CPU seconds, peak RSS in MB)."""
    with tempfile.NamedTemporaryFile("r", prefix="time-", suffix=".txt") as times:
        full = ["/usr/bin/time", "-f", "%U %S %M", "-o", times.name, *command]
        done = subprocess.run(
            full, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout_s, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{command[0]} failed (exit {done.returncode}): {done.stderr[-2000:]}"
            )
        user, system, kb = times.read().split()[-3:]
    return float(user) + float(system), int(kb) / 1024


def bench_kcat(benchmark: Any, kafka: KafkaTestCluster, changelog: Changelog) -> None:
    clock = _start(benchmark, changelog)
    n = changelog.shape.records
    cpu: list[float] = []
    rss: list[float] = []

    def run() -> None:
        kcat = shutil.which("kcat")
        assert kcat is not None, "kcat is not installed: run `make kstreams`"
        command = [
            kcat, "-C", "-b", kafka.bootstrap_servers, "-t", changelog.topic,
            "-o", "beginning", "-e", "-q", "-f", ".", "-c", str(n),
            "-X", f"max.partition.fetch.bytes={4 << 20}",
        ]  # fmt: skip
        with tempfile.TemporaryFile() as sink:
            started = time.monotonic()
            cpu_s, rss_mb = _timed_process(command, sink, _TIMEOUT_S)
            seconds = time.monotonic() - started
            assert sink.seek(0, 2) == n
        cpu.append(cpu_s)
        rss.append(rss_mb)
        clock.now += seconds

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    _record(benchmark, cpu, rss)


def bench_kafka_streams(
    benchmark: Any, kafka: KafkaTestCluster, changelog: Changelog, state_dir: Path
) -> None:
    clock = _start(benchmark, changelog)
    shape = changelog.shape
    reports: list[_kstreams.RestoreReport] = []

    def run() -> None:
        _delete_group(kafka.admin, changelog.application_id)
        directory = state_dir / f"round-{len(reports)}"
        report = _kstreams.run_restore_bench(
            kafka.bootstrap_servers,
            changelog.application_id,
            STORE,
            directory,
            probe_keys=[changelog.last_key],
            config={"num.stream.threads": "1"},
            timeout_s=_TIMEOUT_S,
        )
        shutil.rmtree(directory, ignore_errors=True)
        assert report.restored == shape.records
        assert report.partitions_restored == shape.partitions
        assert report.probes == {changelog.last_key: changelog.last_value}
        assert report.approximate_entries >= min(shape.records, DISTINCT_KEYS) // 2
        reports.append(report)
        clock.now += report.restore_s

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    _record(benchmark, [r.restore_cpu_s for r in reports], [r.peak_rss_mb for r in reports])
    benchmark.extra_info.update(
        kafka_streams_version=reports[0].kafka_streams_version,
        wall_s=statistics.median(r.wall_s for r in reports),
        start_to_running_s=statistics.median(r.start_to_running_s for r in reports),
        jvm_options=" ".join(_kstreams.JVM_OPTIONS),
    )


def _contender(command: list[str], timeout_s: float = _TIMEOUT_S) -> dict[str, Any]:
    """Runs ``benches/_restore_contender.py`` and returns its JSON report."""
    done = subprocess.run(
        [sys.executable, str(_CONTENDER), *command],
        capture_output=True,
        text=True,
        timeout=timeout_s + 120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} contender failed: {done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _check(report: dict[str, Any], changelog: Changelog) -> None:
    shape = changelog.shape
    assert report["restored"] == shape.records
    assert report["probe"] == changelog.last_value.hex()
    assert report["entries"] >= min(shape.records, DISTINCT_KEYS) // 2


def bench_streamstate_restore(
    benchmark: Any, kafka: KafkaTestCluster, changelog: Changelog, state_dir: Path
) -> None:
    clock = _start(benchmark, changelog)
    reports: list[dict[str, Any]] = []

    def run() -> None:
        directory = state_dir / f"round-{len(reports)}"
        command = [
            "restore", "--bootstrap", kafka.bootstrap_servers, "--topic", changelog.topic,
            "--store", STORE, "--state-dir", str(directory),
            "--probe-key", changelog.last_key.hex(),
            "--probe-partition", str(changelog.last_partition),
        ]  # fmt: skip
        report = _contender(command)
        shutil.rmtree(directory, ignore_errors=True)
        _check(report, changelog)
        reports.append(report)
        clock.now += report["seconds"]

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    _record(benchmark, [r["cpu_s"] for r in reports], [r["peak_rss_mb"] for r in reports])
    benchmark.extra_info["listener_span_s"] = statistics.median(r["span_s"] for r in reports)


def bench_streamstate_app(
    benchmark: Any, kafka: KafkaTestCluster, changelog: Changelog, state_dir: Path
) -> None:
    clock = _start(benchmark, changelog)
    reports: list[dict[str, Any]] = []

    def run() -> None:
        _delete_group(kafka.admin, changelog.application_id)
        directory = state_dir / f"round-{len(reports)}"
        command = [
            "app", "--bootstrap", kafka.bootstrap_servers,
            "--application-id", changelog.application_id,
            "--input-topic", changelog.input_topic,
            "--partitions", str(changelog.shape.partitions),
            "--store", STORE, "--state-dir", str(directory),
            "--probe-key", changelog.last_key.hex(),
            "--timeout-s", str(_TIMEOUT_S),
        ]  # fmt: skip
        report = _contender(command)
        shutil.rmtree(directory, ignore_errors=True)
        _check(report, changelog)
        reports.append(report)
        clock.now += report["seconds"]

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    _record(benchmark, [r["cpu_s"] for r in reports], [r["peak_rss_mb"] for r in reports])


# --------------------------------------------------------------------------------------------
# The table of docs/PERFORMANCE.md, from a run's --benchmark-json
# --------------------------------------------------------------------------------------------

_NAMES = {
    "bench_kcat": "kcat",
    "bench_kafka_streams": "Kafka Streams",
    "bench_streamstate_restore": "`streamstate restore`",
    "bench_streamstate_app": "in-app (`StreamsApp`)",
}


def table(path: Path) -> str:
    """Markdown: per shape and contender the median, records/s, CPU s and peak RSS; then the
    ratios against the targets of issue 26."""
    data = json.loads(path.read_text())
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for bench in data["benchmarks"]:
        name = bench["name"].split("[")[0]
        runs.setdefault(bench["group"].removeprefix("restore-peers-"), {})[name] = bench
    lines = [
        "| shape | contender | median | records/s | CPU s | peak RSS |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    medians: dict[str, dict[str, float]] = {}
    peaks: dict[str, dict[str, float]] = {}
    for shape, contenders in runs.items():
        for name, label in _NAMES.items():
            bench = contenders.get(name)
            if bench is None:
                continue
            median = bench["stats"]["median"]
            info = bench["extra_info"]
            medians.setdefault(shape, {})[name] = median
            span = info.get("listener_span_s")
            note = f" (listener span {span:.2f} s)" if span is not None else ""
            lines.append(
                f"| {shape} | {label} | {median:.2f} s{note} | {info['records'] / median:,.0f} | "
                f"{info['cpu_s']:.2f} | {info['peak_rss_mb']:.0f} MB |"
            )
            peaks.setdefault(name, {})[shape] = info["peak_rss_mb"]
    lines += [
        "",
        "| shape | restore / KS (≥ 1.5x on 1p, ≥ 2x on 8p) | restore / kcat (≥ 0.5x on 1p) "
        "| in-app / restore (≥ 0.9x) |",
        "| --- | ---: | ---: | ---: |",
    ]

    def ratio(m: dict[str, float], fast: str, slow: str) -> str:
        return f"{m[slow] / m[fast]:.2f}x" if fast in m and slow in m else "—"

    for shape, m in medians.items():
        lines.append(
            f"| {shape} | {ratio(m, 'bench_streamstate_restore', 'bench_kafka_streams')} "
            f"| {ratio(m, 'bench_streamstate_restore', 'bench_kcat')} "
            f"| {ratio(m, 'bench_streamstate_app', 'bench_streamstate_restore')} |"
        )
    # Peak RSS of the larger changelog against the smaller one of the same partitions and
    # values (target: 10M records <= 1.3x the 1M figure).
    lines += ["", "| contender | shapes | peak RSS ratio (<= 1.3x) |", "| --- | --- | ---: |"]
    for name, by_shape in peaks.items():
        for big, big_rss in by_shape.items():
            p, n, v = big.split("-")
            for small, small_rss in by_shape.items():
                q, m, w = small.split("-")
                if (p, v) == (q, w) and _count(n) > _count(m):
                    lines.append(
                        f"| {_NAMES[name]} | {big} / {small} | {big_rss / small_rss:.2f}x |"
                    )
    return "\n".join(lines)


def _count(text: str) -> int:
    return int(text[:-1]) * (1_000_000 if text.endswith("M") else 1000)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benches.bench_restore_peers table out.json``."""
    parser = argparse.ArgumentParser(prog="python -m benches.bench_restore_peers")
    parser.add_argument("command", choices=["table"])
    parser.add_argument("json", type=Path, help="a --benchmark-json file of this module")
    args = parser.parse_args(argv)
    print(table(args.json))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
