"""``processing.guarantee=exactly_once_v2`` on a real broker: transactions per commit, stores
that never get ahead of them, aborts, fencing, the buffer bound and restores of the tail only.

The counting app's sink carries each key's running count; read ``read_committed``, an
exactly-once run shows every key's counts 1..N each once, in order. The larger scenarios
(SIGKILL loops, zombies, rebalances mid-transaction) live in the chaos suite.
"""

from __future__ import annotations

import collections
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests.apps import TIMEOUT, start_app_child, wait_until
from tests.integration import test_streams_app as streams_app

from streamstate import StateStoreMigratedError, StreamsRebalancingError
from streamstate.app import State, StreamsApp, Topology
from streamstate.app.config import EOS_COMMIT_INTERVAL_MS
from streamstate.app.handlers import StreamThreadExceptionResponse
from streamstate.kafka_local import KafkaTestCluster
from streamstate.records import TopicPartition
from streamstate.state.restorer import StateRestoreListener

EOS = {"processing.guarantee": "exactly_once_v2"}


def counting_topology(
    source: str,
    sink: str,
    *,
    fail_once_at: int | None = None,
    before_failing: Any = None,
    slow: bool = False,
) -> Topology:
    """Counts per key into store ``counts`` and sends each new count to ``sink``;
    ``fail_once_at``: the processor raises once, on the record of that value, after calling
    ``before_failing(key, count)``; ``slow``: sleeps 1 ms per record."""
    topology = Topology().add_store("counts")
    failed = threading.Event()

    @topology.processor(sources=[source], stores=["counts"], sinks=[sink])
    def count(ctx: Any, record: Any) -> None:
        store = ctx.store("counts")
        n = int(store.get(record.key) or b"0") + 1
        store.put(record.key, b"%d" % n)
        ctx.send(sink, record.key, b"%d" % n)
        if slow:
            time.sleep(0.001)
        if fail_once_at is not None and record.value == b"%d" % fail_once_at:
            if not failed.is_set():
                failed.set()
                if before_failing is not None:
                    before_failing(record.key, n)
                raise RuntimeError("failing once, mid-period")

    return topology


def new_app(
    apps: list[StreamsApp],
    kafka: KafkaTestCluster,
    topology: Topology,
    state_dir: Path,
    app_id: str,
    **config: Any,
) -> StreamsApp:
    """``test_streams_app``'s app under exactly-once, committing at the exactly-once default
    interval (100 ms) unless ``config`` says otherwise."""
    return streams_app.new_app(
        apps,
        kafka,
        topology,
        state_dir,
        app_id,
        **{**EOS, "commit.interval.ms": EOS_COMMIT_INTERVAL_MS, **config},
    )


def produce_counted(
    kafka: KafkaTestCluster, topic: str, n: int, keys: int
) -> collections.Counter[bytes]:
    records = [(b"key-%03d" % (i % keys), b"%d" % i) for i in range(n)]
    kafka.produce(topic, records)
    return collections.Counter(k for k, _ in records)


def local_counts(app: StreamsApp) -> dict[bytes, int]:
    try:
        return {k: int(v) for k, v in app.store("counts").all()}
    except (StreamsRebalancingError, StateStoreMigratedError):
        return {}


def read_sink(
    kafka: KafkaTestCluster, sink: str, isolation: str, until: int | None = None
) -> dict[bytes, list[int]]:
    """Every count the sink holds per key, in offset order, read with ``isolation``, to the
    end of the topic (``until``: at least that many records)."""
    consumer = kafka.consumer(**{"isolation.level": isolation, "enable.partition.eof": True})
    partitions = kafka.partitions(sink)
    consumer.subscribe([sink])
    seen: dict[bytes, list[int]] = collections.defaultdict(list)
    at_end: set[int] = set()
    total = 0

    def done() -> bool:
        nonlocal total
        for m in consumer.consume(5000, 0.5):
            if m.error() is not None:
                if m.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            seen[m.key()].append(int(m.value()))
            total += 1
        return len(at_end) == len(partitions) and (until is None or total >= until)

    wait_until(done, f"the sink read {isolation} to its end")
    return dict(seen)


def assert_exact(seen: dict[bytes, list[int]], expected: collections.Counter[bytes]) -> None:
    """Each key's counts are 1..N, each once, in order."""
    assert {k: len(v) for k, v in seen.items()} == dict(expected)
    for key, counts in seen.items():
        assert counts == list(range(1, expected[key] + 1)), key


