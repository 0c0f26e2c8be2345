"""End-to-end throughput of a stateful count on the real broker, one stream thread (one core).

The input: 1M records (quick mode: 50k) on one partition, keys over 10k users. Both contenders
count per key in a persistent store, write each new count to a changelog topic and to a sink
topic, and commit offsets every second; each round starts from a fresh consumer group, store
and output topics and ends when every record is counted:

* ``streamstate``: a :class:`~streamstate.StreamsApp` with a one-store topology (Rust
  deserialization and timestamp admission per batch, a Python processor per record, the
  changelogging store, checkpointed commits).
* ``plain-python``: the same work hand-written over confluent-kafka: ``consume`` in batches,
  ``store.get``/``put`` per record, two ``produce`` calls, ``commit`` every second.

* ``quix-streams``: the same count with Quix Streams 3.28.1 (``benches/peers/quix_count.py``:
  ``sdf.apply(count, stateful=True)``, RocksDB state with its changelog, ``to_topic``, commits
  every second). Quix pins confluent-kafka 2.12.2, so it runs in its own virtualenv
  (``.venv-quix``, made by ``make bench``/``make bench-quick``, pinned by
  ``constraints-quix.txt``) as a child process; its time includes that interpreter's start and
  imports (about a second).

And under exactly-once (issue 13), same group: ``streamstate`` with
``processing.guarantee=exactly_once_v2`` (1 s commits like the others, and EOS's default 100 ms),
and ``quix-streams`` with ``processing_guarantee="exactly-once"``. Queries see committed writes
only under exactly-once, so every ``streamstate`` round ends once the store shows every count
(under exactly-once: after the commit following the last record, at most one interval later).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from benches._common import size
from confluent_kafka import Consumer, Producer

from streamstate import PersistentKeyValueStore, StampedRecord
from streamstate.app import ProcessorContext, State, StreamsApp, Topology
from streamstate.kafka_local import KafkaTestCluster

N = size(1_000_000)
USERS = 10_000
ROUNDS = 2


@pytest.fixture(scope="module")
def clicks(kafka: KafkaTestCluster) -> str:
    topic = kafka.create_topic(f"bench-clicks-{uuid.uuid4().hex[:8]}", partitions=1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 50})
    for i in range(N):
        while True:
            try:
                producer.produce(topic, b"click", b"user-%05d" % ((i * 7919) % USERS))
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    return topic


def _streamstate_count(
    kafka: KafkaTestCluster,
    topic: str,
    guarantee: str = "at_least_once",
    commit_interval_ms: int = 1000,
) -> int:
    sink = kafka.create_topic(partitions=1)
    done = threading.Event()
    seen = [0]
    topology = Topology().add_store("counts")

    @topology.processor(sources=[topic], stores=["counts"], sinks=[sink])
    def count(ctx: ProcessorContext, record: StampedRecord) -> None:
        store = ctx.store("counts")
        n = int(store.get(record.key) or b"0") + 1
        store.put(record.key, b"%d" % n)
        ctx.send(sink, record.key, b"%d" % n)
        seen[0] += 1
        if seen[0] == N:
            done.set()

    with tempfile.TemporaryDirectory() as state_dir:
        app = StreamsApp(
            topology,
            {
                "application.id": f"bench-count-{uuid.uuid4().hex[:8]}",
                "bootstrap.servers": kafka.bootstrap_servers,
                "state.dir": state_dir,
                "commit.interval.ms": commit_interval_ms,
                "processing.guarantee": guarantee,
            },
        )
        app.start()
        try:
            assert done.wait(600), "streamstate did not count every record in time"
            assert app.state is State.RUNNING
            # Under exactly-once, queries see committed writes only: the count ends when the
            # last commit has made every record's count visible (at once under at-least-once).
            deadline = time.monotonic() + 120
            while (total := sum(int(v) for _, v in app.store("counts").all())) < N:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            return total
        finally:
            app.close(60)


def _plain_python_count(kafka: KafkaTestCluster, topic: str) -> int:
    sink = kafka.create_topic(partitions=1)
    changelog = kafka.create_topic(partitions=1, config={"cleanup.policy": "compact"})
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"bench-plain-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True, "linger.ms": 5}
    )
    consumer.subscribe([topic])
    seen = 0
    last_commit = time.monotonic()
    with tempfile.TemporaryDirectory() as d, PersistentKeyValueStore("counts", Path(d)) as store:
        try:
            while seen < N:
                for message in consumer.consume(5000, 0.1):
                    if message.error() is not None:
                        continue
                    key: Any = message.key()
                    n = int(store.get(key) or b"0") + 1
                    value = b"%d" % n
                    store.put(key, value)
                    for target in (changelog, sink):
                        while True:
                            try:
                                producer.produce(target, value, key)
                                break
                            except BufferError:
                                producer.poll(0.05)
                    seen += 1
                producer.poll(0)
                if time.monotonic() - last_commit >= 1.0:
                    producer.flush(30)
                    store.flush()
                    consumer.commit(asynchronous=False)
                    last_commit = time.monotonic()
            producer.flush(30)
            return sum(int(v) for _, v in store.all())
        finally:
            consumer.close()


@pytest.mark.benchmark(group="stateful-count")
def bench_streamstate_app(benchmark, kafka: KafkaTestCluster, clicks: str) -> None:
    assert benchmark.pedantic(_streamstate_count, args=(kafka, clicks), rounds=ROUNDS) == N


@pytest.mark.benchmark(group="stateful-count")
def bench_plain_python_loop(benchmark, kafka: KafkaTestCluster, clicks: str) -> None:
    assert benchmark.pedantic(_plain_python_count, args=(kafka, clicks), rounds=ROUNDS) == N


_QUIX_SCRIPT = Path(__file__).parent / "peers" / "quix_count.py"


def _quix_python() -> str:
    python = os.environ.get("STREAMSTATE_QUIX_PYTHON") or str(
        Path(__file__).parent.parent / ".venv-quix" / "bin" / "python"
    )
    if not os.path.exists(python):
        pytest.fail(f"no Quix Streams virtualenv at {python}: run `make bench` (it makes one)")
    return python


def _quix_count(kafka: KafkaTestCluster, topic: str, guarantee: str = "at-least-once") -> int:
    sink = kafka.create_topic(partitions=1)
    with tempfile.TemporaryDirectory() as state_dir:
        out = subprocess.run(
            [
                _quix_python(),
                str(_QUIX_SCRIPT),
                kafka.bootstrap_servers,
                topic,
                sink,
                str(N),
                state_dir,
                guarantee,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
        )
    assert out.returncode == 0, out.stderr[-3000:]
    return int(out.stdout.split()[-1])


@pytest.mark.benchmark(group="stateful-count")
def bench_quix_streams(benchmark, kafka: KafkaTestCluster, clicks: str) -> None:
    assert benchmark.pedantic(_quix_count, args=(kafka, clicks), rounds=ROUNDS) == N


# Exactly-once (issue 13) beside the contenders above, in the same group: the same count with
# ``processing.guarantee=exactly_once_v2`` (a transaction per commit, the store's writes held
# until it commits, read_committed input), at the same 1 s commit interval and at EOS's default
# 100 ms; and Quix Streams' ``processing_guarantee="exactly-once"`` (1 s, as its at-least-once).


@pytest.mark.benchmark(group="stateful-count")
def bench_streamstate_app_exactly_once(benchmark, kafka: KafkaTestCluster, clicks: str) -> None:
    args = (kafka, clicks, "exactly_once_v2", 1000)
    assert benchmark.pedantic(_streamstate_count, args=args, rounds=ROUNDS) == N


@pytest.mark.benchmark(group="stateful-count")
def bench_streamstate_app_exactly_once_100ms(
    benchmark, kafka: KafkaTestCluster, clicks: str
) -> None:
    args = (kafka, clicks, "exactly_once_v2", 100)
    assert benchmark.pedantic(_streamstate_count, args=args, rounds=ROUNDS) == N


@pytest.mark.benchmark(group="stateful-count")
def bench_quix_streams_exactly_once(benchmark, kafka: KafkaTestCluster, clicks: str) -> None:
    args = (kafka, clicks, "exactly-once")
    assert benchmark.pedantic(_quix_count, args=args, rounds=ROUNDS) == N
