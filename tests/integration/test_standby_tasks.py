"""Standby tasks under ``group.protocol="streams"`` (KIP-1071) on the real 4.4 broker.

Two instances of a count over 4 partitions (a persistent store, 20,000 distinct keys): one in a
child process, SIGKILLed once everything is processed and committed and the survivor's standbys
have replayed the whole changelog; the survivor then runs every task. With
``num.standby.replicas=1`` it restores (almost) nothing: the standbys' stores become the
active ones; without standbys it restores the killed instance's whole changelogs (the
baseline, which shows the first test can fail).
"""

from __future__ import annotations

import logging
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType
from tests.apps import start_app_child, wait_until
from tests.standby_support import Restored, active_tasks, count_topology, standby_tasks

from streamstate import Serdes, State, StreamsApp
from streamstate.app.standby_replicas import GROUP_STANDBY_REPLICAS
from streamstate.app.streams_membership import StreamsMembership
from streamstate.errors import StreamsError
from streamstate.kafka_local import KafkaTestCluster

STRING = Serdes.String()
LONG = Serdes.Long()
KEYS = 20_000
TIMEOUT = 180.0


def _kill_the_active_instance(
    kafka: KafkaTestCluster, tmp_path: Path, standby_replicas: int, apps: list[StreamsApp]
) -> tuple[StreamsApp, Restored, dict[int, int], dict[int, int]]:
    """Runs the scenario of the module doc; returns the survivor (RUNNING every task), what
    it restored after the kill, the changelog's end offsets and which partitions the child
    ran (partition -> its changelog end offset)."""
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"standby-{uuid.uuid4().hex[:8]}"
    changelog = f"{app_id}-counts-changelog"
    config: dict[str, Any] = {
        "application.id": app_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "commit.interval.ms": 200,
        "group.protocol": "streams",
        "num.standby.replicas": standby_replicas,
    }
    child = start_app_child(
        "from tests.standby_support import count_topology",
        f"count_topology({source!r}, {sink!r})",
        {**config, "state.dir": str(tmp_path / "child")},
    )
    restored = Restored()
    survivor = StreamsApp(
        count_topology(source, sink),
        {**config, "state.dir": str(tmp_path / "survivor")},
        restore_listener=restored,
    )
    apps.append(survivor)
    try:
        survivor.start()
        wait_until(lambda: len(active_tasks(survivor)) == 2, "the survivor's two tasks", TIMEOUT)
        # Produced once the tasks are split: the child's changelogs are written by the child
        # alone (the survivor, first to join, would otherwise process everything itself).
        kafka.produce(source, [(f"key-{i:05d}".encode(), b"x") for i in range(KEYS)])
        # Everything processed and committed (nothing is processed again after the kill) ...
        inputs = [KafkaTopicPartition(source, p) for p in range(4)]
        membership = survivor._threads[0].coordinator
        assert isinstance(membership, StreamsMembership)
        wait_until(
            lambda: sum(max(c.offset, 0) for c in membership.committed(inputs)) == KEYS,
            "every input record committed",
            TIMEOUT,
        )
        ends = kafka.end_offsets(changelog)
        assert sum(ends.values()) >= KEYS
        # ... and, with standbys, the survivor's standbys at the changelog's end.
        if standby_replicas:
            wait_until(
                lambda: len(standby_tasks(survivor)) == 2, "the survivor's standbys", TIMEOUT
            )

            def caught_up() -> bool:
                positions = {
                    tp.partition: o
                    for t in survivor._threads
                    for tp, o in t.standbys.positions().items()
                }
                return len(positions) == 2 and all(ends[p] <= o for p, o in positions.items())

            wait_until(caught_up, "the standbys replaying the whole changelog", TIMEOUT)
        child_partitions = {
            p: ends[p] for p in range(4) if p not in {t.partition for t in active_tasks(survivor)}
        }
        # Queries with stale stores answer from the standbys (as current as their replay).
        stale = {
            p: dict(survivor.store("counts", p, stale_stores=True).all())
            for p in (child_partitions if standby_replicas else ())
        }
        restored.records.clear()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    wait_until(
        lambda: (
            len(active_tasks(survivor)) == 4
            and not any(t.restoring for t in active_tasks(survivor).values())
            and survivor.state is State.RUNNING
        ),
        "the survivor RUNNING every task",
        TIMEOUT,
    )
    # The store holds every key exactly once (counted once, nothing lost, nothing doubled).
    counts: dict[str, int] = {}
    for partition in range(4):
        counts.update(_answer(survivor, partition))
    assert counts == {f"key-{i:05d}": 1 for i in range(KEYS)}
    for partition, copy in stale.items():
        assert copy and copy == _answer(survivor, partition)
    return survivor, restored, ends, child_partitions


def _answer(app: StreamsApp, partition: int) -> dict[str, int]:
    """The store's contents on ``partition``, asked once: a client ``RUNNING`` with no task
    restoring answers from every task's store (``test_task_readiness.py``)."""
    return dict(app.store("counts", partition).all())


def test_a_standby_made_active_restores_at_most_one_percent_of_the_changelog(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG, "streamstate.app")
    _, restored, ends, moved = _kill_the_active_instance(kafka, tmp_path, 1, apps)
    assert len(moved) == 2
    total = sum(ends.values())
    assert sum(restored.records.values()) <= total // 100, restored.records
    # The heartbeats carried the tasks' changelog positions (TaskOffsets), and the broker
    # took them (a refused heartbeat would have failed the stream thread).
    assert "task offsets not sent" not in caplog.text


def test_without_standbys_the_moved_tasks_restore_their_whole_changelog(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    _, restored, _, moved = _kill_the_active_instance(kafka, tmp_path, 0, apps)
    assert len(moved) == 2
    by_partition = {tp.partition: n for tp, n in restored.records.items()}
    # The two tasks that moved restore their changelogs from the beginning.
    assert by_partition == moved


def test_num_standby_replicas_is_set_on_the_group_and_a_refused_value_fails_start(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp]
) -> None:
    source, sink = kafka.create_topic(partitions=1), kafka.create_topic(partitions=1)

    def app(replicas: int) -> StreamsApp:
        made = StreamsApp(
            count_topology(source, sink),
            {
                "application.id": f"standby-cfg-{uuid.uuid4().hex[:8]}",
                "bootstrap.servers": kafka.bootstrap_servers,
                "state.dir": str(tmp_path / str(replicas)),
                "group.protocol": "streams",
                "num.standby.replicas": replicas,
            },
        )
        apps.append(made)
        return made

    taken = app(1)
    taken.start()
    resource = ConfigResource(ResourceType.GROUP, taken.config.application_id)
    described = kafka.admin.describe_configs([resource])[resource].result(timeout=30)
    assert described[GROUP_STANDBY_REPLICAS].value == "1"
    # Above the broker's group.streams.max.standby.replicas (2 by default).
    with pytest.raises(StreamsError, match=r"num\.standby\.replicas=5"):
        app(5).start()
