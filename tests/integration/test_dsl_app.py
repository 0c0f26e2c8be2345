"""DSL programs through ``StreamsApp`` on the real broker, over 4 partitions, exact: a windowed
count, a session count with suppression, a table aggregation whose rows move between groups,
and the DSL word count under ``exactly_once_v2`` across a SIGKILL. Every expected result is
computed here from what the test produced."""

from __future__ import annotations

import collections
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import ConfigResource, ResourceType
from tests.apps import kill_word_count_mid_stream, start_app_child, wait_until
from tests.integration.test_processor_graphs import make_lines, word_counts
from tests.integration.test_streams_app import new_app

from streamstate import (
    BufferConfig,
    Materialized,
    Serdes,
    SessionWindows,
    StreamsApp,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Windowed,
)
from streamstate.dsl.windowed_serde import SessionWindowedDeserializer, TimeWindowedDeserializer
from streamstate.examples.word_count import word_count_topology
from streamstate.kafka_local import KafkaTestCluster

STRING = Serdes.String()
LONG = Serdes.Long()
MINUTE = 60_000
# Event time starts here, not at 0: a record produced with timestamp 0 is stamped with the
# wall-clock time by the producer.
BASE = 1_700_000_000_000


def read_all(
    kafka: KafkaTestCluster, topic: str, key_de: Any, value_de: Any, *, until: Any, what: str
) -> list[tuple[Any, Any, int]]:
    """Every record of ``topic`` (deserialized key, value, timestamp) until ``until(records)``
    holds, read committed (what a downstream consumer of an exactly-once app reads)."""
    consumer = kafka.consumer(**{"isolation.level": "read_committed"})
    consumer.subscribe([topic])
    records: list[tuple[Any, Any, int]] = []

    def done() -> bool:
        for m in consumer.consume(5000, 0.5):
            if m.error() is None:
                records.append(
                    (
                        key_de.deserialize(topic, m.key()),
                        value_de.deserialize(topic, m.value()),
                        m.timestamp()[1],
                    )
                )
        return bool(until(records))

    try:
        wait_until(done, what)
    finally:
        consumer.close()
    return records


def assert_same_records(records: list[Any], expected: collections.Counter[Any]) -> None:
    """Fails unless ``records`` are ``expected`` as a multiset, saying how they differ in a few
    lines (how many are missing, repeated or unexpected, and a few of each) instead of a diff of
    tens of thousands of records."""
    got = collections.Counter(records)
    if got == expected:
        return
    missing, extra = expected - got, got - expected
    repeated = {r: n for r, n in extra.items() if r in expected}
    unexpected = {r: n for r, n in extra.items() if r not in expected}
    pytest.fail(
        f"{len(records)} records read, {sum(expected.values())} expected: "
        f"{sum(missing.values())} missing (e.g. {sorted(missing)[:3]}), "
        f"{sum(repeated.values())} repeated (e.g. {sorted(repeated)[:3]}), "
        f"{sum(unexpected.values())} unexpected (e.g. {sorted(unexpected)[:3]})",
        pytrace=False,
    )


def latest(records: list[tuple[Any, Any, int]]) -> dict[Any, Any]:
    """The last value per key (each key lives in one partition, so its order is kept)."""
    return {key: value for key, value, _ in records}


