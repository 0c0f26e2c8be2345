"""The DSL's counts end to end on the real broker, side by side in one run on the same input:
streamstate's DSL vs Kafka Streams' (Java) vs Quix Streams, one stream thread each.

The input: 1M records (quick mode: 50k) on 4 partitions, string keys over 10k users
(``user-00042``), JSON values (``{"user": ..., "amount": ...}``), record timestamps spread evenly
over an hour in production order (so each partition's are in order and no record is late for
its window). Two programs, each a fresh application per round reading the input from the
beginning into a sink topic of its own (4 partitions), at-least-once, commits every 1000 ms:

* ``count``: the count per key, ``stream(...).group_by_key().count().to_stream().to(sink)``.
* ``windowed``: per key and 1-minute tumbling window,
  ``.windowed_by(TimeWindows.of_size_with_no_grace(60_000)).count()`` (about 600k windows).

The contenders:

* ``streamstate``: ``builder.stream(topic, key_serde=Serdes.String(),
  value_serde=Serdes.Json())`` then the program, the sink written with ``Serdes.Long()`` values
  (windowed keys: the key then the window start, Kafka's ``TimeWindowedSerializer``), the
  store as ``Materialized``'s default (persistent, logged, ``caching=True``: its record cache
  holds up to 10,000 dirty keys per task), run by a :class:`~streamstate.StreamsApp`.
* ``kafka-streams``: ``benches/kstreams/DslCount.java``, the same topology in Kafka Streams'
  DSL (JSON values parsed by Jackson), RocksDB, its 10 MiB record cache; settings of
  ``benches/kstreams/BenchSupport.java``; run by ``benches/_kstreams.py`` (``run_dsl_count``).
* ``quix-streams``: ``benches/peers/quix_dsl_count.py``, Quix Streams 3.28.1 in its own
  virtualenv (``.venv-quix``): a stateful ``apply`` count (Quix has no unwindowed ``count()``)
  and ``tumbling_window(60_000).count().current()``; RocksDB state with changelogs; no record
  cache (its sink gets every update).

Each round ends at lag 0: when the application's committed offsets (polled every 50 ms by the
same watcher for all three) reach the end of every input partition, so every record has been
processed and its output flushed. ``run_s`` is from the contender's start (``StreamsApp.start()``;
the peers' ``{"event": "started"}`` line, printed just before ``KafkaStreams.start()`` and
``Application.run()``) to lag 0; records/s is the input's size over the fastest round's
``run_s``. ``cpu_s`` is the contender process's CPU seconds (user + system, every thread, its
librdkafka's or the JVM's included) over the same span; for streamstate, which runs in this
process, that includes the lag watcher's consumer. The peers' ``boot_s`` (their interpreter or
JVM start, imports, building the topology: not part of ``run_s``) is in ``extra_info``. Then each
contender is closed and its sink read back as a table (a tombstone deletes its key): the count
of each key (and window) must equal the one computed here in Python. The pytest-benchmark time
is the whole round (sink creation, peer boot and close included). At its end the module prints
a table of the fastest round of each contender and program: records/s, ``run_s``, ``cpu_s``,
the records and tombstones ("deletes") its sink received, and streamstate's speed-up.

Targets (the issue's): streamstate ≥ 1.5x Kafka Streams and ≥ 5x Quix Streams in records/s.
"""

from __future__ import annotations

import collections
import contextlib
import json
import random
import struct
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from benches import _kstreams
from benches._common import QUICK, size
from benches._lag import CommittedLag, run_to_lag_zero
from benches.bench_app import _QUIX_SCRIPT, _quix_python
from confluent_kafka import Consumer, Producer, TopicPartition

from streamstate import Serdes
from streamstate.app import StreamsApp, Topology
from streamstate.dsl import StreamsBuilder, TimeWindows
from streamstate.kafka_local import KafkaTestCluster

N = size(1_000_000)
USERS = 10_000
PARTITIONS = 4
WINDOW_MS = 60_000
SPAN_MS = 3_600_000
COMMIT_INTERVAL_MS = 1000
ROUNDS = 1 if QUICK else 2
PROGRAMS = ("count", "windowed")
POLL_S = 0.05
TIMEOUT_S = 1800.0
_QUIX_DSL_SCRIPT = _QUIX_SCRIPT.with_name("quix_dsl_count.py")
_LONG = struct.Struct(">q")


