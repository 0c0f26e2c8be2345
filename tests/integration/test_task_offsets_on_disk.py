"""A restarted instance reports the task directories it holds from its first heartbeat, and the
broker gives those tasks back to it (``group.protocol="streams"``, KIP-1071, real 4.4 broker).

Kafka 4.4's ``StickyTaskAssignor`` places an active task (1) on its previous active member,
else (2) on a member that held it as a standby or *reported offsets for it*, least loaded first,
within the per-member quota, else (3) range-wise on the least loaded process. The scenario makes
(2) the only thing that can decide: an instance ran all four tasks of a count and stopped; two
of its task directories are deleted, so its disk holds tasks ``0_0`` and ``0_1`` only; the
group is then empty and its first assignment waits ``streams.initial.rebalance.delay.ms`` (set
to 10 s on the group) for both new members: a peer with an empty state directory and the
restarted instance (a new ``StreamsApp`` on the same ``state.dir``, dynamic membership). No
member has a previous active task, and rule (3) alone would split ``0_0`` and ``0_1`` (adjacent
tasks go to alternate processes). Only the restarted instance's ``TaskOffsets`` can give it
both, so it restores nothing for them. Had the peer been assigned alone first, it would keep
``0_0`` and ``0_1`` as their previous owner: a broken premise fails the test, never passes it.
Before the fix the first heartbeat carried no offsets and the instance got ``0_1`` and ``0_3``.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from tests.apps import wait_until
from tests.standby_support import Restored, active_tasks, count_topology, wait_input_committed

from streamstate import State, StreamsApp
from streamstate.app.streams_group import StreamsGroupMember, TaskId
from streamstate.app.streams_membership import StreamsMembership
from streamstate.kafka_local import KafkaTestCluster
from streamstate.state.checkpoint import OffsetCheckpoint

KEYS = 8_000
TIMEOUT = 120.0


def _partitions(app: StreamsApp) -> set[int]:
    return {t.partition for t in active_tasks(app).values()}


def _running_two_each(apps: list[StreamsApp]) -> bool:
    return all(
        a.state is State.RUNNING
        and len(active_tasks(a)) == 2
        and not any(t.restoring for t in active_tasks(a).values())
        for a in apps
    )


def test_a_restarted_instance_reports_its_task_directories_and_gets_those_tasks_back(
    kafka: KafkaTestCluster, tmp_path: Path, apps: list[StreamsApp], monkeypatch: Any
) -> None:
    source, sink = kafka.create_topic(partitions=4), kafka.create_topic(partitions=4)
    app_id = f"on-disk-{uuid.uuid4().hex[:8]}"
    config: dict[str, Any] = {
        "application.id": app_id,
        "bootstrap.servers": kafka.bootstrap_servers,
        "commit.interval.ms": 200,
        "group.protocol": "streams",
    }
    kept_dir = tmp_path / "kept"

    # 1. One instance runs every task, then stops cleanly (checkpoints written on close).
    first = StreamsApp(count_topology(source, sink), {**config, "state.dir": str(kept_dir)})
    apps.append(first)
    first.start()
    wait_until(lambda: len(active_tasks(first)) == 4, "the first instance's four tasks", TIMEOUT)
    kafka.produce(source, [(f"key-{i:05d}".encode(), b"x") for i in range(KEYS)])
    wait_input_committed(first, source, 4, KEYS, timeout=TIMEOUT)
    first.close()
    app_dir = kept_dir / app_id
    for task in ("0_2", "0_3"):
        shutil.rmtree(app_dir / task)
    held = {
        TaskId("0", p): sum(
            o + 1 for o in OffsetCheckpoint(app_dir / f"0_{p}" / ".checkpoint").read().values()
        )
        for p in (0, 1)
    }
    assert all(offset > 0 for offset in held.values()), held

    # 2. The group's next first assignment waits for both members (by construction).
    resource = ConfigResource(
        ResourceType.GROUP,
        app_id,
        incremental_configs=[
            ConfigEntry(
                "streams.initial.rebalance.delay.ms",
                "10000",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    for future in kafka.admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)

    # Every TaskOffsets a member is given to send, by member, in order.
    sent: dict[int, list[dict[TaskId, int]]] = {}
    original = StreamsGroupMember.set_task_offsets

    def spy(self: StreamsGroupMember, offsets: Any, end_offsets: Any) -> None:
        sent.setdefault(id(self), []).append(dict(offsets))
        original(self, offsets, end_offsets)

    monkeypatch.setattr(StreamsGroupMember, "set_task_offsets", spy)

    # 3. A peer with no state joins first, then the restarted instance.
    restored = Restored()
    peer = StreamsApp(count_topology(source, sink), {**config, "state.dir": str(tmp_path / "peer")})
    restarted = StreamsApp(
        count_topology(source, sink),
        {**config, "state.dir": str(kept_dir)},
        restore_listener=restored,
    )
    apps.extend([peer, restarted])
    peer.start()
    restarted.start()
    wait_until(lambda: _running_two_each([peer, restarted]), "two tasks each, RUNNING", TIMEOUT)

    # Its first heartbeat (the join) carried the tasks of its directories, with their offsets.
    member = restarted._threads[0].coordinator
    assert isinstance(member, StreamsMembership)
    first_sent = sent[id(member.member)][0]
    assert {t: first_sent.get(t) for t in held} == held
    # The broker gave them back to it, and it restored nothing for them.
    assert _partitions(restarted) == {0, 1}
    assert _partitions(peer) == {2, 3}
    assert sum(restored.records.values()) == 0, restored.records
    counts: dict[str, int] = {}
    for app, partitions in ((restarted, (0, 1)), (peer, (2, 3))):
        for partition in partitions:
            counts.update(dict(app.store("counts", partition).all()))
    assert counts == {f"key-{i:05d}": 1 for i in range(KEYS)}
