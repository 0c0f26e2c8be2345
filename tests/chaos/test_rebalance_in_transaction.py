"""A rebalance in the middle of a transaction: no duplicate, no loss.

Instance A (``count_app.py``) stops inside a commit with records in its open transaction, before
handing over its offsets. Instance B (same application id, another state directory) joins; once
the group is rebalancing (it waits for A), A is released: it finishes its commit and takes part
in the rebalance, B gets some partitions and both process. Then B leaves (SIGTERM, a clean
close) while A's transactions keep opening and closing under a steady trickle of input, a second
rebalance in the middle of one. Read ``read_committed``, the sink must hold every key's counts
exactly 1..N. Cooperative (incremental) and eager (``range``) assignment both.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupState
from tests.chaos._counting import Child, CommittedSink, Input, exact, reached
from tests.chaos._helpers import app_args

from streamstate.kafka_local import KafkaTestCluster

SEED = 20261124


def _rebalancing_with_b(kafka: KafkaTestCluster, group: str) -> bool:
    """Whether B's join has started a rebalance: the group waits for A, or already holds both.

    Under eager assignment the group stays in PreparingRebalance until A (stalled) revokes. Under
    cooperative assignment librdkafka's background thread rejoins for A without A's poll, so the
    group may pass PreparingRebalance between two looks and be Stable with two members while A's
    transaction is still open; both mean the rebalance began inside A's transaction.
    """
    (future,) = kafka.admin.describe_consumer_groups([group]).values()
    try:
        description = future.result(timeout=30)
    except Exception:
        return False
    return bool(
        description.state == ConsumerGroupState.PREPARING_REBALANCING
        or len(description.members) == 2
    )


@pytest.mark.parametrize("assignment", ["cooperative-sticky", "range"])
def test_a_rebalance_during_a_transaction_neither_duplicates_nor_loses(
    kafka: KafkaTestCluster, tmp_path: Path, assignment: str
) -> None:
    rng = random.Random(SEED)
    source, sink = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    app_id = f"rebalance-txn-{uuid.uuid4().hex[:8]}"
    data = Input(kafka, source, rng)
    reader = CommittedSink(kafka.bootstrap_servers, sink)
    release = tmp_path / "release-a"

    def args(name: str) -> list[str]:
        return [
            *app_args(kafka.bootstrap_servers, source, sink, app_id, tmp_path / name),
            *("--guarantee", "exactly_once_v2", "--assignment", assignment),
        ]

    children: list[Child] = []
    try:
        data.add(300)
        a = Child(
            *args("a"), "--stall", "offsets", "--stall-at", "2", "--release-file", str(release)
        )
        children.append(a)
        a.wait_for(lambda e: e["event"] == "stalled", "A inside a commit", lambda: data.add(10))
        b = Child(*args("b"))
        children.append(b)
        b.until(
            lambda: _rebalancing_with_b(kafka, app_id),
            "the group rebalancing while A's transaction is open",
        )
        release.touch()
        a.wait_for(lambda e: e["event"] == "released", "A released", lambda: None)
        b.wait_for(lambda e: e["event"] == "snapshot", "B processing", lambda: data.add(10))
        data.add(200)
        assert b.stop() == 0, f"B did not close cleanly: {b.seen[-3:]}"
        for _ in range(20):
            data.add(20)  # A's transactions go on while the group rebalances without B
        a.until(lambda: reached(reader.poll(), data.per_key), "every key's last count")
        assert a.stop() == 0, f"A did not close cleanly: {a.seen[-3:]}"
        wrong = exact(reader.poll(), data.per_key)
    finally:
        for child in children:
            if child.process.poll() is None:
                child.kill()
        reader.close()
    print(f"\n{assignment}: seed {SEED}, {sum(data.per_key.values())} records, {wrong=}")
    assert not wrong, f"keys whose committed counts are not exactly 1..N: {wrong}"
