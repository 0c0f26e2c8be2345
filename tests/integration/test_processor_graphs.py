"""Processor graphs on the real broker: the word count through a repartition topic with two
instances, a branch with headers, punctuation on stream time and wall-clock time, commit
requests, and the start-time checks of internal topics. Every expected result is computed from
what the test produced."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import kill_word_count_mid_stream, start_app_child, wait_until
from tests.integration.test_exactly_once import read_sink
from tests.integration.test_streams_app import TIMEOUT, new_app

from streamstate import (
    Processor,
    ProcessorGraphContext,
    PunctuationType,
    Record,
    State,
    StreamsApp,
    TaskId,
    Topology,
    TopologyError,
)
from streamstate.app.key_metadata import murmur2
from streamstate.examples.word_count_graph import word_count_topology
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import StringDeserializer, StringSerializer

VOCABULARY = [f"w{i:03d}" for i in range(150)] + ["Kafka", "kafka", "STREAMS", "streams"]


def make_lines(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(0, 12))) for _ in range(n)]


def word_counts(lines: list[str]) -> collections.Counter[str]:
    return collections.Counter(word for line in lines for word in line.lower().split())


def store_counts(app: StreamsApp) -> dict[str, int]:
    try:
        return {k.decode(): int(v) for k, v in app.store("counts").all()}
    except Exception:  # a rebalance or restoration under way: nothing to read yet
        return {}


def read_topic(
    kafka: KafkaTestCluster, topic: str, until: Any, what: str, timeout: float = TIMEOUT
) -> list[Any]:
    """Every message of ``topic`` from the beginning, read until ``until(messages)`` holds."""
    consumer = kafka.consumer()
    consumer.subscribe([topic])
    messages: list[Any] = []
    deadline = time.monotonic() + timeout
    while not until(messages):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        messages += [m for m in consumer.consume(5000, 0.5) if m.error() is None]
    return messages


def test_a_word_count_through_a_repartition_topic_counts_every_line_once_across_two_instances(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    text = kafka.create_topic(partitions=4)
    out = kafka.create_topic(partitions=4)
    app_id = f"wc-{uuid.uuid4().hex[:8]}"
    first = make_lines(3_000, seed=1)
    kafka.produce(text, [(None, line) for line in first])
    a = new_app(apps, kafka, word_count_topology(text, out), tmp_path / "a", app_id)
    b = new_app(apps, kafka, word_count_topology(text, out), tmp_path / "b", app_id)
    a.start()
    assert a.wait_for_state(State.RUNNING, TIMEOUT)
    b.start()

    def both() -> dict[str, int]:
        merged = collections.Counter(store_counts(a))
        merged.update(store_counts(b))
        return dict(merged)

    expected = word_counts(first)
    wait_until(
        lambda: a.state is State.RUNNING and b.state is State.RUNNING and both() == expected,
        "both instances running with every word counted once",
    )
    b_tasks = {t for thread in b._threads for t in thread.active_tasks()}
    assert {t.subtopology for t in b_tasks} == {0, 1}, (
        f"b should run both sub-topologies: {b_tasks}"
    )
    assert all(isinstance(t, TaskId) for t in b_tasks)
    repartition = f"{app_id}-words-repartition"
    assert kafka.partitions(repartition) == [0, 1, 2, 3]
    assert b.close(30)

    # b closed midway: a takes its tasks over (restoring b's counts from the changelog).
    second = make_lines(2_000, seed=2)
    kafka.produce(text, [(None, line) for line in second])
    expected += word_counts(second)
    wait_until(lambda: store_counts(a) == expected, "a to count every line of both batches")
    a_tasks = {str(t) for thread in a._threads for t in thread.active_tasks()}
    assert a_tasks == {f"{s}_{p}" for s in (0, 1) for p in range(4)}

    # The sink holds every count of every word exactly once: 1, 2, ..., n.
    total = sum(expected.values())
    messages = read_topic(kafka, out, lambda ms: len(ms) >= total, f"{total} counts in the sink")
    seen: dict[str, list[int]] = collections.defaultdict(list)
    for m in messages:
        seen[m.key().decode()].append(int(m.value()))
        # Java's partitioner of the serialized key decides the sink partition.
        assert m.partition() == (murmur2(m.key()) & 0x7FFFFFFF) % 4
    assert {w: sorted(v) for w, v in seen.items()} == {
        w: list(range(1, n + 1)) for w, n in expected.items()
    }
    # What every task committed past is purged from the repartition topic.
    wait_until(
        lambda: sum(kafka.beginning_offsets(repartition).values()) > 0,
        "the repartition topic to be purged below the committed offsets",
    )


class Router(Processor):
    """Sends even numbers to the child ``evens``, odd ones to ``odds``, tagging each record
    with where it came from."""

    def init(self, context: ProcessorGraphContext) -> None:
        self.context = context

    def process(self, record: Record) -> None:
        md = self.context.record_metadata
        assert md is not None
        origin = f"{md.topic}/{md.partition}/{md.offset}/{self.context.task_id}"
        tagged = record.with_headers((*record.headers, ("origin", origin.encode())))
        self.context.forward(tagged, "evens" if int(record.value) % 2 == 0 else "odds")


def test_a_branch_forwards_by_child_name_and_headers_reach_the_sinks(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    numbers = kafka.create_topic(partitions=2)
    evens, odds = kafka.create_topic(partitions=3), kafka.create_topic(partitions=3)
    topology = Topology().add_source("numbers", numbers, value_deserializer=StringDeserializer())
    topology.add_processor("router", Router, "numbers")
    topology.add_sink("evens", evens, "router", value_serializer=StringSerializer())
    topology.add_sink("odds", odds, "router", value_serializer=StringSerializer())
    records = [
        {
            "key": f"k-{i}".encode(),
            "value": str(i),
            "timestamp": 1_700_000_000_000 + i,
            "headers": [("trace", f"t-{i}".encode())],
        }
        for i in range(200)
    ]
    positions = kafka.produce(numbers, records)
    app = new_app(apps, kafka, topology, tmp_path, f"branch-{uuid.uuid4().hex[:8]}")
    app.start()
    got_evens = read_topic(kafka, evens, lambda ms: len(ms) >= 100, "100 even numbers")
    got_odds = read_topic(kafka, odds, lambda ms: len(ms) >= 100, "100 odd numbers")
    assert sorted(int(m.value()) for m in got_evens) == list(range(0, 200, 2))
    assert sorted(int(m.value()) for m in got_odds) == list(range(1, 200, 2))
    for m in got_evens + got_odds:
        i = int(m.value())
        partition, offset = positions[i]
        assert m.key() == f"k-{i}".encode()
        assert m.timestamp()[1] == 1_700_000_000_000 + i
        assert m.headers() == [
            ("trace", f"t-{i}".encode()),
            ("origin", f"{numbers}/{partition}/{offset}/0_{partition}".encode()),
        ]
        assert m.partition() == (murmur2(m.key()) & 0x7FFFFFFF) % 3


class Punctuated(Processor):
    """Forwards a record for each punctuation: ``stream`` every 10 ms of stream time,
    ``twice`` on the same schedule until it cancels itself after two, ``wall`` every 50 ms of
    wall-clock time; each also writes the store ``fired``. ``seen`` reports stream time."""

    def init(self, context: ProcessorGraphContext) -> None:
        self.context = context
        self.fired = context.get_state_store("fired")
        self.twice_count = 0
        self.wall_count = 0
        context.schedule(10, PunctuationType.STREAM_TIME, self.on_stream_time)
        self.twice = context.schedule(10, PunctuationType.STREAM_TIME, self.on_twice)
        context.schedule(50, PunctuationType.WALL_CLOCK_TIME, self.on_wall_clock)

    def on_stream_time(self, timestamp: int) -> None:
        assert self.context.record_metadata is None
        self.fired.put(b"stream", b"%d" % timestamp)
        self.context.forward(Record("stream", str(timestamp), timestamp))

    def on_twice(self, timestamp: int) -> None:
        self.twice_count += 1
        self.context.forward(Record("twice", str(timestamp), timestamp))
        if self.twice_count == 2:
            self.twice.cancel()

    def on_wall_clock(self, timestamp: int) -> None:
        self.wall_count += 1
        self.fired.put(b"wall", b"%d" % self.wall_count)
        self.context.forward(Record("wall", str(self.wall_count), timestamp))

    def process(self, record: Record) -> None:
        now = self.context.current_stream_time_ms
        self.context.forward(Record("seen", f"{record.timestamp}/{now}", record.timestamp))


def test_punctuation_on_stream_time_with_out_of_order_records_and_on_wall_clock_time(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, out = kafka.create_topic(partitions=1), kafka.create_topic(partitions=1)
    topology = Topology().add_source("in", source)
    topology.add_processor("punctuated", Punctuated, "in")
    topology.add_store("fired", "punctuated")
    topology.add_sink(
        "out",
        out,
        "punctuated",
        key_serializer=StringSerializer(),
        value_serializer=StringSerializer(),
    )
    app = new_app(apps, kafka, topology, tmp_path, f"punct-{uuid.uuid4().hex[:8]}")
    app.start()
    # Wall-clock punctuations run with no input at all.
    wait_until(lambda: int(_get(app, "fired", b"wall") or b"0") >= 3, "3 wall-clock punctuations")
    # Kafka's StreamTaskTest gap scenario, with records out of order (5 and 150).
    stamps = [20, 142, 5, 155, 160, 150, 161]
    kafka.produce(source, [(b"k", b"v", t) for t in stamps])
    messages = read_topic(
        kafka,
        out,
        lambda ms: sum(m.key() == b"seen" for m in ms) == len(stamps),
        "every record seen",
    )
    by_key: dict[bytes, list[str]] = collections.defaultdict(list)
    for m in messages:
        by_key[m.key()].append(m.value().decode())
    # Stream time never goes back; several missed intervals fire once, at the current time.
    assert by_key[b"seen"] == [
        "20/20",
        "142/142",
        "5/142",
        "155/155",
        "160/160",
        "150/160",
        "161/161",
    ]
    assert by_key[b"stream"] == ["20", "142", "155", "160"]
    assert by_key[b"twice"] == ["20", "142"]
    assert [int(v) for v in by_key[b"wall"]] == list(range(1, len(by_key[b"wall"]) + 1))
    assert _get(app, "fired", b"stream") == b"160"


def _get(app: StreamsApp, store: str, key: bytes) -> bytes | None:
    try:
        return app.store(store).get(key)
    except Exception:  # not queryable yet
        return None


class CommitOnRequest(Processor):
    def init(self, context: ProcessorGraphContext) -> None:
        self.context = context

    def process(self, record: Record) -> None:
        if record.value == b"commit":
            self.context.commit()


def test_commit_requested_by_a_processor_commits_before_the_interval(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    topology = Topology().add_source("in", source)
    topology.add_processor("p", CommitOnRequest, "in")
    app_id = f"commit-{uuid.uuid4().hex[:8]}"
    app = new_app(apps, kafka, topology, tmp_path, app_id, **{"commit.interval.ms": 600_000})
    app.start()
    kafka.produce(source, [(b"k", b"a"), (b"k", b"b"), (b"k", b"commit")])
    consumer = kafka.consumer(**{"group.id": app_id})

    def committed() -> int:
        [tp] = consumer.committed([KafkaTopicPartition(source, 0)], timeout=10)
        return int(tp.offset)

    wait_until(lambda: committed() == 3, "the requested commit of offset 3")


def test_start_refuses_sources_that_are_not_co_partitioned_and_a_missized_repartition_topic(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    left, right = kafka.create_topic(partitions=2), kafka.create_topic(partitions=3)
    topology = Topology().add_source("left", left).add_source("right", right)
    topology.add_processor("join", CommitOnRequest, "left", "right")
    app = new_app(apps, kafka, topology, tmp_path / "a", f"copart-{uuid.uuid4().hex[:8]}")
    with pytest.raises(TopologyError, match="sub-topology 0 are not co-partitioned") as info:
        app.start()
    assert f"{left}: 2" in str(info.value) and f"{right}: 3" in str(info.value)

    text, out = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    app_id = f"missized-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(f"{app_id}-words-repartition", partitions=5)
    app = new_app(apps, kafka, word_count_topology(text, out), tmp_path / "b", app_id)
    with pytest.raises(TopologyError, match="exists with 5 partitions, but the topology needs 2"):
        app.start()


def test_the_one_function_form_sends_headers_and_partitions_like_java(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=1), kafka.create_topic(partitions=3)
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def echo(ctx: Any, record: Any) -> None:
        ctx.send(sink, record.key, record.value, headers=[*record.headers, ("seen", b"1")])

    kafka.produce(
        source,
        [{"key": b"k-%d" % i, "value": b"v", "headers": [("h", b"%d" % i)]} for i in range(30)],
    )
    app = new_app(apps, kafka, topology, tmp_path, f"echo-{uuid.uuid4().hex[:8]}")
    app.start()
    messages = read_topic(kafka, sink, lambda ms: len(ms) >= 30, "30 echoed records")
    for m in messages:
        i = int(m.key()[2:])
        assert m.headers() == [("h", b"%d" % i), ("seen", b"1")]
        assert m.partition() == (murmur2(m.key()) & 0x7FFFFFFF) % 3


def test_a_word_count_under_exactly_once_counts_every_line_once_across_a_sigkill(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    # The repartition topic is written in the same transaction as the sink, the changelog and
    # the source offsets, and read read_committed: a SIGKILL mid-stream loses and repeats
    # nothing across either sub-topology. (The same run under at_least_once double-counts: it
    # timed out waiting for the exact counts in 3 runs of 3.)
    text = kafka.create_topic(partitions=2)
    out = kafka.create_topic(partitions=2)
    app_id = f"wc-eos-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    lines = make_lines(40_000, seed=3)
    kafka.produce(text, [(None, line) for line in lines])
    expected = word_counts(lines)
    total = sum(expected.values())
    child = start_app_child(
        "from streamstate.examples.word_count_graph import word_count_topology",
        f"word_count_topology({text!r}, {out!r})",
        {
            "application.id": app_id,
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(state_dir),
            "session.timeout.ms": 6000,
            "processing.guarantee": "exactly_once_v2",
        },
    )
    kill_word_count_mid_stream(kafka, child, app_id, text, len(lines))

    app = new_app(
        apps,
        kafka,
        word_count_topology(text, out),
        state_dir,
        app_id,
        **{"processing.guarantee": "exactly_once_v2"},
    )
    app.start()
    wait_until(lambda: store_counts(app) == expected, "every word counted once")
    seen = read_sink(kafka, out, "read_committed", until=total)
    # Each word's counts 1..n, each once and in order: nothing of the killed run's open
    # transactions (sink, repartition or changelog records) shows, and nothing is counted twice.
    assert {w.decode(): counts for w, counts in seen.items()} == {
        w: list(range(1, n + 1)) for w, n in expected.items()
    }


def test_streamstate_run_starts_the_word_count_example(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    text, out = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    lines = make_lines(300, seed=5)
    kafka.produce(text, [(None, line) for line in lines])
    expected = word_counts(lines)
    example = Path(word_count_topology.__code__.co_filename)
    env = {
        **os.environ,
        "STREAMSTATE_INPUT_TOPIC": text,
        "STREAMSTATE_OUTPUT_TOPIC": out,
        "STREAMSTATE_APPLICATION_ID": f"run-wc-{uuid.uuid4().hex[:8]}",
    }
    command = [
        sys.executable,
        "-m",
        "streamstate",
        "run",
        str(example),
        "--bootstrap-servers",
        kafka.bootstrap_servers,
        "--state-dir",
        str(tmp_path),
        "--seconds",
        "300",
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        last: dict[str, int] = {}

        def counted(messages: list[Any]) -> bool:
            for m in messages[len(seen) :]:
                last[m.key().decode()] = int(m.value())
            seen[:] = messages
            return last == expected

        seen: list[Any] = []
        read_topic(kafka, out, counted, "the example's final counts in the sink")
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=120)
    assert process.returncode == 0, output.decode()[-3000:]
    assert b"state: RUNNING -> PENDING_SHUTDOWN" in output


def test_a_caching_store_logs_the_latest_count_per_commit_and_restores_exactly(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    text, out = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    lines = make_lines(2_000, seed=7)
    kafka.produce(text, [(None, line) for line in lines])
    expected = word_counts(lines)
    app_id = f"cached-{uuid.uuid4().hex[:8]}"
    topology = word_count_topology(text, out, caching=True)
    first = new_app(apps, kafka, topology, tmp_path / "a", app_id)
    first.start()
    # Queries read the store below the cache: they see each commit's counts.
    wait_until(lambda: store_counts(first) == expected, "every word counted and committed")
    assert first.close(30)
    changelog = f"{app_id}-counts-changelog"
    logged = sum(kafka.end_offsets(changelog).values())
    total = sum(expected.values())
    assert len(expected) <= logged < total, f"{logged} changelog records for {total} words"
    # The sink still gets every count; a new instance restores the exact counts.
    messages = read_topic(kafka, out, lambda ms: len(ms) >= total, f"{total} counts")
    assert len(messages) == total
    second = new_app(
        apps, kafka, word_count_topology(text, out, caching=True), tmp_path / "b", app_id
    )
    second.start()
    wait_until(lambda: store_counts(second) == expected, "the counts restored from the changelog")
