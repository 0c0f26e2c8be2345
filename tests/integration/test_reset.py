"""``streamstate reset`` (Kafka's application reset tool) on the real broker, one test per
behaviour, ported from Kafka's ``ResetIntegrationTest``/``AbstractResetIntegrationTest`` and
``StreamsResetterTest``: refused while the group has members (and ``--force`` for a stopped
member whose session lasts), each reset position checked against the offsets the group then
has committed, internal topics deleted and user topics kept, ``--dry-run`` changing nothing,
unknown topics refused before anything changes, and an app re-run after a reset giving the
same counts again rather than doubled."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from tests.apps import wait_until

from streamstate import Serdes, StreamsApp
from streamstate.app.streams_group import (
    StreamsGroupMember,
    StreamsGroupTopology,
    Subtopology,
    Tasks,
)
from streamstate.errors import StreamsError
from streamstate.examples.word_count import word_count_topology
from streamstate.kafka_local import KafkaTestCluster
from streamstate.tools import reset_application
from streamstate.tools.reset import COORDINATOR_BUSY

BASE = 1_700_000_000_000
RECORDS = 10  # per partition


def reset(kafka: KafkaTestCluster, app: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``streamstate reset`` as an operator runs it."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "streamstate",
            "reset",
            "--bootstrap-server",
            kafka.bootstrap_servers,
            "--application-id",
            app,
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )


def committed(kafka: KafkaTestCluster, group: str, topic: str) -> dict[int, int | None]:
    """The offsets ``group`` has committed for each partition of ``topic`` (None: none)."""
    request = [TopicPartition(topic, p) for p in kafka.partitions(topic)]
    found: list[Any] = []

    def done() -> bool:
        # A fresh broker's group coordinator is still loading at first: asked again.
        futures = kafka.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, request)]
        )
        found[:] = futures[group].result().topic_partitions
        return not any(tp.error and tp.error.code() in COORDINATOR_BUSY for tp in found)

    wait_until(done, "the committed offsets")
    assert all(tp.error is None for tp in found), found
    return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in found}


def commit(kafka: KafkaTestCluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commits ``offsets`` for ``group`` as a stopped app leaves them."""
    request = [TopicPartition(topic, p, o) for p, o in offsets.items()]
    errors: list[Any] = []

    def done() -> bool:
        # A fresh broker's group coordinator is still loading at first: asked again.
        futures = kafka.admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, request)]
        )
        errors[:] = [tp.error for tp in futures[group].result().topic_partitions if tp.error]
        return not errors or not all(e.code() in COORDINATOR_BUSY for e in errors)

    wait_until(done, "the offsets committed")
    assert not errors, errors


def topics(kafka: KafkaTestCluster) -> set[str]:
    """The topics the broker lists now."""
    return set(kafka.admin.list_topics(timeout=10).topics)


def new_app_id() -> str:
    return f"reset-{uuid.uuid4().hex[:8]}"


def input_topic(kafka: KafkaTestCluster, timestamps: list[int] | None = None) -> str:
    """Two partitions of ``RECORDS`` records each, record ``i`` of each partition stamped
    ``timestamps[i]`` (``BASE + i`` seconds by default): offset ``i`` has that time."""
    topic = kafka.create_topic(partitions=2)
    stamps = timestamps or [BASE + i * 1000 for i in range(RECORDS)]
    kafka.produce(
        topic,
        [
            {"key": f"k{i}", "value": "v", "timestamp": stamps[i], "partition": p}
            for p in (0, 1)
            for i in range(RECORDS)
        ],
    )
    return topic


def joined_consumer(kafka: KafkaTestCluster, group: str, topic: str) -> Consumer:
    """A live member of ``group``, holding partitions of ``topic``."""
    consumer = kafka.adopt(
        Consumer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "group.id": group,
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
            }
        )
    )
    consumer.subscribe([topic])
    wait_until(lambda: (consumer.poll(0.2), bool(consumer.assignment()))[1], "the assignment")
    return consumer


# -- refusals ----------------------------------------------------------------------------------


