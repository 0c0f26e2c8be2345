"""``StreamsApp`` under ``group.protocol="streams"`` (KIP-1071) on the real 4.4 broker.

A DSL count over 4 partitions, input made here deterministically (so every count is known):
instances split the tasks, a joining instance takes tasks without closing those the others
keep, a closing instance hands its tasks over, commits survive a restart, a SIGKILLed
instance's tasks move after the session timeout, and ``query_metadata_for_key`` names the
instance that holds a key. The probe at the top shows why the member commits offsets itself.
"""

from __future__ import annotations

import collections
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import member_owning_task_0_0, start_app_child, wait_until
from tests.integration.test_streams_app import new_app
from tests.standby_support import count_topology

from streamstate import Serdes, State, StreamsApp, StreamsBuilder
from streamstate.app.key_metadata import HostInfo, default_partition, murmur2
from streamstate.app.streams_membership import CommitOutcome, StreamsMembership
from streamstate.app.task import decode_partition_time, encode_partition_time
from streamstate.errors import (
    InvalidStateStorePartitionError,
    StreamsError,
    StreamsRebalancingError,
)
from streamstate.kafka_local import KafkaTestCluster

STRING = Serdes.String()
LONG = Serdes.Long()
KEYS = [f"key-{i:03d}" for i in range(40)]


def _produce(
    kafka: KafkaTestCluster, topic: str, rounds: int, counter: collections.Counter[str]
) -> None:
    records = [(k, "x") for _ in range(rounds) for k in KEYS]
    kafka.produce(topic, [(k.encode(), v.encode()) for k, v in records])
    counter.update(k for k, _ in records)


def _tasks(app: StreamsApp) -> dict[Any, Any]:
    return {tid: task for t in app._threads for tid, task in t.active_tasks().items()}


