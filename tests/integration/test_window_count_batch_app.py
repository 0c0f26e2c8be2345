"""A windowed count through ``StreamsApp`` on the real broker, over 4 partitions, with its batch
paths (runs of records from the task loop, the record-cache flush in one Rust call:
``dsl/count_flush.py``) on and off: the same exact final counts in the sink, the same
changelog (every window's count and timestamp), the same store answering queries and the same
``dropped-records-total``, each computed here from what the test produced."""

from __future__ import annotations

import collections
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.apps import wait_until
from tests.integration.test_streams_app import new_app
from tests.run_spy import spy_on_runs

from streamstate import Materialized, Serdes, StreamsApp, StreamsBuilder, TimeWindows
from streamstate.app import task_runs
from streamstate.dsl import count_flush as count_flush_module
from streamstate.dsl import window_processors
from streamstate.dsl.windowed_serde import TimeWindowedDeserializer
from streamstate.kafka_local import KafkaTestCluster

STRING = Serdes.String()
LONG = Serdes.Long()
MINUTE = 60_000
# Event time two hours back, not at a fixed date: the count's changelog is
# cleanup.policy=compact,delete with retention.ms its store's retention plus a day, and the
# broker's retention check (every 5 minutes) deleted records years old between the app writing
# them and the test reading them (a clean-clone CI run timed out on "every window in the
# changelog"). Two hours: each partition's ~2,000 records span under an hour of event time, and
# the broker refuses timestamps over an hour ahead.
BASE = (int(time.time() * 1000) // MINUTE - 120) * MINUTE
PARTITIONS = 4
# The window store's own entries (its segments' bounds) are logged after every window.
_META = b"\xff" * 8


def _inputs() -> list[dict[str, Any]]:
    """8k records, 40 keys, each key on a partition of its own choosing; event time moves
    forward by 0-3 s per record of a partition, and one record in ten goes back up to 3
    minutes (late for a window without grace when its window has closed)."""
    rng = random.Random(11)
    now = dict.fromkeys(range(PARTITIONS), BASE)
    records = []
    for i in range(8_000):
        user = rng.randrange(40)
        partition = user % PARTITIONS
        now[partition] += rng.randrange(3_000)
        timestamp = now[partition]
        if rng.random() < 0.1:
            timestamp -= rng.randrange(3 * MINUTE)
        records.append(
            {
                "key": f"user-{user}",
                "value": f"click-{i}",
                "timestamp": timestamp,
                "partition": partition,
            }
        )
    return records


def _expected(records: list[dict[str, Any]]) -> tuple[dict[tuple[str, int], tuple[int, int]], int]:
    """Per ``(key, window start)`` its ``(count, highest timestamp)``, and the records
    dropped as late: each partition is one task, whose stream time is the highest timestamp
    it has seen; a record whose window ended at or before it is late (no grace)."""
    windows: dict[tuple[str, int], tuple[int, int]] = {}
    observed = collections.defaultdict(lambda: -1)
    dropped = 0
    for record in records:
        partition, timestamp = record["partition"], record["timestamp"]
        observed[partition] = max(observed[partition], timestamp)
        start = timestamp - timestamp % MINUTE
        if start + MINUTE <= observed[partition]:
            dropped += 1
            continue
        count, highest = windows.get((record["key"], start), (0, -1))
        windows[(record["key"], start)] = (count + 1, max(highest, timestamp))
    return windows, dropped


def _read(kafka: KafkaTestCluster, topic: str, until: Any, what: str) -> dict[bytes, Any]:
    """The last ``(value, timestamp)`` of each key of ``topic``, read until ``until`` holds."""
    consumer = kafka.consumer()
    consumer.subscribe([topic])
    latest: dict[bytes, Any] = {}

    def done() -> bool:
        for m in consumer.consume(5000, 0.5):
            if m.error() is None:
                latest[m.key()] = (m.value(), m.timestamp()[1])
        return bool(until(latest))

    try:
        wait_until(done, what)
    finally:
        consumer.close()
    return latest


def _run(
    kafka: KafkaTestCluster,
    source: str,
    tmp_path: Path,
    apps: list[StreamsApp],
    *,
    expected: dict[tuple[str, int], tuple[int, int]],
    dropped: int,
) -> dict[str, Any]:
    sink = kafka.create_topic(partitions=PARTITIONS)
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde=STRING, value_serde=STRING)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(MINUTE))
        # Kept a day: every window stays in the store and its changelog (with the default
        # retention, size + grace, a window whose segment expired before the flush is only
        # forwarded, and which those are depends on when commits happen).
        .count(materialized=Materialized("counts", retention=24 * 60 * MINUTE))
        .to_stream()
        .to(sink, value_serde=LONG)
    )
    app_id = f"win-batch-{uuid.uuid4().hex[:8]}"
    app = new_app(apps, kafka, builder.build(), tmp_path / app_id, app_id)
    app.start()
    key_de = TimeWindowedDeserializer(STRING.deserializer, MINUTE)
    want_counts = {window: count for window, (count, _) in expected.items()}

    def sink_counts(latest: dict[bytes, Any]) -> dict[tuple[str, int], int]:
        out = {}
        for raw_key, (raw_value, _) in latest.items():
            windowed = key_de.deserialize(sink, raw_key)
            assert windowed is not None
            out[(windowed.key, windowed.window.start)] = int.from_bytes(raw_value, "big")
        return out

    in_sink = _read(
        kafka, sink, lambda latest: sink_counts(latest) == want_counts, "every final count"
    )
    changelog = _read(
        kafka,
        f"{app_id}-counts-changelog",
        lambda latest: sum(not k.startswith(_META) for k in latest) == len(expected),
        "every window in the changelog",
    )
    wait_until(
        lambda: int(app.metrics()["dropped-records-total"]) == dropped, "every late record counted"
    )
    return {
        "sink": {
            key: (value, timestamp)
            for key, (value, timestamp) in in_sink.items()
            if int.from_bytes(value, "big") == want_counts[_window(key)]
        },
        # Store key: segment (8) + key + window start (8); value: timestamp (8) + count (8).
        "changelog": {
            (raw_key[8:-8].decode(), int.from_bytes(raw_key[-8:], "big", signed=True)): (
                int.from_bytes(raw_value[8:], "big"),
                int.from_bytes(raw_value[:8], "big", signed=True),
                timestamp,
            )
            for raw_key, (raw_value, timestamp) in changelog.items()
            if not raw_key.startswith(_META)
        },
        "store": sorted((w.key, w.window.start, n) for w, n in app.store("counts").all()),
        "dropped": int(app.metrics()["dropped-records-total"]),
    }


