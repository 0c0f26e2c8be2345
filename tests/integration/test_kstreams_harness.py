"""The peer harness of the benchmarks is real and correct: Kafka Streams 4.4 itself (the
project's Java programs in ``benches/kstreams/``) and kcat, on the real broker.

The first test of a fresh machine fetches Kafka Streams with Maven and compiles the programs
(``make kstreams`` does it beforehand, and installs kcat).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from benches import _kstreams

from streamstate.kafka_local import KafkaTestCluster

TIMEOUT_S = 180.0


@pytest.fixture
def application_id(kafka: KafkaTestCluster) -> Iterator[str]:
    application_id = f"harness-{uuid.uuid4().hex[:10]}"
    yield application_id
    _kstreams.delete_application(kafka.admin, application_id)


def test_restore_bench_restores_exactly_the_changelog(
    kafka: KafkaTestCluster, application_id: str, tmp_path: Path
) -> None:
    changelog = kafka.create_topic(f"{application_id}-store-changelog", partitions=2)
    kafka.create_topic(f"{application_id}-input", partitions=2)
    # 300 keys written 1,500 times, then one key deleted: the store must end with each key's
    # last value and without the deleted key.
    records: list[tuple[bytes, bytes | None]] = [
        (b"k%03d" % (i % 300), b"v%05d" % i) for i in range(1500)
    ]
    records.append((b"k007", None))
    kafka.produce(changelog, records)

    report = _kstreams.run_restore_bench(
        kafka.bootstrap_servers,
        application_id,
        "store",
        tmp_path / "state",
        probe_keys=[b"k299", b"k007", b"k000", b"never-written"],
        timeout_s=TIMEOUT_S,
    )
    assert report.kafka_streams_version == _kstreams.KSTREAMS_VERSION
    assert report.restored == len(records)
    assert report.partitions_restored == 2
    assert report.probes == {
        b"k299": b"v01499",
        b"k007": None,
        b"k000": b"v01200",
        b"never-written": None,
    }
    assert report.restore_s > 0
    assert report.restore_cpu_s > 0
    assert report.start_to_running_s >= report.restore_s


def test_restore_bench_refuses_a_state_dir_that_is_not_empty(
    kafka: KafkaTestCluster, application_id: str, tmp_path: Path
) -> None:
    (tmp_path / "left-over").write_text("x")
    with pytest.raises(_kstreams.PeerError, match="is not empty"):
        _kstreams.run_restore_bench(
            kafka.bootstrap_servers, application_id, "store", tmp_path, timeout_s=TIMEOUT_S
        )


def _sink_counts(kafka: KafkaTestCluster, topic: str, expected: dict[str, int]) -> dict[str, int]:
    """The last value of each key in ``topic``: read until it equals ``expected`` or a deadline
    passes (the records are all written before WordCount exits; this only waits for the read)."""
    consumer = kafka.consumer()
    consumer.subscribe([topic])
    counts: dict[str, int] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                counts[message.key().decode()] = int(message.value())
        if counts == expected:
            break
    return counts


def test_word_count_counts_exactly_what_python_counts(
    kafka: KafkaTestCluster, application_id: str, tmp_path: Path
) -> None:
    source = kafka.create_topic(f"{application_id}-lines", partitions=2)
    sink = kafka.create_topic(f"{application_id}-counts", partitions=2)
    rng = random.Random(15)
    vocabulary = [f"w{i}" for i in range(40)] + ["Kafka", "kafka", "KAFKA", "x"]
    lines = [
        " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 9)))
        + ("\t  " if i % 4 == 0 else "")
        for i in range(800)
    ]
    kafka.produce(source, [(None, line) for line in lines])
    expected = _kstreams.word_counts(lines)

    report = _kstreams.run_word_count(
        kafka.bootstrap_servers,
        application_id,
        source,
        sink,
        lines=len(lines),
        state_dir=tmp_path / "state",
        timeout_s=TIMEOUT_S,
    )
    assert report.lines == len(lines)
    assert report.words == sum(expected.values())
    assert report.total_count == report.words
    assert report.distinct_words == len(expected)
    assert expected["kafka"] > 0 and "Kafka" not in expected
    assert _sink_counts(kafka, sink, expected) == expected


def test_kcat_reads_every_record_of_every_partition(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(partitions=3)
    kafka.produce(topic, [(b"k%d" % i, b"v" * 100) for i in range(2000)])

    to_the_end = _kstreams.kcat_consume(kafka.bootstrap_servers, topic, timeout_s=TIMEOUT_S)
    assert to_the_end.records == 2000
    counted = _kstreams.kcat_consume(
        kafka.bootstrap_servers, topic, records=1500, timeout_s=TIMEOUT_S
    )
    assert counted.records == 1500
