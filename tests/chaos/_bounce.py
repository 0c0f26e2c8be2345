"""Instances of the counting app (``count_app.py``, one process each) under a steady load: the
harness of the failover and rolling-bounce scenarios (``test_rolling_bounce.py``).

:class:`Load` writes the input with explicit partitions (key ``i`` to partition ``i % 4``): a
fill, every key once, which builds the store, then a steady trickle of random keys on a thread
of its own, remembering when each of its records was produced. :class:`Sink` reads the output
``read_committed`` on a thread of its own: every key's counts must arrive as 1, 2, ... N, each
once and in order, and for each input partition it notes when the counts of the load's records
arrive, from which :meth:`Sink.processes_again` and :meth:`Sink.longest_pause` tell how long a
partition went without processing. :class:`Group` starts, stops (SIGTERM, a clean close) and
kills the instances, gathers their reports (``tasks`` and ``restore`` events, see
``count_app.py``) with the moment each arrived, and waits for the group to settle.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from tests.chaos._counting import Child
from tests.chaos._helpers import app_args, read_committed_consumer

from streamstate.kafka_local import KafkaTestCluster, LocalKafkaError

FULL = os.environ.get("STREAMSTATE_CHAOS_FULL") == "1"
PARTITIONS = 4
DEADLINE = 900.0 if FULL else 180.0
LOAD_PER_SECOND = 100


def key_of(i: int) -> bytes:
    """The ``i``-th key (partition ``i % PARTITIONS``)."""
    return b"key-%07d" % i


def partition_of(key: bytes) -> int:
    """The input partition of ``key`` (see :func:`key_of`)."""
    return int(key[4:]) % PARTITIONS


class Load:
    """The input: a fill and a steady load (see the module doc); ``per_key`` counts the records
    of each key, ``produced[(key, n)]`` is when the load produced the record counted ``n``."""

    def __init__(self, bootstrap: str, topic: str, keys: int, seed: int) -> None:
        self.topic, self.keys = topic, keys
        self.per_key: Counter[bytes] = Counter()
        self.produced: dict[tuple[bytes, int], float] = {}
        self._rng = random.Random(seed)
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)

    def _produce(self, key: bytes) -> int:
        self.per_key[key] += 1
        while True:
            try:
                self._producer.produce(self.topic, b"v", key, partition=partition_of(key))
                return self.per_key[key]
            except BufferError:
                self._producer.poll(0.05)

    def fill(self) -> None:
        """Every key once."""
        for i in range(self.keys):
            self._produce(key_of(i))
        self._flush()

    def start(self) -> None:
        """Starts the steady load: ``LOAD_PER_SECOND`` records of random keys, on every
        partition, in rounds of 0.1 s."""
        self._thread.start()

    def _run(self) -> None:
        per_round = LOAD_PER_SECOND // 10
        while not self._stop.wait(0.1):
            for j in range(per_round):
                # Round-robin over the partitions: each round reaches every one.
                i = self._rng.randrange(self.keys // PARTITIONS) * PARTITIONS + j % PARTITIONS
                key = key_of(i)
                self.produced[(key, self.per_key[key] + 1)] = time.monotonic()
                self._produce(key)
            self._producer.poll(0)

    def stop(self) -> None:
        """Stops the load; every record it produced is acknowledged."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(30)
        self._flush()

    def _flush(self) -> None:
        if self._producer.flush(120):
            raise RuntimeError(f"the input to {self.topic} was not all acknowledged")

    @property
    def total(self) -> int:
        """Every record produced."""
        return sum(self.per_key.values())


