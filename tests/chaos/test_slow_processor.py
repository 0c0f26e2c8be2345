"""Chaos: a processor slower than ``max.poll.interval.ms``. The group drops the member, the next
commit fails (unknown member): Kafka Streams' *task migrated*. The client must close its tasks as
lost, rejoin and carry on, never reaching ERROR, and every input record's effect must arrive:
at least once under at-least-once, exactly once (read ``read_committed``) under exactly-once, where
the open transaction the slow record was part of is aborted when its partitions are lost."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.chaos._helpers import SinkReader, wait_until

from streamstate.app import State, StreamsApp, Topology
from streamstate.kafka_local import KafkaTestCluster


@pytest.mark.parametrize(
    ("guarantee", "commit_interval_ms"),
    [
        ("at_least_once", 100),
        # The commit after the slow record fails first (unknown member): task migrated.
        ("exactly_once_v2", 100),
        # No commit is due after the slow record: the next poll finds the partitions lost with
        # the transaction open, which is aborted (the stream thread's on-lost path).
        ("exactly_once_v2", 15_000),
    ],
)
def test_a_processor_slower_than_max_poll_interval_rejoins_instead_of_failing(
    kafka: KafkaTestCluster,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    guarantee: str,
    commit_interval_ms: int,
) -> None:
    source, sink = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    expected = set(kafka.produce(source, [(b"k%d" % i, b"v") for i in range(400)]))
    slept: list[int] = []
    topology = Topology()

    @topology.processor(sources=[source], sinks=[sink])
    def slow_once(ctx: Any, record: Any) -> None:
        if not slept and record.offset == 50:
            slept.append(record.partition)
            time.sleep(10)  # longer than max.poll.interval.ms
        ctx.send(sink, record.key, b"%d:%d" % (record.partition, record.offset))

    app = StreamsApp(
        topology,
        {
            "application.id": f"slow-{uuid.uuid4().hex[:8]}",
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(tmp_path),
            "commit.interval.ms": commit_interval_ms,
            "session.timeout.ms": 6000,
            "consumer.max.poll.interval.ms": 7000,
            # Partitions are paused for back-pressure when the member is dropped: the tasks
            # that replace the lost ones must fetch again.
            "buffered.records.per.partition": 20,
            "processing.guarantee": guarantee,
        },
    )
    states: list[State] = []
    app.set_state_listener(lambda new, old: states.append(new))
    reader = SinkReader(kafka.bootstrap_servers, sink)
    try:
        app.start()
        wait_until(lambda: bool(slept), "the slow record")
        wait_until(lambda: reader.poll() >= expected, "every record's effect in the sink")
        if guarantee == "exactly_once_v2":
            # The sink is read read_committed: nothing of the aborted transaction, each effect
            # once. (The last commits are in: every effect has been seen.)
            assert reader.records == len(expected), reader.records
        if commit_interval_ms > 10_000:
            assert "aborting the transaction (partitions were lost)" in caplog.text
        assert app.wait_for_state(State.RUNNING, 60)
        assert State.ERROR not in states and State.PENDING_ERROR not in states, states
        # The member was dropped and rejoined: the client went back to REBALANCING.
        assert states.count(State.REBALANCING) >= 2, states
    finally:
        app.close(60)
        reader.close()
    assert app.state is State.NOT_RUNNING