class Input:
    """The input topic, its end offsets and the counts each program should give."""

    def __init__(self, topic: str, ends: dict[int, int], expected: dict[str, dict[Any, int]]):
        self.topic = topic
        self.ends = ends
        self.expected = expected


@pytest.fixture(scope="module")
def clicks(kafka: KafkaTestCluster) -> Input:
    return produce_input(kafka, N)


def produce_input(kafka: KafkaTestCluster, records: int) -> Input:
    """A new input topic of ``records`` records (see the module doc)."""
    topic = kafka.create_topic(f"bench-dsl-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS)
    # Timestamps an hour or two old: within the broker's and the changelogs' retention, and
    # not in the future (brokers refuse records more than an hour ahead).
    base = (int(time.time() * 1000) - 2 * SPAN_MS) // WINDOW_MS * WINDOW_MS
    rng = random.Random(20)
    counts: collections.Counter[Any] = collections.Counter()
    windows: collections.Counter[Any] = collections.Counter()
    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "linger.ms": 50,
            "partitioner": "murmur2_random",  # where a Java producer would put each key
            # In order per partition even when a request is retried: no record may be late.
            "enable.idempotence": True,
        }
    )
    for i in range(records):
        user = f"user-{rng.randrange(USERS):05d}"
        timestamp = base + i * SPAN_MS // records
        counts[user] += 1
        windows[user, timestamp // WINDOW_MS * WINDOW_MS] += 1
        value = json.dumps({"user": user, "amount": rng.randint(1, 1000)}).encode()
        while True:
            try:
                producer.produce(topic, value, user.encode(), timestamp=timestamp)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    ends = kafka.end_offsets(topic)
    assert sum(ends.values()) == records
    return Input(topic, ends, {"count": dict(counts), "windowed": dict(windows)})


# --------------------------------------------------------------------------------------------
# Runs and results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One round of one contender: see the module doc for ``run_s``, ``cpu_s``, ``boot_s``."""

    contender: str
    program: str
    sink: str
    run_s: float
    cpu_s: float
    boot_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_peer(cls, contender: str, program: str, sink: str, peer: _kstreams.PeerRun) -> Run:
        extra = dict(peer.report, cpu_boot_s=peer.cpu_boot_s, cpu_total_s=peer.cpu_s)
        extra["wall_s"] = peer.wall_s
        return cls(contender, program, sink, peer.run_s, peer.cpu_run_s, peer.boot_s, extra)

    @property
    def records_per_s(self) -> float:
        return N / self.run_s


_Results = dict[tuple[str, str], list[Run]]
_CONTENDERS = ("streamstate", "kafka-streams", "quix-streams")
_TARGETS = {"kafka-streams": 1.5, "quix-streams": 5.0}


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest) -> Iterator[_Results]:
    """Every round's :class:`Run`, by contender and program; printed as a table at the end."""
    found: _Results = {}
    yield found
    if not found:
        return
    lines = [
        "",
        f"DSL counts: {N:,} records, {USERS:,} keys, {PARTITIONS} partitions, fastest round",
        f"{'program':<9} {'contender':<14} {'records/s':>10} {'run s':>7} {'CPU s':>7} "
        f"{'sink records':>12} {'deletes':>7}  vs",
    ]
    for program in PROGRAMS:
        best = {c: min(r, key=lambda run: run.run_s) for (c, p), r in found.items() if p == program}
        ours = best.get("streamstate")
        for contender in _CONTENDERS:
            run = best.get(contender)
            if run is None:
                continue
            versus = ""
            if ours is not None and contender in _TARGETS:
                ratio = ours.records_per_s / run.records_per_s
                versus = f"streamstate {ratio:.2f}x (target {_TARGETS[contender]}x)"
            lines.append(
                f"{program:<9} {contender:<14} {run.records_per_s:>10,.0f} {run.run_s:>7.2f} "
                f"{run.cpu_s:>7.2f} {run.extra.get('sink_records', 0):>12,} "
                f"{run.extra.get('sink_tombstones', 0):>7,}  {versus}"
            )
    # Past pytest's output capture, which holds a fixture's teardown output back.
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print("\n".join(lines), flush=True)