class Sink:
    """The output, read ``read_committed`` on a thread (see the module doc)."""

    def __init__(self, bootstrap: str, topic: str, load: Load) -> None:
        self.outputs = 0
        self.last: dict[bytes, int] = {}
        self.out_of_order: list[tuple[bytes, int, int]] = []  # (key, count before, count)
        # Per input partition: (produced, arrived) of the load's records' counts.
        self.arrivals: dict[int, list[tuple[float, float]]] = {p: [] for p in range(PARTITIONS)}
        self._load, self._topic = load, topic
        self._consumer = read_committed_consumer(bootstrap, topic, PARTITIONS)
        self._assigned = [KafkaTopicPartition(topic, p) for p in range(PARTITIONS)]
        self._positions: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sink", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            messages = self._consumer.consume(5000, 0.1)
            now = time.monotonic()
            # Asked here: position() from another thread waits behind this thread's consume().
            self._positions = {
                tp.partition: tp.offset for tp in self._consumer.position(self._assigned)
            }
            for m in messages:
                key, value = m.key(), m.value()
                if m.error() is None and key is not None and value is not None:
                    self._count(key, int(value), now)

    def _count(self, key: bytes, n: int, now: float) -> None:
        self.outputs += 1
        before = self.last.get(key, 0)
        if n != before + 1 and len(self.out_of_order) < 20:
            self.out_of_order.append((key, before, n))
        self.last[key] = max(before, n)
        produced = self._load.produced.get((key, n))
        if produced is not None:
            self.arrivals[partition_of(key)].append((produced, now))

    def processes_again(self, since: float) -> float | None:
        """Seconds from ``since`` until every partition's output held the count of a record
        produced after ``since``; ``None`` while some partition's has not."""
        firsts = []
        for arrivals in self.arrivals.values():
            after = [arrived for produced, arrived in list(arrivals) if produced > since]
            if not after:
                return None
            firsts.append(min(after))
        return max(firsts) - since

    def longest_pause(self, start: float, end: float) -> float:
        """The longest time, between ``start`` and ``end``, that a partition's output went
        without a new count of the load's records."""
        longest = 0.0
        for arrivals in self.arrivals.values():
            times = [start, *sorted(a for _, a in list(arrivals) if start < a < end), end]
            longest = max(longest, *(b - a for a, b in itertools.pairwise(times)))
        return longest

    def wrong(self, per_key: Counter[bytes]) -> dict[str, Any]:
        """What is not exact: counts out of order (a duplicate, a gap), and the keys whose last
        count is not their number of input records."""
        last = {
            k.decode(): (self.last.get(k), n) for k, n in per_key.items() if self.last.get(k) != n
        }
        extra = [k.decode() for k in self.last if k not in per_key]
        found: dict[str, Any] = {}
        if self.out_of_order:
            found["out of order"] = self.out_of_order
        if last:
            found[f"{len(last)} keys' last count (seen, expected)"] = dict(list(last.items())[:5])
        if extra:
            found["keys never produced"] = extra[:5]
        return found

    def at(self, ends: dict[int, int]) -> bool:
        """Whether this reader has read up to the offsets ``ends`` (partition -> offset)."""
        positions = self._positions
        return all(positions.get(p, -1) >= end for p, end in ends.items())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


@dataclass
class Restore:
    """One restoration of a changelog partition by one instance, as its listener told it."""

    instance: str
    partition: int
    start: int
    end: int
    at: float
    restored: int | None = None  # None: it did not end (the instance was killed)

    @property
    def fraction(self) -> float:
        """The records restored over the changelog partition's size."""
        return (self.restored or 0) / max(self.end, 1)


