"""``exactly_once_v2`` under ``group.protocol="streams"`` (KIP-1071) on the real 4.4 broker.

The transaction's offsets carry the streams member's id and epoch
(``app/streams_transaction.py``; the blob's format: ``tests/unit/test_streams_transaction.py``):
the broker takes them from the member, refuses a stale epoch and takes an anonymous commit from
anyone; a pending transaction's offsets are waited for before a task reads them; a count over 4
partitions SIGKILLed mid-stream and restarted is exact for a ``read_committed`` reader; a
commit the broker refuses for a stale epoch is aborted and the member rejoins.
"""

from __future__ import annotations

import logging
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import member_owning_task_0_0, start_app_child, wait_until
from tests.integration.test_exactly_once import (
    assert_exact,
    counting_topology,
    new_app,
    produce_counted,
    read_sink,
)

from streamstate.app import StreamsApp
from streamstate.app.streams_transaction import (
    decode_group_metadata,
    encode_group_metadata,
    member_fenced,
    wait_for_stable_offsets,
)
from streamstate.app.task import TransactionAbortedError
from streamstate.app.thread_producer import transaction_failure
from streamstate.errors import StreamsError, TaskMigratedError
from streamstate.kafka_local import KafkaTestCluster

STREAMS_EOS = {"group.protocol": "streams", "processing.guarantee": "exactly_once_v2"}


def test_the_broker_takes_the_members_transactional_commit_and_refuses_a_stale_epoch(
    kafka: KafkaTestCluster,
) -> None:
    topic = kafka.create_topic(partitions=1)
    group = f"sx-probe-{uuid.uuid4().hex[:8]}"
    member = member_owning_task_0_0(kafka, group, topic)
    producer = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"t-{group}"}
    )

    def committed() -> int:
        ((_, _, offset, _, code),) = member._member.committed_offsets([(topic, 0)])
        # The member reads stable offsets only (require_stable, KIP-447): until the commit's
        # markers are written the broker answers UNSTABLE_OFFSET_COMMIT.
        if code == 88:
            return -1
        assert code == 0
        return int(offset)

    try:
        producer.init_transactions(30)
        # The member's identity, as streamstate sends it: taken.
        producer.begin_transaction()
        identity = encode_group_metadata(group, member.member_id, member.member_epoch)
        producer.send_offsets_to_transaction([KafkaTopicPartition(topic, 0, 5)], identity, 30)
        producer.commit_transaction(30)
        wait_until(lambda: committed() == 5, "the transactional commit")
        # A stale epoch (the member's before its last assignment): refused, and the
        # transaction can only be aborted; the thread takes it as a task migration.
        producer.begin_transaction()
        stale = encode_group_metadata(group, member.member_id, member.member_epoch - 1)
        with pytest.raises(KafkaException) as refused:
            producer.send_offsets_to_transaction([KafkaTopicPartition(topic, 0, 9)], stale, 30)
        error = refused.value.args[0]
        # STALE_MEMBER_EPOCH, as the 4.4 coordinator answers a TxnOffsetCommit v3.
        assert error.code() == KafkaError.ILLEGAL_GENERATION, error
        assert error.txn_requires_abort()
        # Under the classic protocol a rebalance librdkafka has yet to hear of; from a
        # streams member, task migration.
        failure = transaction_failure("sending offsets to the transaction", refused.value)
        assert isinstance(failure, TransactionAbortedError), failure
        assert isinstance(member_fenced(refused.value), TaskMigratedError)
        producer.abort_transaction(30)
        # What confluent-kafka's consumer on manual assignment would send (no member id,
        # generation -1) is taken from anyone while the group has members: no fencing at all,
        # which is why the member's identity is written in.
        producer.begin_transaction()
        anyone = encode_group_metadata(group, "", -1)
        producer.send_offsets_to_transaction([KafkaTopicPartition(topic, 0, 11)], anyone, 30)
        producer.commit_transaction(30)
        wait_until(lambda: committed() == 11, "the anonymous transactional commit")
    finally:
        producer.close()
        member.leave()


def test_a_pending_transactions_offsets_are_waited_for_before_they_are_read(
    kafka: KafkaTestCluster,
) -> None:
    topic = kafka.create_topic(partitions=1)
    group = f"sx-stable-{uuid.uuid4().hex[:8]}"
    member = member_owning_task_0_0(kafka, group, topic)
    producer = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"t-{group}"}
    )
    reader = kafka.consumer(**{"group.id": group, "isolation.level": "read_committed"})
    partitions = [KafkaTopicPartition(topic, 0)]
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        identity = encode_group_metadata(group, member.member_id, member.member_epoch)
        producer.send_offsets_to_transaction([KafkaTopicPartition(topic, 0, 5)], identity, 30)
        # The transaction is pending: the member's own read (require_stable, KIP-447) is
        # answered UNSTABLE_OFFSET_COMMIT rather than the offsets from before it, and the
        # wait waits.
        ((_, _, offset, _, code),) = member._member.committed_offsets([(topic, 0)])
        assert (offset, code) == (-1, 88)
        with pytest.raises(StreamsError, match="still pending in a transaction after 2 s"):
            wait_for_stable_offsets(reader, partitions, 2.0)
        producer.commit_transaction(30)
        wait_for_stable_offsets(reader, partitions, 30.0)
        assert member._member.committed_offsets([(topic, 0)])[0][2] == 5
    finally:
        reader.close()
        producer.close()
        member.leave()