class Sink:
    """A sink read from its beginning to its end as a table: the last count per key (and
    window), a tombstone (``None`` value) deleting it; and how many records and tombstones it
    held."""

    def __init__(
        self, kafka: KafkaTestCluster, topic: str, decode: Callable[[bytes, bytes | None], Any]
    ) -> None:
        """``decode(key, value) -> (k, count or None)``."""
        self.finals: dict[Any, int] = {}
        self.last_counts: dict[Any, int] = {}  # tombstones ignored
        self.records = self.tombstones = 0
        ends = {p: end for p, end in kafka.end_offsets(topic).items() if end > 0}
        consumer = Consumer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "group.id": f"bench-dsl-check-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in ends])
            deadline = time.monotonic() + 300
            while ends:
                assert time.monotonic() < deadline, f"could not read {topic} to its end"
                for message in consumer.consume(10_000, 1.0):
                    assert message.error() is None, message.error()
                    self._add(*decode(message.key(), message.value()))
                    if message.offset() + 1 >= ends.get(message.partition(), 0):
                        ends.pop(message.partition(), None)
        finally:
            consumer.close()

    def _add(self, key: Any, count: int | None) -> None:
        self.records += 1
        if count is None:
            self.tombstones += 1
            self.finals.pop(key, None)
        else:
            self.finals[key] = self.last_counts[key] = count


def _long(raw: bytes | None) -> int | None:
    return None if raw is None else int(_LONG.unpack(raw)[0])


def _kafka_count(key: bytes, value: bytes | None) -> tuple[Any, int | None]:
    return key.decode(), _long(value)


def _kafka_windowed(key: bytes, value: bytes | None) -> tuple[Any, int | None]:
    return (key[:-8].decode(), _long(key[-8:])), _long(value)


def _quix_count(key: bytes, value: bytes | None) -> tuple[Any, int | None]:
    return key.decode(), None if value is None else int(json.loads(value))


def _quix_windowed(key: bytes, value: bytes | None) -> tuple[Any, int | None]:
    assert value is not None, "Quix wrote a tombstone"
    window = json.loads(value)
    return (key.decode(), int(window["start"])), int(window["value"])


_DECODERS = {
    ("streamstate", "count"): _kafka_count,
    ("streamstate", "windowed"): _kafka_windowed,
    ("kafka-streams", "count"): _kafka_count,
    ("kafka-streams", "windowed"): _kafka_windowed,
    ("quix-streams", "count"): _quix_count,
    ("quix-streams", "windowed"): _quix_windowed,
}


def _measure(
    benchmark: Any,
    kafka: KafkaTestCluster,
    data: Input,
    results: _Results,
    *,
    contender: str,
    program: str,
) -> None:
    """Times ``ROUNDS`` rounds of ``contender`` running ``program``, records them, then checks
    every round's sink."""
    benchmark.group = f"dsl-{program}"
    runs: list[Run] = []
    benchmark.pedantic(_RUNNERS[contender], args=(kafka, data, program, runs), rounds=ROUNDS)
    results[contender, program] = runs
    best = min(runs, key=lambda r: r.run_s)
    benchmark.extra_info.update(
        records=N,
        keys=USERS,
        partitions=PARTITIONS,
        commit_interval_ms=COMMIT_INTERVAL_MS,
        records_per_s=best.records_per_s,
        run_s=[r.run_s for r in runs],
        cpu_s=[r.cpu_s for r in runs],
        boot_s=[r.boot_s for r in runs],
        details=[r.extra for r in runs],
    )
    expected = data.expected[program]
    sinks = [Sink(kafka, r.sink, _DECODERS[contender, program]) for r in runs]
    benchmark.extra_info.update(
        sink_records=[s.records for s in sinks], sink_tombstones=[s.tombstones for s in sinks]
    )
    for r, sink in zip(runs, sinks, strict=True):
        r.extra.update(sink_records=sink.records, sink_tombstones=sink.tombstones)
    for r, sink in zip(runs, sinks, strict=True):
        if sink.finals != expected:
            wrong = sum(1 for k, n in expected.items() if sink.finals.get(k) != n)
            counts = "right" if sink.last_counts == expected else "wrong"
            pytest.fail(
                f"{contender} {program}: {wrong} of {len(expected)} final counts wrong or "
                f"missing in {r.sink} ({len(sink.finals)} keys, {sink.tombstones} tombstones; "
                f"the last counts before any tombstone are {counts})"
            )


