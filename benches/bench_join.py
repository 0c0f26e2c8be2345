"""A stream-table join end to end on the real broker (enrichment), side by side in one run on
the same input: streamstate's DSL vs Kafka Streams' (Java) vs Quix Streams vs a bare
confluent-kafka loop with a dict, one stream thread (or one loop) each.

The input (quick mode: a twentieth of each): a table topic of 100k rows, one per key
(``user-000042`` -> ``{"name", "tier", "region"}``), its record timestamps older than any of the
stream's; then a stream topic of 1M records keyed over those 100k keys (``{"id", "user",
"amount"}``, ``id`` the record's number), timestamps spread evenly over an hour in production
order. Both topics have 4 partitions, keys placed as a Java producer places them (murmur2), so
they are co-partitioned. Each contender, a fresh application per round, reads both from the
beginning, joins each stream record with its key's row — the joiner makes a new object with
the order's fields then the user's (``{**order, **user}``; the names do not overlap) — and
writes it to a sink topic of its own (4 partitions, string keys, JSON values); at-least-once,
commits every 1000 ms:

* ``streamstate``: ``builder.table(table, String, Json)``, ``builder.stream(topic, String,
  Json).join(table, joiner).to(sink, value_serde=Serdes.Json())``, run by a
  :class:`~streamstate.StreamsApp`; the table's store is ``builder.table``'s default
  (persistent, logged, cached).
* ``kafka-streams``: ``benches/kstreams/JoinEnrich.java``, the same topology in Kafka Streams'
  DSL (JSON parsed by Jackson), RocksDB, its 10 MiB record cache; settings of
  ``benches/kstreams/BenchSupport.java``; JVM options of ``benches/_kstreams.py``.
* ``quix-streams``: ``benches/peers/quix_join_enrich.py``, Quix Streams 3.28.1 in its own
  virtualenv (``.venv-quix``): ``join_asof(table, how="inner", on_merge=joiner)``, its join of
  a stream with the latest value per key of another topic (RocksDB, changelogged).
* ``plain-python`` (the ceiling of a Python consumer): one thread of this process reads the
  table topic to its end into a dict (parsed JSON by key), then consumes the stream as a group
  in batches: ``json.loads``, the dict lookup, the joiner, ``json.dumps``, ``produce``; every
  second a producer flush and a commit. No store, no changelog, no timestamp order.

Each round ends at lag 0: when the application's committed offsets on the stream topic (polled
every 50 ms by the same watcher for all) reach its end, so every record has been joined and its
output flushed. ``run_s`` is from the contender's start (``StreamsApp.start()``; the peers'
``{"event": "started"}`` line, printed just before ``KafkaStreams.start()`` and
``Application.run()``; the loop's start, before it reads the table) to lag 0 — the table's load
is inside it for every contender; records/s is the stream's size over ``run_s``. ``cpu_s`` is
the contender's CPU seconds (user + system, every thread) over the same span; for streamstate
and the loop, which run in this process, that includes the lag watcher's consumer. Then each
sink is read back and checked against the join computed here in Python: exactly one output per
stream record (by ``id``), each under the record's key and equal to ``{**order, **user}``. A
round that fails the check fails the benchmark and posts no figure. At the end the module prints
a table of each contender's median and fastest round and streamstate's ratio.
``bench_join_program_is_kafkas`` checks that streamstate's program is the Java one: the same
``Topology.describe()`` text (nodes, store, names), by Kafka Streams itself.

Targets (issue 22): streamstate ≥ 1.0x Kafka Streams and ≥ 3x Quix Streams in records/s.
"""

from __future__ import annotations

import contextlib
import json
import random
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from benches import _kstreams
from benches._common import QUICK, size
from benches._lag import CommittedLag, run_to_lag_zero
from benches.bench_app import _quix_python
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from streamstate import Serdes
from streamstate.app import StreamsApp, Topology
from streamstate.dsl import StreamsBuilder
from streamstate.kafka_local import KafkaTestCluster

N = size(1_000_000)
KEYS = size(100_000)
PARTITIONS = 4
SPAN_MS = 3_600_000
COMMIT_INTERVAL_MS = 1000
ROUNDS = 1 if QUICK else 2
POLL_S = 0.05
TIMEOUT_S = 1800.0
_QUIX_JOIN_SCRIPT = Path(__file__).parent / "peers" / "quix_join_enrich.py"
_TIERS = ("bronze", "silver", "gold", "platinum")
_REGIONS = ("eu-west", "eu-north", "us-east", "us-west", "ap-south")