def test_exactly_once_counts_exactly_and_read_committed_sees_each_count_once(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=2)
    sink = kafka.create_topic(partitions=2)
    expected = produce_counted(kafka, source, 4_000, keys=40)
    app = new_app(
        apps, kafka, counting_topology(source, sink), tmp_path, f"eos-{uuid.uuid4().hex[:8]}"
    )
    assert app.config.exactly_once and app.config.commit_interval_ms == 100
    app.start()
    wait_until(lambda: local_counts(app) == dict(expected), "every record counted")
    assert_exact(read_sink(kafka, sink, "read_committed", until=4_000), expected)
    ids = app.transactional_ids()
    assert ids == [f"{app.config.application_id}-{app.process_id}-1"]
    assert app.close(30)
    # The process id is the state directory's: a restart on the same disk reuses it.
    again = new_app(
        apps, kafka, counting_topology(source, sink), tmp_path, app.config.application_id
    )
    again.start()
    assert again.wait_for_state(State.RUNNING, TIMEOUT)
    assert again.transactional_ids() == ids


def test_an_aborted_transaction_leaves_store_sink_and_changelog_as_of_the_last_commit(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    # The processor writes its store and sends its count, then raises (once): the thread dies
    # with that write and that record in its open transaction, which is aborted; the
    # replacement thread re-processes from the last committed offsets. Under at-least-once the
    # store would keep the write and the key would be counted twice.
    source = kafka.create_topic(partitions=1)
    sink = kafka.create_topic(partitions=1)
    expected = produce_counted(kafka, source, 3_000, keys=30)

    def until_on_the_broker(key: bytes, count: int) -> None:
        # The failing record's count is in the open transaction on the broker (not merely
        # queued in the producer, whose abort would purge it) before the processor raises.
        probe = kafka.consumer(**{"isolation.level": "read_uncommitted"})
        probe.assign([KafkaTopicPartition(sink, 0, OFFSET_BEGINNING)])

        def seen() -> bool:
            return any(
                m.error() is None and m.key() == key and m.value() == b"%d" % count
                for m in probe.consume(5000, 0.5)
            )

        wait_until(seen, "the failing record's count on the broker")

    app = new_app(
        apps,
        kafka,
        counting_topology(source, sink, fail_once_at=2_000, before_failing=until_on_the_broker),
        tmp_path,
        f"eos-abort-{uuid.uuid4().hex[:8]}",
    )
    app.set_uncaught_exception_handler(lambda exc: StreamThreadExceptionResponse.REPLACE_THREAD)
    app.start()
    wait_until(lambda: app.threads_replaced == 1, "the failed thread replaced")
    wait_until(lambda: local_counts(app) == dict(expected), "every record counted once")
    assert app.state is State.RUNNING
    assert_exact(read_sink(kafka, sink, "read_committed", until=3_000), expected)
    changelog = f"{app.config.application_id}-counts-changelog"
    assert_exact(read_sink(kafka, changelog, "read_committed", until=3_000), expected)
    # read_uncommitted shows the aborted transaction's records: the failing key's count twice.
    uncommitted = read_sink(kafka, sink, "read_uncommitted", until=3_001)
    failing_key = b"key-%03d" % (2_000 % 30)
    assert len(uncommitted[failing_key]) > expected[failing_key]


@pytest.mark.parametrize(
    ("partitions", "before", "after", "keys"),
    [
        pytest.param(2, 2_000, 2_000, 20, id="many-records-after-the-fence"),
        # One record after the fence: its sink and changelog writes are the transaction's only
        # ones, so no later produce() reports the fence; the commit's flush is the first to hear
        # of it (librdkafka fails the partitions' registration in the background).
        # confluent-kafka 2.16 raises a bare KafkaError there (no exception: `except
        # BaseException` misses it), which used to end the stream thread silently.
        pytest.param(1, 200, 1, 10, id="the-commits-flush-hears-of-it-first"),
    ],
)
def test_a_fenced_producer_is_replaced_and_the_output_stays_exact(
    kafka: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
    *,
    partitions: int,
    before: int,
    after: int,
    keys: int,
) -> None:
    source = kafka.create_topic(partitions=partitions)
    sink = kafka.create_topic(partitions=partitions)
    first = produce_counted(kafka, source, before, keys=keys)
    app = new_app(
        apps, kafka, counting_topology(source, sink), tmp_path, f"eos-fence-{uuid.uuid4().hex[:8]}"
    )
    states: list[str] = []
    app.set_state_listener(lambda new, old: states.append(new.value))
    app.start()
    wait_until(lambda: local_counts(app) == dict(first), "the first records counted")
    thread = app._threads[0]
    wait_until(lambda: not thread.in_transaction, "the first records committed")
    fenced = thread.producer
    # A zombie takes the thread's transactional.id: the app's producer is fenced at its next
    # transactional request.
    zombie = kafka.adopt(  # closed with the test's consumers, not left to reconnect
        Producer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "transactional.id": app.transactional_ids()[0],
            }
        )
    )
    zombie.init_transactions(30)
    second = produce_counted(kafka, source, after, keys=keys)
    expected = first + second
    wait_until(lambda: thread.metrics.producers_replaced >= 1, "the fenced producer replaced")
    assert thread.producer is not fenced
    # Closed when replaced, as Kafka's StreamsProducer closes it (not left to reconnect).
    with pytest.raises(RuntimeError, match="closed"):
        fenced.flush(0)
    wait_until(lambda: local_counts(app) == dict(expected), "every record counted once")
    assert thread.is_alive()
    assert "ERROR" not in states and "PENDING_ERROR" not in states
    total = before + after
    assert_exact(read_sink(kafka, sink, "read_committed", until=total), expected)
    # The app's new producer fenced the zombie in turn: it can commit nothing.
    zombie.begin_transaction()
    zombie.produce(sink, b"zombie", b"1")
    with pytest.raises(Exception, match=r"(?i)fenc|epoch"):
        zombie.commit_transaction(30)
    assert b"zombie" not in read_sink(kafka, sink, "read_committed", until=total)