def test_a_count_sigkilled_mid_stream_and_restarted_is_exact_for_read_committed(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"sx-kill-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    total = 8_000
    expected = produce_counted(kafka, source, total, keys=60)
    # The child sleeps 1 ms per record (8 s of processing) and commits every 100 ms: the kill
    # lands once some counts are committed, with a transaction open.
    child = start_app_child(
        "from tests.integration.test_exactly_once import counting_topology",
        f"counting_topology({source!r}, {sink!r}, slow=True)",
        {
            "application.id": app_id,
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(state_dir),
            "commit.interval.ms": 100,
            **STREAMS_EOS,
        },
    )
    committed_at_kill = 0
    try:

        def some_committed() -> bool:
            nonlocal committed_at_kill
            counts = read_sink(kafka, sink, "read_committed")
            committed_at_kill = sum(len(v) for v in counts.values())
            return committed_at_kill >= 1_500

        wait_until(some_committed, "the child committing some of its counts")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert committed_at_kill < total, "the kill should land mid-stream"
    again = new_app(apps, kafka, counting_topology(source, sink), state_dir, app_id, **STREAMS_EOS)
    again.start()
    # The restarted instance fences the child's transactional id (aborting its open
    # transaction) and gets its tasks once the broker drops the dead member (6 s).
    assert_exact(read_sink(kafka, sink, "read_committed", until=total), expected)


def test_a_commit_refused_for_a_stale_epoch_aborts_and_rejoins_and_the_output_stays_exact(
    kafka: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
    caplog: pytest.LogCaptureFixture,
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"sx-fence-{uuid.uuid4().hex[:8]}"
    first = produce_counted(kafka, source, 400, keys=20)
    app = new_app(apps, kafka, counting_topology(source, sink), tmp_path, app_id, **STREAMS_EOS)
    app.start()
    assert_exact(read_sink(kafka, sink, "read_committed", until=400), first)
    (thread,) = app._threads
    member = thread.coordinator.member  # type: ignore[union-attr]
    real_commit = thread.txn.commit
    sent: list[tuple[str, str, int, str | None]] = []
    refused: list[int] = []

    def commit(offsets: list[KafkaTopicPartition], group_metadata: Any) -> None:
        group, member_id, epoch, instance = decode_group_metadata(group_metadata)
        sent.append((group, member_id, epoch, instance))
        if offsets and not refused:
            # The member's identity as its epoch was before its last assignment: what a
            # member fenced out of the group between its records and its commit would send.
            refused.append(epoch)
            group_metadata = encode_group_metadata(group, member_id, epoch - 1)
        real_commit(offsets, group_metadata)

    thread.txn.commit = commit  # type: ignore[method-assign]
    aborted_before = thread.metrics.transactions_aborted
    caplog.set_level(logging.WARNING, logger="streamstate.app")
    second = produce_counted(kafka, source, 400, keys=20)
    wait_until(lambda: bool(refused), "a commit with the records of the second batch")
    # Every commit carries the member's id and its epoch at that moment.
    assert sent[0][:2] == (app_id, member.member_id)
    assert sent[0][2] > 0
    seen = read_sink(kafka, sink, "read_committed", until=800)
    assert_exact(seen, first + second)
    migrated = [r.getMessage() for r in caplog.records if "moved on without it" in r.getMessage()]
    assert any("group generation id is not valid" in m for m in migrated), migrated
    assert thread.metrics.transactions_aborted > aborted_before
    # The member rejoined and commits with its identity again.
    wait_until(lambda: len(sent) > 2 and sent[-1][1] == member.member_id, "commits again")


def test_tasks_handed_over_between_instances_commit_as_their_member_and_stay_exact(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"sx-share-{uuid.uuid4().hex[:8]}"
    first = produce_counted(kafka, source, 2_000, keys=40)

    def instance(n: int) -> StreamsApp:
        return new_app(
            apps,
            kafka,
            counting_topology(source, sink, slow=True),
            tmp_path / f"i{n}",
            app_id,
            **STREAMS_EOS,
        )

    a = instance(1)
    a.start()
    wait_until(lambda: len(a._threads[0].active_tasks()) == 4, "every task on the first")
    # The second instance joins: two tasks are revoked from the first, committed in its
    # transaction as its member, and their offsets read by the second once stable.
    b = instance(2)
    b.start()
    wait_until(
        lambda: len(a._threads[0].active_tasks()) == 2 and len(b._threads[0].active_tasks()) == 2,
        "the tasks split 2/2",
    )
    second = produce_counted(kafka, source, 2_000, keys=40)
    assert_exact(read_sink(kafka, sink, "read_committed", until=4_000), first + second)