class Input:
    """The two topics, the stream's end offsets, and what the join must give."""

    def __init__(
        self,
        table_topic: str,
        topic: str,
        ends: dict[int, int],
        users: dict[str, dict[str, Any]],
        orders: list[tuple[str, int]],
    ) -> None:
        self.table_topic = table_topic
        self.topic = topic
        self.ends = ends
        self.users = users  # the table: key -> row
        self.orders = orders  # the stream: id -> (key, amount)

    def expected(self, order_id: int) -> tuple[str, dict[str, Any]]:
        """The key and the joined value of stream record ``order_id``."""
        user, amount = self.orders[order_id]
        return user, {"id": order_id, "user": user, "amount": amount, **self.users[user]}


@pytest.fixture(scope="module")
def orders(kafka: KafkaTestCluster) -> Input:
    return produce_input(kafka, N, KEYS)


def _produce(producer: Producer, topic: str, value: bytes, key: bytes, timestamp: int) -> None:
    while True:
        try:
            producer.produce(topic, value, key, timestamp=timestamp)
            return
        except BufferError:
            producer.poll(0.1)


def produce_input(kafka: KafkaTestCluster, records: int, keys: int) -> Input:
    """New table and stream topics: ``keys`` rows, then ``records`` records (module doc)."""
    suffix = uuid.uuid4().hex[:8]
    table_topic = kafka.create_topic(f"bench-join-users-{suffix}", partitions=PARTITIONS)
    topic = kafka.create_topic(f"bench-join-orders-{suffix}", partitions=PARTITIONS)
    # Timestamps an hour or two old: within retention and not in the future (brokers refuse
    # records more than an hour ahead); the table's a minute before the stream's first.
    base = int(time.time() * 1000) - 2 * SPAN_MS
    rng = random.Random(22)
    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "linger.ms": 50,
            "partitioner": "murmur2_random",  # where a Java producer would put each key
            "enable.idempotence": True,
        }
    )
    users: dict[str, dict[str, Any]] = {}
    for i in range(keys):
        user = f"user-{i:06d}"
        row = {"name": f"User {i}", "tier": rng.choice(_TIERS), "region": rng.choice(_REGIONS)}
        users[user] = row
        _produce(producer, table_topic, json.dumps(row).encode(), user.encode(), base - 60_000)
    names = list(users)
    orders: list[tuple[str, int]] = []
    for i in range(records):
        user = names[rng.randrange(keys)]
        amount = rng.randint(1, 1000)
        orders.append((user, amount))
        value = json.dumps({"id": i, "user": user, "amount": amount}).encode()
        _produce(producer, topic, value, user.encode(), base + i * SPAN_MS // records)
    assert producer.flush(120) == 0
    assert sum(kafka.end_offsets(table_topic).values()) == keys
    ends = kafka.end_offsets(topic)
    assert sum(ends.values()) == records
    return Input(table_topic, topic, ends, users, orders)


# --------------------------------------------------------------------------------------------
# Runs, results, the check
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One round of one contender: see the module doc for ``run_s``, ``cpu_s``, ``boot_s``."""

    contender: str
    sink: str
    run_s: float
    cpu_s: float
    boot_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_peer(cls, contender: str, sink: str, peer: _kstreams.PeerRun) -> Run:
        extra = dict(peer.report, cpu_boot_s=peer.cpu_boot_s, cpu_total_s=peer.cpu_s)
        extra["wall_s"] = peer.wall_s
        return cls(contender, sink, peer.run_s, peer.cpu_run_s, peer.boot_s, extra)

    @property
    def records_per_s(self) -> float:
        return N / self.run_s


_CONTENDERS = ("streamstate", "kafka-streams", "quix-streams", "plain-python")
_TARGETS = {"kafka-streams": 1.0, "quix-streams": 3.0}


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest) -> Iterator[dict[str, list[Run]]]:
    """Every checked round's :class:`Run` by contender; printed as a table at the end."""
    found: dict[str, list[Run]] = {}
    yield found
    if not found:
        return
    lines = [
        "",
        f"Stream-table join: {N:,} records, a {KEYS:,}-row table, {PARTITIONS} partitions, "
        f"{ROUNDS} round(s) each; records/s of the median round (fastest in brackets)",
        f"{'contender':<14} {'records/s':>10} {'(fastest)':>11} {'run s':>7} {'CPU s':>7} "
        f"{'sink records':>12}  streamstate is",
    ]
    ours = found.get("streamstate")
    for contender in _CONTENDERS:
        runs = found.get(contender)
        if not runs:
            continue
        median_s = statistics.median(r.run_s for r in runs)
        fastest = min(runs, key=lambda r: r.run_s)
        cpu_s = statistics.median(r.cpu_s for r in runs)
        versus = ""
        if ours and contender != "streamstate":
            ratio = median_s / statistics.median(r.run_s for r in ours)
            target = f" (target {_TARGETS[contender]}x)" if contender in _TARGETS else ""
            versus = f"{ratio:.2f}x{target}"
        lines.append(
            f"{contender:<14} {N / median_s:>10,.0f} {f'({fastest.records_per_s:,.0f})':>11} "
            f"{median_s:>7.2f} {cpu_s:>7.2f} {fastest.extra.get('sink_records', 0):>12,}  "
            f"{versus}"
        )
    # Past pytest's output capture, which holds a fixture's teardown output back.
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print("\n".join(lines), flush=True)


@dataclass
class SinkCheck:
    """A sink read back against the join: ``records`` it holds; ``wrong``: records with no
    order id, under another key or with another value than the join's (``samples``: the first
    few, described); ``missing``/``duplicated``: stream records with no output / more than
    one."""

    records: int = 0
    wrong: int = 0
    missing: int = 0
    duplicated: int = 0
    samples: list[str] = field(default_factory=list)

    def problems(self) -> str:
        """What is wrong, or ``""``."""
        counts = {"wrong": self.wrong, "missing": self.missing, "duplicated": self.duplicated}
        if not any(counts.values()):
            return ""
        found = ", ".join(f"{n} {what}" for what, n in counts.items() if n)
        return "\n  ".join([f"{found} (of {self.records} sink records)", *self.samples])

    def add_wrong(self, why: str) -> None:
        """Counts a wrong record, keeping the first few descriptions."""
        self.wrong += 1
        if len(self.samples) < 5:
            self.samples.append(why)


def check_sink(kafka: KafkaTestCluster, topic: str, data: Input) -> SinkCheck:
    """Reads ``topic`` from its beginning to its end and checks it against the join of ``data``:
    exactly one record per stream record, under its key, with the joined value."""
    check = SinkCheck()
    seen = bytearray(len(data.orders))
    ends = {p: end for p, end in kafka.end_offsets(topic).items() if end > 0}
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"bench-join-check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + 300
        while ends:
            assert time.monotonic() < deadline, f"could not read {topic} to its end"
            for message in consumer.consume(10_000, 1.0):
                assert message.error() is None, message.error()
                check.records += 1
                if message.offset() + 1 >= ends.get(message.partition(), 0):
                    ends.pop(message.partition(), None)
                raw = message.value()
                value = None if raw is None else json.loads(raw)
                order_id = value.get("id") if isinstance(value, dict) else None
                if not isinstance(order_id, int) or not 0 <= order_id < len(seen):
                    check.add_wrong(f"a record with no order id: {message.key()!r} -> {raw!r}")
                    continue
                seen[order_id] = min(seen[order_id] + 1, 2)
                key, joined = data.expected(order_id)
                if message.key() != key.encode() or value != joined:
                    check.add_wrong(
                        f"order {order_id}: got {message.key()!r} -> {value}, "
                        f"expected {key!r} -> {joined}"
                    )
    finally:
        consumer.close()
    check.missing = seen.count(0)
    check.duplicated = seen.count(2)
    return check


def _measure(
    benchmark: Any,
    kafka: KafkaTestCluster,
    data: Input,
    results: dict[str, list[Run]],
    contender: str,
) -> None:
    """Times ``ROUNDS`` rounds of ``contender``, checks every round's sink, and only then
    records them."""
    benchmark.group = "join-enrich"
    runs: list[Run] = []
    benchmark.pedantic(_RUNNERS[contender], args=(kafka, data, runs), rounds=ROUNDS)
    checks = [check_sink(kafka, r.sink, data) for r in runs]
    for run, check in zip(runs, checks, strict=True):
        run.extra["sink_records"] = check.records
    for run, check in zip(runs, checks, strict=True):
        if check.problems():
            pytest.fail(f"{contender}: the join in {run.sink} is wrong: {check.problems()}")
    results[contender] = runs
    benchmark.extra_info.update(
        records=N,
        keys=KEYS,
        partitions=PARTITIONS,
        commit_interval_ms=COMMIT_INTERVAL_MS,
        records_per_s=N / statistics.median(r.run_s for r in runs),
        run_s=[r.run_s for r in runs],
        cpu_s=[r.cpu_s for r in runs],
        boot_s=[r.boot_s for r in runs],
        details=[r.extra for r in runs],
    )


# --------------------------------------------------------------------------------------------
# The contenders
# --------------------------------------------------------------------------------------------


def enrich(order: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """The joiner: a new record with the order's fields, then the user's."""
    return {**order, **user}


def join_topology(table_topic: str, topic: str, sink: str) -> Topology:
    """streamstate's program (see the module doc)."""
    builder = StreamsBuilder()
    users = builder.table(table_topic, key_serde=Serdes.String(), value_serde=Serdes.Json())
    orders = builder.stream(topic, key_serde=Serdes.String(), value_serde=Serdes.Json())
    orders.join(users, enrich).to(sink, value_serde=Serdes.Json())
    return builder.build()


def _streamstate(kafka: KafkaTestCluster, data: Input, runs: list[Run]) -> None:
    sink = kafka.create_topic(partitions=PARTITIONS)
    app_id = f"bench-join-{uuid.uuid4().hex[:8]}"
    with (
        CommittedLag(kafka.bootstrap_servers, app_id, data.topic, data.ends) as lag,
        tempfile.TemporaryDirectory() as d,
    ):
        app = StreamsApp(
            join_topology(data.table_topic, data.topic, sink),
            {
                "application.id": app_id,
                "bootstrap.servers": kafka.bootstrap_servers,
                "state.dir": d,
                "commit.interval.ms": COMMIT_INTERVAL_MS,
            },
        )
        run_s, cpu_s, dropped = run_to_lag_zero(app, lag, timeout_s=TIMEOUT_S, poll_s=POLL_S)
    runs.append(Run("streamstate", sink, run_s, cpu_s, extra={"dropped": dropped}))


def _kafka_streams(kafka: KafkaTestCluster, data: Input, runs: list[Run]) -> None:
    sink = kafka.create_topic(partitions=PARTITIONS)
    app_id = f"bench-ksjoin-{uuid.uuid4().hex[:8]}"
    with (
        CommittedLag(kafka.bootstrap_servers, app_id, data.topic, data.ends) as lag,
        tempfile.TemporaryDirectory() as d,
    ):
        options = {
            "bootstrap": kafka.bootstrap_servers,
            "application-id": app_id,
            "table-topic": data.table_topic,
            "input-topic": data.topic,
            "sink-topic": sink,
            "state-dir": Path(d) / "state",
            "timeout-ms": int(TIMEOUT_S * 1000),
        }
        arguments = [part for name, value in options.items() for part in (f"--{name}", str(value))]
        command = [
            _kstreams._java_tool("java"),
            *_kstreams.JVM_OPTIONS,
            "-cp",
            _kstreams.classpath(),
            "JoinEnrich",
            *arguments,
        ]
        peer = _kstreams.run_until_done("JoinEnrich", command, lag.zero, timeout_s=TIMEOUT_S)
    runs.append(Run.of_peer("kafka-streams", sink, peer))


def _quix(kafka: KafkaTestCluster, data: Input, runs: list[Run]) -> None:
    sink = kafka.create_topic(partitions=PARTITIONS)
    group = f"bench-quix-join-{uuid.uuid4().hex[:8]}"
    with (
        CommittedLag(kafka.bootstrap_servers, group, data.topic, data.ends) as lag,
        tempfile.TemporaryDirectory() as d,
    ):
        command = [
            _quix_python(),
            str(_QUIX_JOIN_SCRIPT),
            kafka.bootstrap_servers,
            data.table_topic,
            data.topic,
            sink,
            d,
            group,
        ]
        peer = _kstreams.run_until_done("quix_join_enrich", command, lag.zero, timeout_s=TIMEOUT_S)
    runs.append(Run.of_peer("quix-streams", sink, peer))


def _plain_loop(
    bootstrap: str, data: Input, sink: str, group: str, *, stop: threading.Event, failed: list[str]
) -> None:
    """The ``plain-python`` contender's thread (module doc); a failure lands in ``failed``."""
    try:
        users: dict[bytes, Any] = {}
        reader = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            ends = {p: end for p, end in _end_offsets(reader, data.table_topic).items() if end}
            reader.assign([TopicPartition(data.table_topic, p, OFFSET_BEGINNING) for p in ends])
            while ends and not stop.is_set():
                for message in reader.consume(10_000, 0.1):
                    if message.error() is not None:
                        raise KafkaException(message.error())
                    raw = message.value()
                    if raw is None:
                        users.pop(message.key(), None)
                    else:
                        users[message.key()] = json.loads(raw)
                    if message.offset() + 1 >= ends.get(message.partition(), 0):
                        ends.pop(message.partition(), None)
        finally:
            reader.close()
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "partitioner": "murmur2_random",
                "compression.type": "lz4",  # as the other contenders write their sinks
            }
        )
        consumer.subscribe([data.topic])
        last_commit = time.monotonic()
        loads, dumps, produce, get = json.loads, json.dumps, producer.produce, users.get
        try:
            while not stop.is_set():
                for message in consumer.consume(10_000, 0.1):
                    if message.error() is not None:
                        raise KafkaException(message.error())
                    key = message.key()
                    user = get(key)
                    if user is None:
                        continue
                    out = dumps({**loads(message.value()), **user}).encode()
                    while True:
                        try:
                            produce(sink, out, key)
                            break
                        except BufferError:
                            producer.poll(0.05)
                producer.poll(0)
                if time.monotonic() - last_commit >= COMMIT_INTERVAL_MS / 1000:
                    assert producer.flush(60) == 0, "the sink's records were not delivered"
                    with contextlib.suppress(KafkaException):  # nothing consumed yet
                        consumer.commit(asynchronous=False)
                    last_commit = time.monotonic()
        finally:
            producer.flush(60)
            consumer.close()
    except BaseException as exc:
        failed.append(repr(exc))