def _window(raw_key: bytes) -> tuple[str, int]:
    return raw_key[:-8].decode(), int.from_bytes(raw_key[-8:], "big", signed=True)


def test_the_windowed_counts_batch_paths_give_the_general_paths_results(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = kafka.create_topic(partitions=PARTITIONS)
    records = _inputs()
    kafka.produce(source, records)
    expected, dropped = _expected(records)
    assert dropped > 100  # the premise: late records dropped and counted

    taken = spy_on_runs(monkeypatch)
    flushes: list[Any] = []
    real_init = count_flush_module.CountFlush.__init__

    def kept(flush: Any, processor: Any) -> None:
        real_init(flush, processor)
        flushes.append(flush)

    monkeypatch.setattr(count_flush_module.CountFlush, "__init__", kept)
    batch = _run(kafka, source, tmp_path, apps, expected=expected, dropped=dropped)
    assert max(taken) > 1  # runs of several records were taken
    assert sum(f.flushed for f in flushes) >= len(expected)  # every window written by it

    monkeypatch.setattr(task_runs, "RUNS", False)
    monkeypatch.setattr(window_processors, "BATCH_FLUSH", False)
    flushes.clear()
    taken.clear()
    general = _run(kafka, source, tmp_path, apps, expected=expected, dropped=dropped)
    assert not any(taken) and not flushes

    assert batch == general
    assert batch["dropped"] == dropped
    assert batch["store"] == sorted((k, start, n) for (k, start), (n, _) in expected.items())
    # The changelog carries each window's count, its highest timestamp in the value and as
    # the record's timestamp.
    assert batch["changelog"] == {
        window: (count, highest, highest) for window, (count, highest) in expected.items()
    }
    # The sink's final record of each window is stamped with its highest timestamp.
    assert {_window(k): ts for k, (_, ts) in batch["sink"].items()} == {
        window: highest for window, (_, highest) in expected.items()
    }