def _store_counts(apps: list[StreamsApp]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for app in apps:
        for task in _tasks(app).values():
            if task.restoring:
                continue
            for key, value in app.store("counts", task.partition).all():
                counts[key] = value
    return counts


def _wait_counts(apps: list[StreamsApp], expected: collections.Counter[str], what: str) -> None:
    wait_until(lambda: _store_counts(apps) == dict(expected), what)


def _config(port: int) -> dict[str, Any]:
    return {"group.protocol": "streams", "application.server": f"localhost:{port}"}


def test_librdkafka_cannot_commit_for_a_streams_member_so_the_member_commits_itself(
    kafka: KafkaTestCluster,
) -> None:
    topic = kafka.create_topic(partitions=1)
    group = f"sp-probe-{uuid.uuid4().hex[:8]}"
    member = member_owning_task_0_0(kafka, group, topic)
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        consumer.assign([KafkaTopicPartition(topic, 0)])
        # librdkafka on manual assignment commits as no member (generation -1, no member id):
        # a streams group with members refuses it.
        with pytest.raises(KafkaException, match="UNKNOWN_MEMBER_ID"):
            consumer.commit(offsets=[KafkaTopicPartition(topic, 0, 5)], asynchronous=False)
        # The member's own OffsetCommit v9 carries its id and epoch, and is taken.
        metadata = encode_partition_time(1_700_000_000_000)
        assert member._member.commit_offsets([(topic, 0, 7, metadata)]) == [(topic, 0, 0)]
        # Read back through the member's OffsetFetch, as the app does: confluent-kafka's
        # committed() reads metadata another client wrote past its end (no NUL), so it may come
        # back with stray bytes, or fail to decode as UTF-8 at all.
        ((_, _, offset, got, code),) = member._member.committed_offsets([(topic, 0)])
        assert (offset, code) == (7, 0)
        assert got == metadata
        assert decode_partition_time(got) == 1_700_000_000_000
        # A stale epoch is refused (STALE_MEMBER_EPOCH), as the broker validates it.
        member._member._set_member_epoch_for_test(member.member_epoch + 5)
        assert member._member.commit_offsets([(topic, 0, 9, None)]) == [(topic, 0, 113)]
    finally:
        consumer.close()
        member.leave()


def test_instances_share_tasks_hand_them_over_and_answer_where_a_key_lives(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"sp-count-{uuid.uuid4().hex[:8]}"
    expected: collections.Counter[str] = collections.Counter()
    _produce(kafka, source, 5, expected)

    def app(n: int) -> StreamsApp:
        return new_app(
            apps,
            kafka,
            count_topology(source, sink),
            tmp_path / f"i{n}",
            app_id,
            **_config(7100 + n),
        )

    a, b = app(1), app(2)
    a.start()
    b.start()
    wait_until(
        lambda: len(_tasks(a)) == 2 and len(set(_tasks(a)) | set(_tasks(b))) == 4,
        "two tasks each",
    )
    assert len(_tasks(b)) == 2
    _wait_counts([a, b], expected, "the counts of the first input")

    # Where a key lives: the instance whose task reads the key's partition.
    def endpoints_known(x: StreamsApp) -> bool:
        # Both instances, with the four partitions between them (the broker sends the
        # endpoints with a heartbeat after the assignment settles).
        eps = x._members[0].endpoints()
        return len(eps) == 2 and sum(len(e.active.get(source, ())) for e in eps) == 4

    wait_until(lambda: endpoints_known(a) and endpoints_known(b), "both instances' endpoints")
    everyone = a.metadata_for_all_streams_clients()
    assert [m.host_info for m in everyone] == [HostInfo("localhost", p) for p in (7101, 7102)]
    for metadata, instance in zip(everyone, (a, b), strict=True):
        assert metadata.state_store_names == {"counts"}
        assert {tp.partition for tp in metadata.topic_partitions} == {
            t.partition for t in _tasks(instance).values()
        }
        assert not metadata.standby_topic_partitions
    assert a.streams_metadata_for_store("counts") == everyone

    for key in KEYS[:8]:
        meta = a.query_metadata_for_key("counts", key, STRING)
        assert meta.partition == default_partition(key.encode(), 4)
        holder = a if any(t.partition == meta.partition for t in _tasks(a).values()) else b
        assert meta.active_host == HostInfo("localhost", 7101 if holder is a else 7102)
        assert holder.store("counts", meta.partition).get(key) == expected[key]
        assert meta == b.query_metadata_for_key("counts", key, STRING)
        # Asked of the other instance, the key is not reported absent: it says where it is.
        other = b if holder is a else a
        with pytest.raises(InvalidStateStorePartitionError, match=f"partition {meta.partition}"):
            other.store("counts").get(key)

    # A third instance joins: it takes tasks, and no task A or B keeps is closed meanwhile.
    before = {**_tasks(a), **_tasks(b)}
    c = app(3)
    c.start()
    wait_until(lambda: len(_tasks(c)) == 1 and len(_tasks(a)) + len(_tasks(b)) == 3, "2/1/1")
    kept = {**_tasks(a), **_tasks(b)}
    assert all(before[tid] is task for tid, task in kept.items()), "a kept task was reopened"
    # The instance that gave a task away is back to RUNNING, as are the others.
    wait_until(lambda: all(x.state is State.RUNNING for x in (a, b, c)), "all RUNNING again")
    _produce(kafka, source, 3, expected)
    _wait_counts([a, b, c], expected, "the counts after the third instance joined")

    # C closes: its task goes back to A or B, committed first, so nothing is counted twice.
    c.close(30)
    wait_until(lambda: len(_tasks(a)) + len(_tasks(b)) == 4, "C's task handed over")
    _produce(kafka, source, 2, expected)
    _wait_counts([a, b], expected, "the counts after C left")

    # Every instance stops; one restarts on A's state: it resumes from the commits.
    assert a.close(30) and b.close(30)
    _produce(kafka, source, 1, expected)
    again = new_app(
        apps, kafka, count_topology(source, sink), tmp_path / "i1", app_id, **_config(7101)
    )
    again.start()
    wait_until(lambda: len(_tasks(again)) == 4, "all four tasks on the restarted instance")
    _wait_counts([again], expected, "the counts after the restart")


def test_a_killed_instance_tasks_move_after_the_session_timeout(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"sp-kill-{uuid.uuid4().hex[:8]}"
    expected: collections.Counter[str] = collections.Counter()
    _produce(kafka, source, 5, expected)
    survivor = new_app(
        apps, kafka, count_topology(source, sink), tmp_path / "a", app_id, **_config(7201)
    )
    config = {
        "application.id": app_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "state.dir": str(tmp_path / "b"),
        "commit.interval.ms": 200,
        **_config(7202),
    }
    child = start_app_child(
        "from tests.standby_support import count_topology",
        f"count_topology({source!r}, {sink!r})",
        config,
    )
    try:
        survivor.start()
        wait_until(lambda: len(_tasks(survivor)) == 2, "the survivor's two tasks")
        describe = survivor._members[0].describe
        wait_until(lambda: len(describe().members) == 2, "the child in the group")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # The killed member stops heartbeating; after the session timeout (6 s on the test
    # broker) the coordinator removes it and its tasks move here.
    _produce(kafka, source, 2, expected)
    wait_until(lambda: len(_tasks(survivor)) == 4, "every task on the survivor")
    # At-least-once: what the child processed after its last commit is counted again, so
    # each count is at least the input's; the counts of the survivor's own partitions are
    # exact.
    wait_until(
        lambda: all(_store_counts([survivor]).get(k, 0) >= n for k, n in expected.items()),
        "every key counted",
    )


def test_a_fenced_instance_closes_its_tasks_as_lost_and_gets_them_back(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    expected: collections.Counter[str] = collections.Counter()
    _produce(kafka, source, 3, expected)
    app = new_app(
        apps,
        kafka,
        count_topology(source, sink),
        tmp_path,
        f"sp-fence-{uuid.uuid4().hex[:8]}",
        **_config(7301),
    )
    app.start()
    wait_until(lambda: len(_tasks(app)) == 4, "all four tasks")
    _wait_counts([app], expected, "the first counts")
    before = _tasks(app)
    member = app._members[0]
    # An epoch the coordinator never gave: the next heartbeat is fenced, the tasks are lost.
    member._member._set_member_epoch_for_test(member.member_epoch + 10)
    wait_until(
        lambda: len(_tasks(app)) == 4 and all(t is not before[i] for i, t in _tasks(app).items()),
        "the tasks closed as lost and opened again after the rejoin",
    )
    wait_until(lambda: app.state is State.RUNNING, "RUNNING again")
    _produce(kafka, source, 2, expected)
    # Lost tasks were closed without a commit: at-least-once may count records again.
    wait_until(
        lambda: all(_store_counts([app]).get(k, 0) >= n for k, n in expected.items()),
        "every key counted after the rejoin",
    )


def _regroup_topology(source: str, sink: str) -> Any:
    # Counted by the key's last digit: a repartition topic between two sub-topologies.
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde=STRING, value_serde=STRING)
        .group_by(lambda k, v: k[-1], key_serde=STRING, value_serde=STRING)
        .count(materialized="by-digit")
        .to_stream()
        .to(sink, value_serde=LONG)
    )
    return builder.build()


def test_a_program_with_a_repartition_topic_runs_both_sub_topologies(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    expected: collections.Counter[str] = collections.Counter()
    _produce(kafka, source, 3, expected)
    by_digit = collections.Counter({d: 0 for d in "0123456789"})
    for key, n in expected.items():
        by_digit[key[-1]] += n
    app = new_app(
        apps,
        kafka,
        _regroup_topology(source, sink),
        tmp_path,
        f"sp-regroup-{uuid.uuid4().hex[:8]}",
        **_config(7401),
    )
    app.start()
    # Tasks 0_0..0_3 read the source, 1_0..1_3 the repartition topic: the broker understood
    # both sub-topologies and their topics.
    wait_until(lambda: len(_tasks(app)) == 8, "the eight tasks of two sub-topologies")
    assert {str(t) for t in _tasks(app)} == {f"{s}_{p}" for s in (0, 1) for p in range(4)}
    store = app.store("by-digit")

    def counted() -> bool:
        try:
            return {d: store.get(d) for d in "0123456789"} == dict(by_digit)
        except StreamsRebalancingError:  # a task still restoring: ask again
            return False

    wait_until(counted, "the counts by digit")


def test_streams_protocol_configs_are_checked() -> None:
    base = {"application.id": "a", "bootstrap.servers": "localhost:1"}
    topology = count_topology("in", "out")
    # exactly_once_v2 under the streams protocol (tests/integration/test_streams_exactly_once.py).
    eos = StreamsApp(
        topology,
        {**base, "group.protocol": "streams", "processing.guarantee": "exactly_once_v2"},
    )
    assert eos.config.exactly_once and eos.config.group_protocol == "streams"
    with pytest.raises(ValueError, match=r"group\.protocol must be"):
        StreamsApp(topology, {**base, "group.protocol": "consumer"})
    with pytest.raises(ValueError, match=r"application\.server must be host:port"):
        StreamsApp(topology, {**base, "application.server": "nohost"})
    classic = StreamsApp(topology, {**base, "application.server": "h:1"})
    assert classic.config.group_protocol == "classic"
    assert StreamsApp(topology, {**base, "group.protocol": "STREAMS"}).config.group_protocol == (
        "streams"
    )
    # Kafka's murmur2 (Utils.murmur2's test vectors).
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


class _Answers:
    """A member's binding that answers every commit with the given error code."""

    def __init__(self, code: int) -> None:
        self.code = code

    def commit_offsets(self, offsets: list[Any]) -> list[tuple[str, int, int]]:
        return [(t, p, self.code) for t, p, _, _ in offsets]


def test_commit_errors_are_sorted_as_kafka_streams_sorts_them() -> None:
    def outcome(code: int) -> CommitOutcome:
        member = type("M", (), {"_member": _Answers(code)})()
        membership = StreamsMembership(
            member,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            name="t",
            on_assigned=lambda _: None,
            on_revoked=lambda _: None,
            on_lost=lambda _: None,
        )
        return membership.commit([KafkaTopicPartition("t", 0, 5)])[0]

    assert outcome(0) is CommitOutcome.DONE
    assert outcome(113) is CommitOutcome.REBALANCING  # STALE_MEMBER_EPOCH
    assert outcome(25) is CommitOutcome.MIGRATED  # UNKNOWN_MEMBER_ID
    assert outcome(110) is CommitOutcome.MIGRATED  # FENCED_MEMBER_EPOCH
    assert outcome(16) is CommitOutcome.RETRIABLE  # NOT_COORDINATOR
    assert outcome(7) is CommitOutcome.RETRIABLE  # REQUEST_TIMED_OUT
    with pytest.raises(StreamsError, match="error codes 30"):
        outcome(30)  # GROUP_AUTHORIZATION_FAILED