def test_a_full_write_buffer_commits_early_and_the_output_stays_exact(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    sink = kafka.create_topic(partitions=1)
    expected = produce_counted(kafka, source, 3_000, keys=300)
    app = new_app(
        apps,
        kafka,
        counting_topology(source, sink),
        tmp_path,
        f"eos-bound-{uuid.uuid4().hex[:8]}",
        # Only the buffer bound can make this app commit before it closes.
        **{"commit.interval.ms": 600_000, "statestore.uncommitted.max.bytes": 500},
    )
    app.start()
    thread = app._threads[0]
    # A task processes up to 1,000 records per loop; each loop's writes pass the bound.
    wait_until(lambda: thread.metrics.early_commits >= 3, "early commits")
    committed = read_sink(kafka, sink, "read_committed")
    assert sum(len(v) for v in committed.values()) > 0
    assert local_counts(app)
    assert app.close(30)
    assert_exact(read_sink(kafka, sink, "read_committed", until=3_000), expected)


def test_two_instances_share_and_hand_over_tasks_under_exactly_once(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    # Revocations commit every task of the thread in one transaction, then close the revoked
    # ones; a second instance joining and the first leaving mid-stream lose and duplicate
    # nothing.
    source = kafka.create_topic(partitions=4)
    sink = kafka.create_topic(partitions=4)
    app_id = f"eos-two-{uuid.uuid4().hex[:8]}"
    first = produce_counted(kafka, source, 2_000, keys=40)
    one = new_app(apps, kafka, counting_topology(source, sink, slow=True), tmp_path / "1", app_id)
    one.start()
    two = new_app(apps, kafka, counting_topology(source, sink, slow=True), tmp_path / "2", app_id)
    two.start()
    wait_until(
        lambda: bool(two._threads[0].active_tasks()) and bool(one._threads[0].active_tasks()),
        "both instances owning tasks",
    )
    assert one.transactional_ids() != two.transactional_ids()
    second = produce_counted(kafka, source, 2_000, keys=40)
    assert one.close(30)
    expected = first + second
    wait_until(lambda: local_counts(two) == dict(expected), "the second instance counting all")
    assert_exact(read_sink(kafka, sink, "read_committed", until=4_000), expected)


# --- restoration under exactly-once --------------------------------------------------------


class Restored(StateRestoreListener):
    """Counts the records restored per store."""

    def __init__(self) -> None:
        self.records: collections.Counter[str] = collections.Counter()
        self.started: list[tuple[str, int, int]] = []

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        self.started.append((store_name, start_offset, end_offset))

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        self.records[store_name] += num_restored


def write_with_an_aborted_transaction(kafka: KafkaTestCluster, topic: str) -> None:
    """Committed a=1, b=1; aborted a=9, c=9; committed d=1 (one partition)."""
    producer = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": uuid.uuid4().hex}
    )
    producer.init_transactions(30)
    for pairs, commit in (
        ([(b"a", b"1"), (b"b", b"1")], True),
        ([(b"a", b"9"), (b"c", b"9")], False),
        ([(b"d", b"1")], True),
    ):
        producer.begin_transaction()
        for key, value in pairs:
            producer.produce(topic, value, key, partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


@pytest.mark.parametrize("fetch", ["rust", "confluent"])
def test_aborted_changelog_records_are_never_restored_into_a_task_or_global_store(
    kafka: KafkaTestCluster,
    tmp_path: Path,
    apps: list[StreamsApp],
    monkeypatch: pytest.MonkeyPatch,
    fetch: str,
) -> None:
    monkeypatch.setenv("STREAMSTATE_RESTORE_FETCH", fetch)
    app_id = f"eos-restore-{uuid.uuid4().hex[:8]}"
    source = kafka.create_topic(partitions=1)
    global_topic = kafka.create_topic(partitions=1)
    changelog = kafka.create_topic(
        f"{app_id}-counts-changelog", partitions=1, config={"cleanup.policy": "compact"}
    )
    write_with_an_aborted_transaction(kafka, changelog)
    write_with_an_aborted_transaction(kafka, global_topic)
    topology = Topology().add_store("counts").add_global_store("prices", topic=global_topic)

    @topology.processor(sources=[source], stores=["counts", "prices"])
    def noop(ctx: Any, record: Any) -> None:
        pass

    app = new_app(apps, kafka, topology, tmp_path, app_id)
    app.start()
    assert app.wait_for_state(State.RUNNING, TIMEOUT)
    wait_until(lambda: bool(local_counts(app)), "the task store restored")
    committed = [(b"a", b"1"), (b"b", b"1"), (b"d", b"1")]
    assert list(app.store("counts").all()) == committed
    assert list(app.store("prices").all()) == committed


def test_a_clean_restart_restores_nothing_and_a_killed_instance_restores_only_the_tail(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source = kafka.create_topic(partitions=1)
    sink = kafka.create_topic(partitions=1)
    app_id = f"eos-tail-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    first = produce_counted(kafka, source, 2_000, keys=50)
    app = new_app(apps, kafka, counting_topology(source, sink), state_dir, app_id)
    app.start()
    wait_until(lambda: local_counts(app) == dict(first), "the first records counted")
    assert app.close(30)
    restored = Restored()
    again = new_app(apps, kafka, counting_topology(source, sink), state_dir, app_id)
    again.set_global_state_restore_listener(restored)
    again.start()
    assert again.wait_for_state(State.RUNNING, TIMEOUT)
    assert local_counts(again) == dict(first)
    assert restored.records["counts"] == 0
    assert again.close(30)

    # A child process runs the same app and is SIGKILLed while it processes (mid-period: it
    # commits every 100 ms and sleeps 1 ms per record).
    more = produce_counted(kafka, source, 6_000, keys=50)
    child = start_app_child(
        "from tests.integration.test_exactly_once import counting_topology",
        f"counting_topology({source!r}, {sink!r}, slow=True)",
        {
            "application.id": app_id,
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(state_dir),
            "session.timeout.ms": 6000,
            **EOS,
        },
    )
    try:
        wait_until(
            lambda: sum(len(v) for v in read_sink(kafka, sink, "read_committed").values()) >= 4_000,
            "the child committing some of its records",
        )
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    changelog_end = kafka.end_offsets(f"{app_id}-counts-changelog")[0]
    restored = Restored()
    last = new_app(apps, kafka, counting_topology(source, sink), state_dir, app_id)
    last.set_global_state_restore_listener(restored)
    last.start()
    expected = first + more
    wait_until(lambda: local_counts(last) == dict(expected), "every record counted once")
    assert_exact(read_sink(kafka, sink, "read_committed", until=8_000), expected)
    # Only the tail past the checkpoint was restored: at most one transaction's worth, never
    # the changelog's thousands of records.
    assert restored.records["counts"] < changelog_end // 4, (restored.records, changelog_end)