def _end_offsets(consumer: Consumer, topic: str) -> dict[int, int]:
    metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in metadata.partitions
    }


def _plain_python(kafka: KafkaTestCluster, data: Input, runs: list[Run]) -> None:
    sink = kafka.create_topic(partitions=PARTITIONS)
    group = f"bench-plain-join-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    failed: list[str] = []
    with CommittedLag(kafka.bootstrap_servers, group, data.topic, data.ends) as lag:
        thread = threading.Thread(
            target=_plain_loop,
            args=(kafka.bootstrap_servers, data, sink, group),
            kwargs={"stop": stop, "failed": failed},
            name="plain-join",
        )
        started, cpu_started = time.monotonic(), time.process_time()
        thread.start()
        try:
            while not lag.zero():
                assert not failed, f"the plain loop failed: {failed[0]}"
                assert time.monotonic() - started < TIMEOUT_S, "the loop did not reach lag 0"
                time.sleep(POLL_S)
            run_s, cpu_s = time.monotonic() - started, time.process_time() - cpu_started
        finally:
            stop.set()
            thread.join(120)
    assert not failed, f"the plain loop failed: {failed[0]}"
    runs.append(Run("plain-python", sink, run_s, cpu_s))


_RUNNERS = {
    "streamstate": _streamstate,
    "kafka-streams": _kafka_streams,
    "quix-streams": _quix,
    "plain-python": _plain_python,
}


def bench_join_program_is_kafkas() -> None:
    """streamstate's program is the Java peer's: the same ``Topology.describe()`` text (the
    same nodes, store and names, so the same changelog topic)."""
    names = ["users", "orders", "out"]
    arguments = ["--describe", "true"]
    for option, topic in zip(("table-topic", "input-topic", "sink-topic"), names, strict=True):
        arguments += [f"--{option}", topic]
    kafka_text = _kstreams._run_java("JoinEnrich", arguments, 120.0)["describe"]
    assert str(join_topology(*names).describe()) == kafka_text


@pytest.mark.parametrize("contender", list(_RUNNERS))
def bench_join(
    benchmark: Any,
    kafka: KafkaTestCluster,
    *,
    orders: Input,
    results: dict[str, list[Run]],
    contender: str,
) -> None:
    _measure(benchmark, kafka, orders, results, contender)