def test_a_reset_is_refused_while_the_group_has_an_active_member(kafka: KafkaTestCluster) -> None:
    app = new_app_id()
    topic = input_topic(kafka)
    changelog = kafka.create_topic(f"{app}-store-changelog")
    commit(kafka, app, topic, {0: 7, 1: 8})
    member = joined_consumer(kafka, app, topic)
    described = kafka.admin.describe_consumer_groups([app])[app].result()
    member_id = described.members[0].member_id

    out = reset(kafka, app, "--input-topics", topic)

    assert out.returncode != 0
    error = out.stderr.strip().splitlines()
    assert len(error) == 1, out.stderr
    assert f"Consumer group '{app}' is still active" in error[0]
    assert member_id in error[0]
    assert "--force" in error[0]
    member.poll(0.1)
    assert committed(kafka, app, topic) == {0: 7, 1: 8}
    assert changelog in topics(kafka)


_SLEEPY_MEMBER = """
import sys, time
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                     "session.timeout.ms": 120000, "enable.auto.commit": False})
consumer.subscribe([sys.argv[3]])
while not consumer.assignment():
    consumer.poll(0.2)
print("joined", flush=True)
time.sleep(600)
"""


def test_force_removes_a_stopped_member_whose_session_has_not_expired(
    kafka: KafkaTestCluster,
) -> None:
    # Kafka's testResetWhenLongSessionTimeoutConfiguredWithForceOption: an instance killed
    # with a two-minute session stays a member; the reset refuses until --force removes it.
    app = new_app_id()
    topic = input_topic(kafka)
    commit(kafka, app, topic, {0: 7, 1: 8})
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(_SLEEPY_MEMBER),
            kafka.bootstrap_servers,
            app,
            topic,
        ],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "joined"
        finally:
            child.kill()
    (stopped,) = kafka.admin.describe_consumer_groups([app])[app].result().members

    refused = reset(kafka, app, "--input-topics", topic)
    assert refused.returncode != 0 and "still active" in refused.stderr
    assert committed(kafka, app, topic) == {0: 7, 1: 8}

    forced = reset(kafka, app, "--input-topics", topic, "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"Force removing the active members: {stopped.member_id}" in forced.stdout
    assert "Removed 1 active member(s)" in forced.stdout
    assert kafka.admin.describe_consumer_groups([app])[app].result().members == []
    assert committed(kafka, app, topic) == {0: 0, 1: 0}


def test_a_reset_is_refused_while_a_streams_group_has_a_member(kafka: KafkaTestCluster) -> None:
    # librdkafka's describe reports a streams group (group.protocol=streams) as a dead classic
    # group with no member; the reset must still see the member and refuse.
    app = new_app_id()
    topic = input_topic(kafka)
    member = StreamsGroupMember(
        kafka.bootstrap_servers,
        app,
        StreamsGroupTopology((Subtopology("0", source_topics=(topic,)),)),
    )
    member.heartbeat(Tasks())
    try:
        with pytest.raises(StreamsError, match=f"Streams group '{app}' is still active") as info:
            reset_application(kafka.bootstrap_servers, app, input_topics=[topic], force=True)
        assert member.member_id in str(info.value)
    finally:
        member.leave()
    assert committed(kafka, app, topic) == {0: None, 1: None}


def test_unknown_topics_are_refused_before_anything_changes(kafka: KafkaTestCluster) -> None:
    # Kafka's shouldNotAllowToResetWhenInputTopicAbsent / ...IntermediateTopicAbsent /
    # ...SpecifiedInternalTopicDoesNotExist / ...IsNotInternal: exit 1. Here nothing changes
    # either (Kafka goes on deleting the internal topics).
    app = new_app_id()
    topic = input_topic(kafka)
    changelog = kafka.create_topic(f"{app}-store-changelog")
    commit(kafka, app, topic, {0: 7, 1: 8})
    missing = f"no-such-topic-{uuid.uuid4().hex[:6]}"
    for args in (
        ("--input-topics", f"{topic},{missing}"),
        ("--intermediate-topics", missing),
        ("--internal-topics", missing),
        ("--internal-topics", topic),
    ):
        out = reset(kafka, app, *args)
        assert out.returncode != 0, args
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert (missing if missing in args[1] else topic) in out.stderr
        assert committed(kafka, app, topic) == {0: 7, 1: 8}, args
        assert changelog in topics(kafka), args


# -- positions ---------------------------------------------------------------------------------


def test_to_earliest_is_the_default_and_goes_to_the_log_start(kafka: KafkaTestCluster) -> None:
    app = new_app_id()
    topic = input_topic(kafka)
    kafka.delete_records(topic, 0, 3)
    commit(kafka, app, topic, {0: 8, 1: 9})
    out = reset(kafka, app, "--input-topics", topic)
    assert out.returncode == 0, out.stderr
    assert committed(kafka, app, topic) == {0: 3, 1: 0}
    assert f"{topic} partition 0: 8 -> 3" in out.stdout
    commit(kafka, app, topic, {0: 8, 1: 9})
    assert reset(kafka, app, "--input-topics", topic, "--to-earliest").returncode == 0
    assert committed(kafka, app, topic) == {0: 3, 1: 0}


def test_to_latest(kafka: KafkaTestCluster) -> None:
    app = new_app_id()
    topic = input_topic(kafka)
    commit(kafka, app, topic, {0: 2})
    assert reset(kafka, app, "--input-topics", topic, "--to-latest").returncode == 0
    assert committed(kafka, app, topic) == {0: RECORDS, 1: RECORDS}


def test_to_offset_is_clamped_to_each_partitions_range(kafka: KafkaTestCluster) -> None:
    # StreamsResetterTest's testResetToSpecificOffset...: between, before the beginning, after
    # the end.
    app = new_app_id()
    topic = input_topic(kafka)
    kafka.delete_records(topic, 0, 5)
    commit(kafka, app, topic, {0: 9, 1: 9})
    out = reset(kafka, app, "--input-topics", topic, "--to-offset", "4")
    assert out.returncode == 0, out.stderr
    assert committed(kafka, app, topic) == {0: 5, 1: 4}
    assert "before the earliest offset 5" in out.stdout
    assert reset(kafka, app, "--input-topics", topic, "--to-offset", "99").returncode == 0
    assert committed(kafka, app, topic) == {0: RECORDS, 1: RECORDS}


def test_to_datetime_goes_to_the_first_record_at_or_after_it(kafka: KafkaTestCluster) -> None:
    # Kafka's testReprocessingFromDateTimeAfterReset...: offset i is stamped BASE + i s.
    app = new_app_id()
    topic = input_topic(kafka)
    commit(kafka, app, topic, {0: 9, 1: 9})
    when = datetime.fromtimestamp((BASE + 4_500) / 1000, tz=timezone.utc)
    text = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}"
    assert reset(kafka, app, "--input-topics", topic, "--to-datetime", text).returncode == 0
    assert committed(kafka, app, topic) == {0: 5, 1: 5}
    # With a zone: the same instant an hour later on the wall clock of UTC+01:00.
    zoned = (when + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+01:00"
    commit(kafka, app, topic, {0: 9, 1: 9})
    assert reset(kafka, app, "--input-topics", topic, "--to-datetime", zoned).returncode == 0
    assert committed(kafka, app, topic) == {0: 5, 1: 5}
    # After every record: the end (StreamsResetter falls back to the latest offset).
    out = reset(kafka, app, "--input-topics", topic, "--to-datetime", "2100-01-01T00:00:00.000")
    assert out.returncode == 0, out.stderr
    assert committed(kafka, app, topic) == {0: RECORDS, 1: RECORDS}


def test_by_duration_goes_back_that_long_from_now(kafka: KafkaTestCluster) -> None:
    # Record i is stamped (10 - i) hours ago; PT4H30M back reaches offset 6 (4 hours ago).
    # Half-hour margins on both sides make the premise independent of how long this takes.
    now = int(time.time() * 1000)
    app = new_app_id()
    topic = input_topic(kafka, [now - (RECORDS - i) * 3_600_000 for i in range(RECORDS)])
    commit(kafka, app, topic, {0: 1, 1: 9})
    out = reset(kafka, app, "--input-topics", topic, "--by-duration", "PT4H30M")
    assert out.returncode == 0, out.stderr
    assert committed(kafka, app, topic) == {0: 6, 1: 6}
    assert reset(kafka, app, "--input-topics", topic, "--by-duration", "P1D").returncode == 0
    assert committed(kafka, app, topic) == {0: 0, 1: 0}


def test_shift_by_moves_the_committed_offset_within_the_range(kafka: KafkaTestCluster) -> None:
    # StreamsResetterTest's testShiftOffsetBy...: partition 1 has no committed offset, so it
    # shifts from the end, where Kafka's consumer (auto.offset.reset=latest) would start.
    app = new_app_id()
    topic = input_topic(kafka)
    commit(kafka, app, topic, {0: 5})
    assert reset(kafka, app, "--input-topics", topic, "--shift-by", "-3").returncode == 0
    assert committed(kafka, app, topic) == {0: 2, 1: RECORDS - 3}
    assert reset(kafka, app, "--input-topics", topic, "--shift-by", "-5").returncode == 0
    assert committed(kafka, app, topic) == {0: 0, 1: RECORDS - 8}
    assert reset(kafka, app, "--input-topics", topic, "--shift-by", "20").returncode == 0
    assert committed(kafka, app, topic) == {0: RECORDS, 1: RECORDS}


def test_from_file_and_intermediate_topics_to_their_end(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    app = new_app_id()
    topic, intermediate = input_topic(kafka), input_topic(kafka)
    commit(kafka, app, topic, {0: 9, 1: 9})
    commit(kafka, app, intermediate, {0: 1, 1: 1})
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,2\n{topic},1,12\n")
    out = reset(
        kafka,
        app,
        "--input-topics",
        topic,
        "--intermediate-topics",
        intermediate,
        "--from-file",
        str(plan),
    )
    assert out.returncode == 0, out.stderr
    assert committed(kafka, app, topic) == {0: 2, 1: RECORDS}
    assert committed(kafka, app, intermediate) == {0: RECORDS, 1: RECORDS}


# -- internal topics, dry run -------------------------------------------------------------------


def _app_topics(kafka: KafkaTestCluster, app: str) -> tuple[set[str], set[str]]:
    internal = {
        kafka.create_topic(f"{app}-counts-changelog"),
        kafka.create_topic(f"{app}-words-repartition"),
        kafka.create_topic(f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic"),
        kafka.create_topic(f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic"),
        kafka.create_topic(f"{app}-orders-subscription-registration-topic"),
        kafka.create_topic(f"{app}-orders-subscription-response-topic"),
    }
    user = {
        kafka.create_topic(f"{app}-output"),  # the app's prefix but no internal suffix
        kafka.create_topic(f"{app}x-counts-changelog"),  # another app's prefix
        kafka.create_topic(f"other-{app}-counts-changelog"),
    }
    return internal, user


def test_internal_topics_are_deleted_and_user_topics_kept(kafka: KafkaTestCluster) -> None:
    app = new_app_id()
    internal, user = _app_topics(kafka, app)
    # An input topic named like an internal one is an input topic (KAFKA-7930).
    named_like_internal = kafka.create_topic(f"{app}-input-changelog")
    out = reset(kafka, app, "--input-topics", named_like_internal)
    assert out.returncode == 0, out.stderr
    after = topics(kafka)
    assert internal.isdisjoint(after), internal & after
    assert user <= after and named_like_internal in after
    for topic in internal:
        assert topic in out.stdout


def test_internal_topics_narrows_the_deletion_to_those_given(kafka: KafkaTestCluster) -> None:
    # Kafka's testResetWhenInternalTopicsAreSpecified.
    app = new_app_id()
    internal, user = _app_topics(kafka, app)
    chosen = f"{app}-counts-changelog"
    out = reset(kafka, app, "--internal-topics", chosen)
    assert out.returncode == 0, out.stderr
    after = topics(kafka)
    assert chosen not in after
    assert (internal - {chosen}) | user <= after


def test_dry_run_changes_nothing(kafka: KafkaTestCluster, tmp_path: Path) -> None:
    app = new_app_id()
    topic = input_topic(kafka)
    internal, _ = _app_topics(kafka, app)
    commit(kafka, app, topic, {0: 8, 1: 9})
    store = tmp_path / app / "0_0" / "counts"
    store.mkdir(parents=True)
    (store / "data").write_bytes(b"x")
    before = (committed(kafka, app, topic), topics(kafka))

    out = reset(kafka, app, "--input-topics", topic, "--dry-run", "--state-dir", str(tmp_path))

    assert out.returncode == 0, out.stderr
    assert (committed(kafka, app, topic), topics(kafka)) == before
    assert (store / "data").read_bytes() == b"x"
    assert out.stdout.startswith("Dry run")
    assert f"{topic} partition 0: 8 -> 0" in out.stdout
    assert f"{topic} partition 1: 9 -> 0" in out.stdout
    assert all(t in out.stdout for t in internal)
    assert f"would delete {tmp_path / app}" in out.stdout


# -- the whole reset: a re-run reproduces the output ---------------------------------------------


def test_a_rerun_after_a_reset_counts_from_the_start_again(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    # Kafka's testReprocessingFromScratchAfterResetWithoutIntermediateUserTopic, with the DSL
    # word count (a repartition topic and a changelog) through StreamsApp: the second run gives
    # the same counts, not doubled ones (its state restored from an undeleted changelog, or
    # kept in the state directory, would double them).
    app_id = new_app_id()
    source, sink = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    lines = [f"w{i % 7} w{i % 3} common" for i in range(60)]
    kafka.produce(source, [(None, line) for line in lines])
    expected: dict[str, int] = {}
    for line in lines:
        for word in line.split():
            expected[word] = expected.get(word, 0) + 1

    def run_once(start: dict[int, int]) -> dict[str, int]:
        app = StreamsApp(
            word_count_topology(source, sink),
            {
                "application.id": app_id,
                "bootstrap.servers": kafka.bootstrap_servers,
                "state.dir": str(tmp_path),
                "commit.interval.ms": 200,
                "session.timeout.ms": 6000,
            },
        )
        try:
            app.start()
            try:
                return counts_from(kafka, sink, start, expected)
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the app is {app.state}: {app.fatal_error}") from None
        finally:
            assert app.close(60)

    first = run_once({0: 0, 1: 0})
    assert first == expected
    internal = {t for t in topics(kafka) if t.startswith(app_id + "-")}
    assert {f"{app_id}-counts-changelog", f"{app_id}-words-repartition"} <= internal

    out = reset(kafka, app_id, "--input-topics", source, "--state-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert internal.isdisjoint(topics(kafka))
    assert committed(kafka, app_id, source) == {0: 0, 1: 0}
    # --state-dir deleted the stores (the task directories) and kept the process id.
    assert [p.name for p in (tmp_path / app_id).iterdir() if p.is_dir()] == []

    second = run_once(kafka.end_offsets(sink))
    assert second == expected


def counts_from(
    kafka: KafkaTestCluster, sink: str, start: dict[int, int], expected: dict[str, int]
) -> dict[str, int]:
    """The latest count per word the sink got from ``start`` on, read until every word has its
    expected count or one exceeds it (a doubled count never passes through the expected one:
    every count of a doubled run is above it)."""
    consumer = kafka.consumer()
    consumer.assign([TopicPartition(sink, p, o) for p, o in start.items()])
    latest: dict[str, int] = {}
    key_de, value_de = Serdes.String().deserializer, Serdes.Long().deserializer

    def done() -> bool:
        for m in consumer.consume(1000, 0.5):
            if m.error() is None:
                latest[key_de.deserialize(sink, m.key())] = value_de.deserialize(sink, m.value())
        return latest == expected or any(v > expected.get(k, 0) for k, v in latest.items())

    try:
        wait_until(done, "the word counts of this run")
    except AssertionError as exc:
        raise AssertionError(f"{exc} from {start}; got {latest}, expected {expected}") from None
    finally:
        consumer.close()
    return latest