# --------------------------------------------------------------------------------------------
# The contenders
# --------------------------------------------------------------------------------------------


def dsl_topology(topic: str, sink: str, program: str) -> Topology:
    """streamstate's program ``count`` or ``windowed`` (see the module doc)."""
    builder = StreamsBuilder()
    grouped = builder.stream(
        topic, key_serde=Serdes.String(), value_serde=Serdes.Json()
    ).group_by_key()
    if program == "windowed":
        table = grouped.windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS)).count()
    else:
        table = grouped.count()
    table.to_stream().to(sink, value_serde=Serdes.Long())
    return builder.build()


@contextlib.contextmanager
def dsl_app(
    kafka: KafkaTestCluster, data: Input, program: str, prefix: str = "bench-dsl"
) -> Iterator[tuple[StreamsApp, CommittedLag, str]]:
    """streamstate's app for ``program`` over ``data`` into a new sink topic (not started), the
    lag of its committed offsets and the sink's name; its state directory is removed at the end
    (the benchmark and the diagnostics ``diag_dsl_profile`` / ``diag_dsl_gc`` run the same app)."""
    sink = kafka.create_topic(partitions=PARTITIONS)
    app_id = f"{prefix}-{program}-{uuid.uuid4().hex[:8]}"
    with (
        CommittedLag(kafka.bootstrap_servers, app_id, data.topic, data.ends) as lag,
        tempfile.TemporaryDirectory() as d,
    ):
        app = StreamsApp(
            dsl_topology(data.topic, sink, program),
            {
                "application.id": app_id,
                "bootstrap.servers": kafka.bootstrap_servers,
                "state.dir": d,
                "commit.interval.ms": COMMIT_INTERVAL_MS,
            },
        )
        yield app, lag, sink


def _streamstate(kafka: KafkaTestCluster, data: Input, program: str, runs: list[Run]) -> None:
    with dsl_app(kafka, data, program) as (app, lag, sink):
        run_s, cpu_s, dropped = run_to_lag_zero(app, lag, timeout_s=TIMEOUT_S, poll_s=POLL_S)
    runs.append(Run("streamstate", program, sink, run_s, cpu_s, extra={"dropped": dropped}))


def _kafka_streams(kafka: KafkaTestCluster, data: Input, program: str, runs: list[Run]) -> None:
    sink = kafka.create_topic(partitions=PARTITIONS)
    app_id = f"bench-ksdsl-{program}-{uuid.uuid4().hex[:8]}"
    with (
        CommittedLag(kafka.bootstrap_servers, app_id, data.topic, data.ends) as lag,
        tempfile.TemporaryDirectory() as d,
    ):
        peer = _kstreams.run_dsl_count(
            kafka.bootstrap_servers,
            app_id,
            data.topic,
            sink,
            program=program,
            state_dir=Path(d) / "state",
            done=lag.zero,
            timeout_s=TIMEOUT_S,
        )
    runs.append(Run.of_peer("kafka-streams", program, sink, peer))


def _quix(kafka: KafkaTestCluster, data: Input, program: str, runs: list[Run]) -> None:
    sink = kafka.create_topic(partitions=PARTITIONS)
    group = f"bench-quix-dsl-{program}-{uuid.uuid4().hex[:8]}"
    with (
        CommittedLag(kafka.bootstrap_servers, group, data.topic, data.ends) as lag,
        tempfile.TemporaryDirectory() as d,
    ):
        command = [
            _quix_python(),
            str(_QUIX_DSL_SCRIPT),
            kafka.bootstrap_servers,
            data.topic,
            sink,
            program,
            d,
            group,
        ]
        peer = _kstreams.run_until_done(
            f"quix_dsl_count {program}", command, lag.zero, timeout_s=TIMEOUT_S
        )
    runs.append(Run.of_peer("quix-streams", program, sink, peer))


_RUNNERS = {"kafka-streams": _kafka_streams, "quix-streams": _quix, "streamstate": _streamstate}


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("contender", list(_RUNNERS))
def bench_dsl(
    benchmark: Any,
    kafka: KafkaTestCluster,
    *,
    clicks: Input,
    results: _Results,
    contender: str,
    program: str,
) -> None:
    _measure(benchmark, kafka, clicks, results, contender=contender, program=program)