# Under exactly-once the windowed count's batch flush (dsl/count_flush.py) writes through the
# task's tracked transactional producer, as the general flush does.
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_a_windowed_count_counts_each_key_and_minute_exactly_over_four_partitions(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], guarantee: str
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    rng = random.Random(7)
    # 20k records over 40 keys and one hour of event time, in order per key; a grace of an
    # hour keeps every window open, so nothing is late and the counts are exact.
    records = [(f"user-{rng.randrange(40)}", "click", BASE + i * 180) for i in range(20_000)]
    kafka.produce(source, records)
    expected = collections.Counter((key, ts // MINUTE * MINUTE) for key, _, ts in records)

    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde=STRING, value_serde=STRING)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(MINUTE, 60 * MINUTE))
        .count(materialized="clicks-per-minute")
        .to_stream()
        .to(sink, value_serde=LONG)
    )
    app = new_app(
        apps,
        kafka,
        builder.build(),
        tmp_path,
        f"dsl-win-{uuid.uuid4().hex[:8]}",
        **{"processing.guarantee": guarantee},
    )
    app.start()

    key_de = TimeWindowedDeserializer(STRING.deserializer, MINUTE)
    seen = read_all(
        kafka,
        sink,
        key_de,
        LONG.deserializer,
        until=lambda rs: {(k.key, k.window.start): v for k, v, _ in rs} == dict(expected),
        what="the sink's latest count of every key and minute",
    )
    # Result timestamps are the latest input timestamp of their window (Kafka's rule).
    last_ts = {}
    for key, _, ts in records:
        last_ts[(key, ts // MINUTE * MINUTE)] = ts
    for windowed, count, ts in seen:
        if count == expected[(windowed.key, windowed.window.start)]:
            assert ts == last_ts[(windowed.key, windowed.window.start)]
    # The store answers typed queries across the four partitions.
    store = app.store("clicks-per-minute")
    key = records[0][0]
    fetched = dict(store.fetch(key, BASE - MINUTE, BASE + 3_600_000))
    assert fetched == {start: n for (k, start), n in expected.items() if k == key}
    assert {(w.key, w.window.start): n for w, n in store.all()} == dict(expected)


def test_a_session_count_with_suppression_emits_each_final_session_once(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    gap = 5 * MINUTE
    rng = random.Random(11)
    # Per key, bursts of activity separated by more than the gap: each burst is one session.
    expected: dict[tuple[str, int, int], int] = {}
    records: list[tuple[str, str, int]] = []
    for k in range(24):
        key, t = f"user-{k}", BASE + rng.randrange(MINUTE)
        for _ in range(6):
            start, n = t, rng.randrange(1, 30)
            for _ in range(n):
                records.append((key, "view", t))
                t += rng.randrange(0, gap // 2)
            expected[(key, start, records[-1][2])] = n
            t = records[-1][2] + gap + 1 + rng.randrange(MINUTE)
    records.sort(key=lambda r: r[2])
    # One record per key far in the future closes every session above (stream time is per
    # task: each key's partition must see it).
    closing = [(f"user-{k}", "close", BASE + 10**9) for k in range(24)]
    kafka.produce(source, records + closing)

    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde=STRING, value_serde=STRING)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(gap))
        .count(materialized="sessions")
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to(sink, value_serde=LONG)
    )
    app = new_app(apps, kafka, builder.build(), tmp_path, f"dsl-ses-{uuid.uuid4().hex[:8]}")
    app.start()
    seen = read_all(
        kafka,
        sink,
        SessionWindowedDeserializer(STRING.deserializer),
        LONG.deserializer,
        until=lambda rs: len(rs) >= len(expected),
        what="every final session",
    )
    # Exactly one record per closed session, its final count; no intermediate results and no
    # tombstones of merged sessions get past the suppression.
    got = {(w.key, w.window.start, w.window.end): n for w, n, _ in seen}
    assert len(seen) == len(expected)
    assert got == expected
    assert all(isinstance(w, Windowed) for w, _, _ in seen)


def test_a_table_aggregation_moves_rows_between_groups_exactly(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    users, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    rng = random.Random(5)
    cities = [f"city-{i}" for i in range(12)]
    rows: dict[str, str | None] = {}
    records: list[tuple[str, str | None]] = []
    # Users move between cities and some leave (tombstones): the count per city subtracts a
    # user from the old city before adding it to the new one.
    for _ in range(6_000):
        user = f"user-{rng.randrange(500)}"
        city = None if rng.random() < 0.05 else rng.choice(cities)
        rows[user] = city
        records.append((user, city))
    kafka.produce(users, [(u, c, i + 1) for i, (u, c) in enumerate(records)])
    expected = collections.Counter(c for c in rows.values() if c is not None)
    final = {city: expected.get(city, 0) for city in cities if city in {c for _, c in records}}

    builder = StreamsBuilder()
    (
        builder.table(users, key_serde=STRING, value_serde=STRING)
        .group_by(lambda user, city: (city, user), key_serde=STRING, value_serde=STRING)
        .count(materialized="users-per-city")
        .to_stream()
        .to(sink, value_serde=LONG)
    )
    app = new_app(apps, kafka, builder.build(), tmp_path, f"dsl-tbl-{uuid.uuid4().hex[:8]}")
    app.start()
    read_all(
        kafka,
        sink,
        STRING.deserializer,
        LONG.deserializer,
        until=lambda rs: latest(rs) == final,
        what="the latest count of every city",
    )
    store = app.store("users-per-city")
    assert {city: n for city, n in store.all() if n} == dict(expected)
    assert store.get(cities[0]) == expected.get(cities[0], 0)


def test_the_dsl_word_count_under_exactly_once_counts_every_word_once_across_a_sigkill(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    text, out = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"dsl-wc-eos-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    lines = make_lines(40_000, seed=9)
    kafka.produce(text, [(None, line) for line in lines])
    expected = word_counts(lines)
    config = {
        "application.id": app_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "state.dir": str(state_dir),
        "session.timeout.ms": 6000,
        "processing.guarantee": "exactly_once_v2",
    }
    child = start_app_child(
        "from streamstate.examples.word_count import word_count_topology",
        f"word_count_topology({text!r}, {out!r})",
        config,
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
    final = dict(expected)
    records = read_all(
        kafka,
        out,
        STRING.deserializer,
        LONG.deserializer,
        until=lambda rs: latest(rs) == final,
        what="every word's final count, read committed",
    )
    # With the record cache, each word's counts on the sink rise and end at its count: a word
    # counted twice (a repeated transaction) would pass its count.
    per_word: dict[str, list[int]] = collections.defaultdict(list)
    for word, count, _ in records:
        per_word[word].append(count)
    for word, counts in per_word.items():
        assert counts == sorted(counts), word
        assert max(counts) == expected[word], word
    assert {w: app.store("counts").get(w) for w in expected} == final


def test_a_window_store_restored_after_its_segments_expired_holds_only_live_windows(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    # Segments are dropped without changelog tombstones (as Kafka drops them; the changelog
    # is compact,delete with the store's retention plus a day): a store rebuilt from its
    # changelog must still not serve the expired windows.
    source = kafka.create_topic(partitions=2)
    hour = 60 * MINUTE
    keys = [f"k{i}" for i in range(20)]
    # Six hours of event time, one record per key and minute: with a retention of one hour,
    # every segment but the last ones expires while the app runs. No record cache, so every
    # window reaches the changelog before it expires (a cached one often expires unwritten).
    # The hours end now, not at a fixed date: the broker deletes changelog records older than
    # the topic's retention.ms (the store's retention plus a day) whenever its retention check
    # runs (every 5 minutes), and a fixed date years back let it empty the changelog between
    # the two instances now and then (a clean-clone CI run timed out restoring it).
    base = (int(time.time() * 1000) // hour - 7) * hour
    records = [(key, "x", base + m * MINUTE) for m in range(6 * 60) for key in keys]
    kafka.produce(source, records)
    app_id = f"dsl-ret-{uuid.uuid4().hex[:8]}"

    def topology() -> Any:
        builder = StreamsBuilder()
        (
            builder.stream(source, key_serde=STRING, value_serde=STRING)
            .group_by_key()
            .windowed_by(TimeWindows.of_size_with_no_grace(MINUTE))
            .count(materialized=Materialized("per-minute", retention=hour, caching=False))
        )
        return builder.build()

    first = new_app(apps, kafka, topology(), tmp_path / "a", app_id)
    first.start()
    store_name = "per-minute"
    end = records[-1][2]

    def live(app: StreamsApp) -> dict[tuple[str, int], int]:
        try:
            return {(w.key, w.window.start): n for w, n in app.store(store_name).all()}
        except Exception:  # restoring or rebalancing: nothing to read yet
            return {}

    # The windows the retention keeps: those starting after the newest start minus an hour
    # (older ones are hidden at once and dropped with their segment).
    newest = end // MINUTE * MINUTE
    expected = {
        (key, ts // MINUTE * MINUTE): 1
        for key, _, ts in records
        if ts // MINUTE * MINUTE > newest - hour
    }
    wait_until(lambda: set(expected) <= set(live(first)), "the last hour counted")
    before = live(first)
    first.close()
    resource = ConfigResource(ResourceType.TOPIC, f"{app_id}-{store_name}-changelog")
    config = kafka.admin.describe_configs([resource])[resource].result(timeout=10)
    assert config["cleanup.policy"].value == "compact,delete"
    assert config["retention.ms"].value == str(hour + 86_400_000)

    # A new instance with an empty state directory restores the store from its changelog.
    second = new_app(apps, kafka, topology(), tmp_path / "b", app_id)
    second.start()
    wait_until(lambda: set(expected) <= set(live(second)), "the store restored")
    restored = live(second)
    # Segments are half an hour (Kafka's interval: retention / 2): every window of a segment
    # older than the live ones is gone, and the rest is what the first instance held.
    segment = hour // 2
    oldest_live_segment = (newest - hour) // segment * segment
    assert min(start for (_, start) in before) >= oldest_live_segment
    assert restored == before, "the restored store differs (an expired window came back?)"
    assert {k: v for k, v in restored.items() if k in expected} == expected