class Group:
    """The instances of one application (``count_app.py`` processes; see the module doc)."""

    def __init__(
        self, kafka: KafkaTestCluster, tmp: Path, protocol: str, *, standbys: int = 0
    ) -> None:
        self.kafka, self.tmp, self.standbys = kafka, tmp, standbys
        # "streams-static": the streams protocol with a group.instance.id per instance.
        self.protocol, _, static = protocol.partition("-")
        self.static = static == "static"
        self.source = kafka.create_topic(partitions=PARTITIONS)
        self.sink = kafka.create_topic(partitions=PARTITIONS)
        self.app_id = f"bounce-{protocol}-{uuid.uuid4().hex[:8]}"
        self.changelog = f"{self.app_id}-counts-changelog"
        self.children: dict[str, Child] = {}
        self.tasks: dict[str, dict[str, Any]] = {}  # the last "tasks" report of each instance
        self.restores: list[Restore] = []

    def start(self, name: str) -> None:
        """Starts instance ``name`` (its state directory kept across restarts)."""
        args = app_args(
            self.kafka.bootstrap_servers, self.source, self.sink, self.app_id, self.tmp / name
        )
        args += ["--guarantee", "exactly_once_v2", "--group-protocol", self.protocol, "--quiet"]
        args += ["--standby-replicas", str(self.standbys)] if self.standbys else []
        args += ["--group-instance-id", f"{self.app_id}-{name}"] if self.static else []
        self.tasks.pop(name, None)
        self.children[name] = Child(*args)

    def stop(self, name: str) -> None:
        """Closes instance ``name`` cleanly (SIGTERM); it must exit 0."""
        self.drain()
        child = self.children.pop(name)
        seen = len(child.seen)
        code = child.stop()
        self._take(name, child.seen[seen:])
        self.tasks.pop(name, None)
        assert code == 0, f"instance {name} exited {code} on SIGTERM: {child.seen[-3:]}"

    def kill(self, name: str) -> None:
        """SIGKILLs instance ``name``."""
        self.drain()
        child = self.children.pop(name)
        seen = len(child.seen)
        child.kill()
        self._take(name, child.seen[seen:])
        self.tasks.pop(name, None)

    def stop_all(self) -> None:
        """Closes every instance still running (SIGTERM)."""
        for name in list(self.children):
            if self.children[name].process.poll() is None:
                self.stop(name)
            else:
                self.children.pop(name)

    def drain(self) -> None:
        """Takes every report the instances sent so far; fails on an instance in ERROR or
        exited."""
        for name, child in self.children.items():
            events = []
            while not child.events.empty():
                events.append(child.events.get())
            child.seen.extend(events)
            self._take(name, events)
            if child.process.poll() is not None and child.events.empty():
                raise AssertionError(f"instance {name} exited ({child.process.returncode})")

    def _take(self, name: str, events: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        for e in events:
            if e["event"] == "error":
                raise AssertionError(f"instance {name} went to ERROR: {e['error']}")
            if e["event"] == "tasks":
                self.tasks[name] = e
            elif e["event"] == "restore" and e["phase"] == "start":
                self.restores.append(Restore(name, e["partition"], e["start"], e["end"], now))
            elif e["event"] == "restore":
                for r in reversed(self.restores):
                    if (r.instance, r.partition) == (name, e["partition"]):
                        r.restored = e["restored"]
                        break

    def settled(self, standby_targets: dict[int, int] | None = None) -> bool:
        """Whether every instance is RUNNING with at least one active task, none restoring,
        the active tasks cover every partition once and, with ``standby_targets`` (changelog
        partition -> offset), every task has a standby replayed up to its target."""
        self.drain()
        reports = [self.tasks.get(name) for name in self.children]
        if not all(r and r["state"] == "RUNNING" and r["active"] for r in reports):
            return False
        active = [p for r in reports for p in r["active"]]  # type: ignore[index]
        if sorted(active) != list(range(PARTITIONS)):
            return False
        if any(r["restoring"] for r in reports):  # type: ignore[index]
            return False
        if standby_targets is None:
            return True
        standby = {int(p): o for r in reports for p, o in r["standby"].items()}  # type: ignore[index]
        # Under exactly-once the changelog ends with a commit marker, which a standby's next
        # offset to apply never passes: one short of the end is the end.
        return sorted(standby) == list(range(PARTITIONS)) and all(
            standby[p] >= target - 1 for p, target in standby_targets.items()
        )

    def wait_settled(self, what: str) -> float:
        """Waits until the group has settled (see :meth:`settled`; with standbys, each one
        replayed up to the changelog's end as it was when the wait began); returns when."""
        targets: dict[int, int] | None = None
        if self.standbys:
            try:
                targets = self.kafka.end_offsets(self.changelog)
            except LocalKafkaError:  # not created yet: nothing to replay
                targets = {}
        self.wait(lambda: self.settled(targets), what)
        return time.monotonic()

    def wait(self, condition: Any, what: str) -> None:
        """Waits for ``condition`` while every instance runs, never in ERROR."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            self.drain()
            if condition():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}: {self.tasks}")

    def restores_between(self, start: float, end: float) -> list[Restore]:
        """The restorations that began between ``start`` and ``end``."""
        return [r for r in self.restores if start <= r.at < end]


def figures(restores: list[Restore]) -> dict[str, Any]:
    """Records restored, in all and the largest share of one changelog partition."""
    return {
        "restored": sum(r.restored or 0 for r in restores),
        "largest share of a changelog partition": round(
            max((r.fraction for r in restores), default=0.0), 4
        ),
        "restores": len(restores),
    }


STATIC_SESSION_TIMEOUT_MS = 30_000
"""The group's ``streams.session.timeout.ms`` with static members: a bounced instance is back
well within it (a restart takes seconds), so the broker keeps its tasks for it by construction
(the test broker's default, 6 s, is shorter than a restart on a loaded machine may take)."""


def _set_group_config(kafka: KafkaTestCluster, group_id: str, session_timeout_ms: int) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    resource = ConfigResource(
        ResourceType.GROUP,
        group_id,
        incremental_configs=[
            ConfigEntry(
                "streams.session.timeout.ms",
                str(session_timeout_ms),
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


@contextmanager
def running(
    kafka: KafkaTestCluster, tmp: Path, protocol: str, names: list[str], *, keys: int, seed: int
) -> Iterator[tuple[Group, Load, Sink]]:
    """The instances ``names`` of a count under ``exactly_once_v2`` (one standby replica under
    the streams protocol), settled on a store of ``keys`` keys (every key counted once, every
    standby replayed), with the steady load on and reaching every partition's output; every
    instance is closed at the end."""
    group = Group(kafka, tmp, protocol, standbys=1 if protocol.startswith("streams") else 0)
    if group.static:
        _set_group_config(kafka, group.app_id, STATIC_SESSION_TIMEOUT_MS)
    load = Load(kafka.bootstrap_servers, group.source, keys, seed)
    sink = Sink(kafka.bootstrap_servers, group.sink, load)
    try:
        for name in names:
            group.start(name)
        # Settled before the fill: its changelogs are then written by the instances that keep
        # them, and no restore happens before the scenario.
        group.wait_settled("every instance RUNNING with tasks")
        load.fill()
        group.wait(lambda: sink.outputs >= keys, "every key of the fill counted")
        group.wait_settled("the group settled on the filled store")
        load.start()
        started = time.monotonic()
        group.wait(lambda: sink.processes_again(started) is not None, "the load processed")
        yield group, load, sink
    finally:
        load.stop()
        group.stop_all()
        sink.close()


def finish(group: Group, load: Load, sink: Sink) -> dict[str, Any]:
    """Stops the load, waits for every record's count, closes every instance and reads the
    output to its end; returns what is not exact (see :meth:`Sink.wrong`)."""
    load.stop()
    group.wait(lambda: sink.outputs >= load.total, "every input record counted")
    group.stop_all()
    ends = group.kafka.end_offsets(group.sink)
    group.wait(lambda: sink.at(ends), "the output read to its end")
    return sink.wrong(load.per_key)
