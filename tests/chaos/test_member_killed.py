"""Chaos: two instances (separate processes) share the load and one is SIGKILLed mid-processing.
The survivor takes its partitions over once the session times out; every input record's effect
must arrive (at-least-once: the killed member's uncommitted records are processed again)."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

from tests.chaos._helpers import SinkReader, start_app_process, wait_until

from streamstate.kafka_local import KafkaTestCluster


def test_a_member_killed_while_two_share_the_load_loses_nothing(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    expected = set(kafka.produce(source, [(b"k%d" % i, b"v") for i in range(4_000)]))
    app_id = f"kill-{uuid.uuid4().hex[:8]}"
    reader = SinkReader(kafka.bootstrap_servers, sink)
    # Slow enough that both members are still busy when one is killed.
    # Frequent commits: the survivor is likely to commit while the group rebalances (a stale
    # generation: task migrated, which it must survive).
    slow = ("--slow-every", "1", "--commit-interval-ms", "50")
    first = start_app_process(kafka.bootstrap_servers, source, sink, app_id, tmp_path / "a", *slow)
    second = start_app_process(kafka.bootstrap_servers, source, sink, app_id, tmp_path / "b", *slow)
    try:
        wait_until(lambda: _owners(kafka, app_id) == 2, "both members owning partitions")
        wait_until(lambda: len({p for p, _ in reader.poll()}) == 4, "all partitions processing")
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        expected |= set(kafka.produce(source, [(b"m%d" % i, b"v") for i in range(2_000)]))
        wait_until(lambda: reader.poll() >= expected, "every record's effect in the sink")
        assert second.poll() is None, "the survivor died"
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.terminate()
                process.wait(60)
            if process.stdout is not None:
                process.stdout.close()
        reader.close()


def _owners(kafka: KafkaTestCluster, group: str) -> int:
    """How many members of ``group`` own partitions now."""
    (future,) = kafka.admin.describe_consumer_groups([group]).values()
    try:
        members = future.result(timeout=30).members
    except Exception:
        return 0
    return sum(1 for m in members if m.assignment and m.assignment.topic_partitions)
