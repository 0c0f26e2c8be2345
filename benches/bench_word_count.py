"""The word count through a repartition topic, end to end on the real broker, one stream thread
per contender: streamstate's processor graph vs Quix Streams vs Kafka Streams.

The input: 100k text lines (quick mode: 5k) on 2 partitions, 0-12 words each from a vocabulary
of 2,000 (about 600k words). Every contender splits each line into lowercase words, re-keys each
word by itself through a repartition topic of 2 partitions, counts per word in a changelogged
persistent store, writes counts to a sink topic, commits every second, and stops once every
word is counted; each result is checked against the counts computed in Python. Each round
starts from a fresh application id, state directory and sink.

* ``streamstate``: ``streamstate.examples.word_count_graph`` (the processor graph ``streamstate
  run`` starts) with the record cache on its store (``caching=True``: the changelog gets the
  latest count per word per commit, as Kafka Streams' cache and Quix's checkpointed changelog
  do; the sink still gets every count): Rust deserialization and admission per batch, Python
  processors per line and per word, murmur2-partitioned repartition writes; time from
  ``StreamsApp(...)`` to closed; CPU seconds of this process over that span (its librdkafka
  threads included) in ``extra_info``.
* ``quix-streams``: ``benches/peers/quix_word_count.py`` (``apply(expand=True)``, ``group_by``,
  a stateful ``apply`` count, ``to_topic``), Quix Streams 3.28.1 in its own virtualenv as a
  child process; time from process start to exit (its interpreter's start and imports are about
  a second of it).
* ``kafka-streams``: ``benches/kstreams/WordCount.java`` (the DSL's ``flatMapValues``,
  ``groupBy``, ``count``), Kafka Streams at the broker's version, RocksDB, its record cache
  (10 MiB: the sink and changelog get the latest count per word per commit, not every count);
  time from JVM start to exit (``extra_info`` has its own start-to-done time).

Each contender's CPU seconds (user + system; for the child processes, the JVM's or Quix's
interpreter's, all their threads) are in ``extra_info``: steadier than wall time on a machine
shared with other work.
"""

from __future__ import annotations

import collections
import json
import random
import resource
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from benches import _kstreams
from benches._common import size
from benches.bench_app import _quix_python
from confluent_kafka import Producer

from streamstate.app import State, StreamsApp
from streamstate.examples.word_count_graph import word_count_topology
from streamstate.kafka_local import KafkaTestCluster

LINES = size(100_000)
PARTITIONS = 2
VOCABULARY = [f"word{i:04d}" for i in range(2_000)]
ROUNDS = 2


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Text:
    """The input topic and the counts it should give."""

    def __init__(self, topic: str, counts: collections.Counter[str]) -> None:
        self.topic = topic
        self.counts = counts
        self.words = sum(counts.values())


@pytest.fixture(scope="module")
def text(kafka: KafkaTestCluster) -> Text:
    topic = kafka.create_topic(f"bench-lines-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS)
    rng = random.Random(15)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 50})
    counts: collections.Counter[str] = collections.Counter()
    for i in range(LINES):
        words = [rng.choice(VOCABULARY) for _ in range(rng.randint(0, 12))]
        if i % 7 == 0:
            words = [w.upper() for w in words]  # lowercasing is part of the work
        counts.update(w.lower() for w in words)
        while True:
            try:
                producer.produce(topic, " ".join(words).encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    return Text(topic, counts)


def _streamstate(kafka: KafkaTestCluster, text: Text, cpu: list[float]) -> dict[str, int]:
    sink = kafka.create_topic(partitions=PARTITIONS)
    started = time.process_time()
    with tempfile.TemporaryDirectory() as state_dir:
        app = StreamsApp(
            word_count_topology(text.topic, sink, caching=True),
            {
                "application.id": f"bench-wc-{uuid.uuid4().hex[:8]}",
                "bootstrap.servers": kafka.bootstrap_servers,
                "state.dir": state_dir,
                "commit.interval.ms": 1000,
            },
        )
        app.start()
        try:
            deadline = time.monotonic() + 900
            while True:
                assert time.monotonic() < deadline, "streamstate did not count every word"
                assert app.fatal_error is None, app.fatal_error
                if app.state is State.RUNNING:
                    counts = {k.decode(): int(v) for k, v in app.store("counts").all()}
                    if sum(counts.values()) == text.words:
                        return counts
                time.sleep(0.05)
        finally:
            app.close(60)
            cpu.append(time.process_time() - started)


def _quix(kafka: KafkaTestCluster, text: Text, reports: list[dict[str, Any]]) -> dict[str, int]:
    sink = kafka.create_topic(partitions=PARTITIONS)
    cpu_before = _children_cpu_s()
    script = Path(__file__).parent / "peers" / "quix_word_count.py"
    with tempfile.TemporaryDirectory() as state_dir:
        out = subprocess.run(
            [
                _quix_python(),
                str(script),
                kafka.bootstrap_servers,
                text.topic,
                sink,
                str(text.words),
                state_dir,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=1800,
        )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    report["cpu_s"] = _children_cpu_s() - cpu_before
    reports.append(report)
    return {"total": int(report["total_count"]), "distinct": int(report["distinct_words"])}


def _kafka_streams(
    kafka: KafkaTestCluster, text: Text, reports: list[dict[str, Any]]
) -> dict[str, int]:
    sink = kafka.create_topic(partitions=PARTITIONS)
    cpu_before = _children_cpu_s()
    with tempfile.TemporaryDirectory() as state_dir:
        report = _kstreams.run_word_count(
            kafka.bootstrap_servers,
            f"bench-kswc-{uuid.uuid4().hex[:8]}",
            text.topic,
            sink,
            lines=LINES,
            state_dir=Path(state_dir) / "state",
        )
    reports.append(
        {
            "elapsed_s": report.elapsed_s,
            "close_s": report.close_s,
            "cpu_s": _children_cpu_s() - cpu_before,
        }
    )
    return {"total": report.total_count, "distinct": report.distinct_words}


@pytest.mark.benchmark(group="word-count")
def bench_streamstate_word_count(benchmark, kafka: KafkaTestCluster, text: Text) -> None:
    cpu: list[float] = []
    result = benchmark.pedantic(_streamstate, args=(kafka, text, cpu), rounds=ROUNDS)
    benchmark.extra_info.update(lines=LINES, words=text.words, cpu_s=cpu)
    assert result == text.counts


@pytest.mark.benchmark(group="word-count")
def bench_quix_streams_word_count(benchmark, kafka: KafkaTestCluster, text: Text) -> None:
    reports: list[dict[str, Any]] = []
    result = benchmark.pedantic(_quix, args=(kafka, text, reports), rounds=ROUNDS)
    benchmark.extra_info.update(lines=LINES, words=text.words, quix_reports=reports)
    assert result == {"total": text.words, "distinct": len(text.counts)}


@pytest.mark.benchmark(group="word-count")
def bench_kafka_streams_word_count(benchmark, kafka: KafkaTestCluster, text: Text) -> None:
    reports: list[dict[str, Any]] = []
    result = benchmark.pedantic(_kafka_streams, args=(kafka, text, reports), rounds=ROUNDS)
    benchmark.extra_info.update(lines=LINES, words=text.words, kstreams_reports=reports)
    assert result == {"total": text.words, "distinct": len(text.counts)}
