"""A windowed left join of two streams through ``StreamsApp`` on the real broker, over 4
partitions, exact, across a restart that restores the join's stores from their changelogs.

Each key has a left record; a third of them a right record within the window (joined), a third
a right record outside it, a third none. A left record without a match is emitted with ``None``
only once its window has closed, when a later record of its partition moves the stream time on;
the last ones of each partition are still waiting when the app closes. The app restarts from an
empty state directory (so the waiting records can only come from the outer-join store's
changelog) and one late record per partition closes their windows: every left record is then
emitted exactly once, joined or with ``None``.

The premises: everything is produced before the app starts, so each task sees both topics and
processes by timestamp (no record is late); the emit interval is 0 (Kafka's default throttles
emitting to once per wall-clock second, which would make the first phase's output depend on
timing); the first phase has committed every input record before the app closes."""

from __future__ import annotations

import collections
import time
import uuid
from pathlib import Path
from typing import Any

from tests.integration.test_dsl_app import assert_same_records, read_all
from tests.integration.test_dsl_join_app import _wait_committed
from tests.integration.test_streams_app import new_app

from streamstate import JoinWindows, Serdes, StreamsApp, StreamsBuilder, Topology
from streamstate.kafka_local import KafkaTestCluster

STRING = Serdes.String()
KEYS = 300
# Event time a minute back, not at a fixed date: the changelogs of the join's two window stores
# are cleanup.policy=delete with retention.ms the windows plus a day, and the broker's retention
# check (every 5 minutes) empties them of records years old, so the restarted app would restore
# those stores empty (the waiting left records come from the compacted outer-join store).
BASE = (int(time.time() * 1000) // 1000 - 60) * 1000


def left_join_topology(left: str, right: str, out: str) -> Topology:
    """``left`` left-joined with ``right`` within 100 ms (no grace): ``"L+R"`` or ``"L+null"``."""
    builder = StreamsBuilder()
    clicks = builder.stream(left, key_serde=STRING, value_serde=STRING)
    views = builder.stream(right, key_serde=STRING, value_serde=STRING)
    (
        clicks.left_join(
            views,
            lambda click, view: f"{click}+{'null' if view is None else view}",
            JoinWindows.of_time_difference_with_no_grace(100),
            emit_interval_ms=0,
        ).to(out, key_serde=STRING, value_serde=STRING)
    )
    return builder.build()


def make_data() -> tuple[
    list[tuple[str, str, int]], list[tuple[str, str, int]], collections.Counter[Any]
]:
    """Left and right records, and the final output as a multiset of ``(key, value, ts)``."""
    left, right = [], []
    expected: collections.Counter[Any] = collections.Counter()
    for i in range(KEYS):
        key, at = f"k{i}", BASE + 10 * i
        left.append((key, f"L{i}", at))
        if i % 3 == 0:
            right.append((key, f"R{i}", at + 50))
            expected[(key, f"L{i}+R{i}", at + 50)] += 1
        else:
            if i % 3 == 1:
                right.append((key, f"R{i}", at + 150))  # outside the window
            expected[(key, f"L{i}+null", at)] += 1
    return left, right, expected


def test_a_left_join_emits_unmatched_records_once_their_window_closes_across_a_restore(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    left_topic, right_topic, out = (kafka.create_topic(partitions=4) for _ in range(3))
    left, right, expected = make_data()
    kafka.produce(left_topic, left)
    kafka.produce(right_topic, sorted(right, key=lambda r: r[2]))
    app_id = f"dsl-ssj-{uuid.uuid4().hex[:8]}"
    topology = left_join_topology(left_topic, right_topic, out)
    app = new_app(apps, kafka, topology, tmp_path / "first", app_id)
    app.start()
    _wait_committed(kafka, app_id, left_topic, len(left), "every left record")
    _wait_committed(kafka, app_id, right_topic, len(right), "every right record")
    assert app.close(60)
    written = sum(kafka.end_offsets(out).values())
    first = read_all(
        kafka,
        out,
        STRING.deserializer,
        STRING.deserializer,
        until=lambda rs: len(rs) >= written,
        what="the first run's output",
    )
    first_counted = collections.Counter(first)
    assert first_counted <= expected  # nothing twice, nothing unexpected
    waiting = expected - first_counted
    # The premise: some left records are still waiting for their window to close, and none of
    # the joined ones (emitted at once).
    assert waiting
    assert all(value.endswith("+null") for _, value, _ in waiting)
    # The join's stores and their changelogs are Kafka's.
    changelog = f"{app_id}-KSTREAM-OUTERSHARED-0000000004-store-changelog"
    assert sum(kafka.end_offsets(changelog).values()) > 0

    restarted = new_app(apps, kafka, topology, tmp_path / "second", app_id)
    restarted.start()
    late = BASE + 10 * KEYS + 1_000
    for partition in range(4):
        kafka.produce(left_topic, [("flush", "flush", late)], partition=partition)
    total = sum(expected.values())
    records = read_all(
        kafka,
        out,
        STRING.deserializer,
        STRING.deserializer,
        until=lambda rs: len(rs) >= total,
        what="every left record, joined or with None",
    )
    assert_same_records(records, expected)
