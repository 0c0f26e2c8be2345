"""``TopologyTestDriver``: a topology run synchronously in one process, with no broker (Kafka's
``TopologyTestDriver`` from ``kafka-streams-test-utils``).

Every topic has one partition, so a topology has one task per sub-topology (partition 0), made
exactly as ``StreamsApp`` makes them (``StreamTask``: the same record path, stores, record
caches, processors and punctuation); only the clients differ. What the tasks produce (sinks,
changelogs, repartition topics) is appended at once to an in-memory log per topic, which
:class:`~streamstate.testing.topics.TestOutputTopic` reads. Each piped record is processed to
completion before ``pipe_input`` returns: the records it sends to repartition topics are fed to
the sub-topologies that read them, and theirs in turn, until no task has anything left; then
every task commits (the record caches flush, as Kafka's driver commits after each record).
Stream time follows the records' timestamps, so stream-time punctuations fire as records
arrive; wall-clock time is the driver's own (``initial_wall_clock_time_ms``, moved by
:meth:`TopologyTestDriver.advance_wall_clock_time`, which fires the wall-clock punctuations
due). Records piped to a global store's topic update the global store at once.

State lives under ``state.dir`` (a temporary directory unless the config names one);
persistent stores are real (fjall) stores there, and :meth:`~TopologyTestDriver.close` deletes
the application's directory, as Kafka's driver does. Records the topology writes to a topic it
reads (a sink back to a source, to a global store's topic) are read back after the records
before them, as Kafka's driver does. ``max.task.idle.ms`` waits on the driver's clock. Under
``processing.guarantee=exactly_once_v2`` stores hold each record's writes until its commit,
which follows every record. Deliberate differences from Kafka's driver are in
``docs/testing.md``.
"""

from __future__ import annotations

import datetime
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, Message

from streamstate.app.config import StreamsConfig
from streamstate.app.context import ReadOnlyStoreView
from streamstate.app.task import StreamTask
from streamstate.app.topology import Topology
from streamstate.errors import StreamsError, TopologyError, UnknownStateStoreError
from streamstate.processor.graph import TaskId
from streamstate.records import TopicPartition
from streamstate.serde import Deserializer, Serializer
from streamstate.state.stores import InMemoryKeyValueStore
from streamstate.testing._closing import Closing
from streamstate.testing.topics import (
    Headers,
    TestInputTopic,
    TestOutputTopic,
    epoch_millis,
    to_millis,
)

__all__ = ["TopologyTestDriver"]


class _DriverProducer:
    """What the tasks produce to: each record is appended to its topic's log at once (offsets
    counted per topic), and its delivery report is served at the next ``poll`` or ``flush``, as
    librdkafka serves them."""

    def __init__(self, logs: dict[str, list[Message]], clock: Callable[[], int]) -> None:
        self._logs = logs
        self._clock = clock
        self._reports: list[tuple[Callable[[Any, Any], None], Message]] = []

    def produce(  # noqa: PLR0917 - confluent-kafka's Producer.produce, positional as it has it
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        on_delivery: Callable[[Any, Any], None] | None = None,
        timestamp: int = 0,
        headers: Any = None,
        callback: Callable[[Any, Any], None] | None = None,
    ) -> None:
        log = self._logs.setdefault(topic, [])
        message = Message(
            topic=topic,
            partition=max(partition, 0),
            offset=len(log),
            key=key,
            value=value,
            # librdkafka stamps a record sent without a timestamp with the wall-clock time.
            timestamp=(TIMESTAMP_CREATE_TIME, timestamp or self._clock()),
            headers=list(headers) if headers else None,
        )
        log.append(message)
        report = on_delivery or callback
        if report is not None:
            self._reports.append((report, message))

    def poll(self, timeout: float | None = None) -> int:
        reports, self._reports = self._reports, []
        for report, message in reports:
            report(None, message)
        return len(reports)

    def flush(self, timeout: float | None = None) -> int:
        self.poll()
        return 0

    def __len__(self) -> int:
        return len(self._reports)


class TopologyTestDriver(Closing):
    """Runs ``topology`` with no broker; see the module doc. ``config`` takes the settings of
    a ``StreamsApp`` (``application.id`` defaults to ``"topology-test-driver"``; nothing
    connects to ``bootstrap.servers``)."""

    def __init__(
        self,
        topology: Topology,
        config: Mapping[str, Any] | None = None,
        *,
        initial_wall_clock_time_ms: int | datetime.datetime = 0,
    ) -> None:
        """Makes and initializes every task (a graph's processors' ``init`` runs here)."""
        settings = dict(config or {})
        settings.setdefault("application.id", "topology-test-driver")
        settings.setdefault("bootstrap.servers", "dummy:1234")
        # The config and the topology are checked before a state directory is made.
        self.config = StreamsConfig.from_mapping({"state.dir": "unused", **settings})
        topology.validate()
        self._topology = topology.bind(
            self.config.application_id,
            self.config.default_key_serde,
            self.config.default_value_serde,
        )
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        if not settings.get("state.dir"):
            self._temporary = tempfile.TemporaryDirectory(prefix="streamstate-test-driver-")
            settings["state.dir"] = self._temporary.name
            self.config = StreamsConfig.from_mapping(settings)
        start = initial_wall_clock_time_ms
        self._now = (
            epoch_millis(start)
            if isinstance(start, datetime.datetime)
            else to_millis(start, "initial_wall_clock_time_ms")
        )
        self._logs: dict[str, list[Message]] = {}
        self._producer = _DriverProducer(self._logs, self._clock)
        self._global_stores: dict[str, InMemoryKeyValueStore] = {
            name: InMemoryKeyValueStore(name) for name in self._topology.global_stores
        }
        self._global_topics = {s.topic: s.name for s in self._topology.global_stores.values()}
        self._sources = frozenset(self._topology.source_topics)
        # How far the log of each topic the topology reads (its sources, repartition topics
        # included, and its global stores' topics) has been handed to its reader.
        self._fed: dict[str, int] = dict.fromkeys(self._sources | set(self._global_topics), 0)
        self._piped: set[str] = set()  # the topics records were piped to
        self._process_total = 0
        self._closed = False
        self._tasks: dict[Any, StreamTask] = {}
        try:
            for task_id in self._task_ids():
                task = StreamTask(
                    task_id,
                    self._topology,
                    self.config,
                    self._producer,  # type: ignore[arg-type]
                    dict(self._global_stores),
                    position=self._position,
                    clock=self._clock,
                )
                self._tasks[task_id] = task
                # Nothing to restore from (no broker): a persistent store left with data and no
                # checkpoint is wiped, as an app would before restoring.
                task.restore_start_offsets()
                task.punctuate()  # makes a graph's processors and calls their init
            self._complete()
        except BaseException:
            self.close()
            raise

    # -- topics ---------------------------------------------------------------------------------

    def create_input_topic(
        self,
        name: str,
        key_serializer: Serializer,
        value_serializer: Serializer,
        *,
        start_timestamp: int | datetime.datetime | None = None,
        auto_advance: int | datetime.timedelta = 0,
    ) -> TestInputTopic:
        """A topic to pipe records to: a source topic of the topology or a global store's
        topic (anything else is a :class:`TopologyError`). Records piped without a timestamp
        get ``start_timestamp`` (the driver's wall-clock time by default), moving on by
        ``auto_advance`` after each."""
        if name not in self._sources and name not in self._global_topics:
            raise TopologyError(
                f"topic {name!r} is not read by the topology (its source topics: "
                f"{sorted(self._sources | set(self._global_topics))})",
                topic=name,
            )
        start = self._now if start_timestamp is None else epoch_millis(start_timestamp)
        return TestInputTopic(
            name,
            key_serializer,
            value_serializer,
            self._pipe,
            start_timestamp_ms=start,
            auto_advance_ms=to_millis(auto_advance, "auto_advance"),
        )

    def create_output_topic(
        self, name: str, key_deserializer: Deserializer, value_deserializer: Deserializer
    ) -> TestOutputTopic:
        """A topic to read what the topology wrote to ``name`` (a sink's topic, or an internal
        topic by its full name: ``<application.id>-<store>-changelog``, ...)."""
        return TestOutputTopic(
            name, key_deserializer, value_deserializer, self._logs.setdefault(name, [])
        )

    def producer_topic_names(self) -> set[str]:
        """Every topic the topology has written to so far (Java's ``producedTopicNames``)."""
        return {topic for topic, log in self._logs.items() if log and topic not in self._piped}

    # -- time -----------------------------------------------------------------------------------

    def advance_wall_clock_time(self, advance: int | datetime.timedelta) -> None:
        """Moves the driver's wall-clock time on and fires the wall-clock punctuations due,
        processing what they forward to completion."""
        self._check_open()
        millis = to_millis(advance, "advance")
        if millis < 0:
            raise ValueError(f"advance must not be negative, got {millis}")
        self._now += millis
        for task in self._tasks.values():
            task.punctuate()
        self._complete()

    def _clock(self) -> int:
        return self._now

    # -- stores ---------------------------------------------------------------------------------

    def get_state_store(self, name: str) -> Any:
        """The store ``name`` as processors see it (reads and writes go through its record
        cache and changelog); a global store read-only. :class:`UnknownStateStoreError` if
        the topology has no such store."""
        for task in self._tasks.values():
            if name in task.store_layers:
                return task.store_layers[name]
        if name in self._global_stores:
            return ReadOnlyStoreView(self._global_stores[name])
        raise UnknownStateStoreError(
            f"the topology has no store named {name!r} (its stores: "
            f"{sorted(self.get_all_state_stores())})",
            store_name=name,
        )

    def get_key_value_store(self, name: str) -> Any:
        """The key-value store ``name``: ``get``, ``range``, ``all``,
        ``approximate_num_entries``, and ``put``/``delete`` on a task store. A DSL store
        takes and returns typed keys and values (through its serdes)."""
        return self._typed(name)

    def get_window_store(self, name: str) -> Any:
        """The window store ``name`` (a DSL windowed aggregation's): ``fetch(key, time_from,
        time_to)``, ``fetch_all(time_from, time_to)``, ``all()``."""
        return self._typed(name)

    def get_versioned_key_value_store(self, name: str) -> Any:
        """The versioned store ``name`` (a table's with ``Materialized(versioned_retention=
        ...)``): ``get(key)``, ``get(key, as_of)`` (``VersionedRecord`` or ``None``),
        ``put(key, value, timestamp)``, ``delete(key, timestamp)``."""
        return self._typed(name)

    def get_session_store(self, name: str) -> Any:
        """The session store ``name`` (a DSL session aggregation's): ``fetch(key)``,
        ``find_sessions(key, earliest_end, latest_start)``, ``all()``."""
        return self._typed(name)

    def _typed(self, name: str) -> Any:
        store = self.get_state_store(name)
        spec = self._topology.stores.get(name) or self._topology.global_stores.get(name)
        typed = getattr(spec, "typed", None)
        return typed(store) if typed is not None else store

    def get_all_state_stores(self) -> dict[str, Any]:
        """Every store of the topology, by name."""
        stores: dict[str, Any] = {
            name: ReadOnlyStoreView(store) for name, store in self._global_stores.items()
        }
        for task in self._tasks.values():
            stores.update(task.store_layers)
        return stores

    # -- metrics --------------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """The metrics of ``StreamsApp.metrics()`` that a driver has: ``state``,
        ``process-total`` and ``dropped-records-total`` (bad records, and those the handlers
        chose to drop)."""
        return {
            "state": "NOT_RUNNING" if self._closed else "RUNNING",
            "process-total": self._process_total,
            "dropped-records-total": sum(t.dropped_records() for t in self._tasks.values()),
        }

    # -- processing -----------------------------------------------------------------------------

    def _task_ids(self) -> list[Any]:
        if not self._topology.is_graph:
            return [0]
        return [TaskId(i, 0) for i in range(len(self._topology.graph().subtopologies))]

    def _position(self, tp: TopicPartition) -> int:
        # Every record of a topic is handed to its task when it is piped or produced.
        return len(self._logs.get(tp.topic, ()))

    def _pipe(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
    ) -> None:
        self._check_open()
        self._piped.add(topic)
        self._producer.produce(topic, value, key, timestamp=timestamp, headers=headers or None)
        self._complete()

    def _complete(self) -> None:
        """Hands every record written to a topic the topology reads to its reader (piped ones,
        and those the topology itself wrote: repartition topics, a sink writing back to a
        source or a global store's topic), processes until nothing more can be, then commits
        every task."""
        while True:
            fed = self._feed()
            processed = 0
            for task in self._tasks.values():
                if task.group.num_buffered():
                    # Every partition's records are all here: an empty one has no lag.
                    task.update_lags(dict.fromkeys(task.partitions, 0))
                    # One record at a time, the caches flushing after each: Kafka's driver
                    # commits after every record a task processes (repartitioned ones too).
                    while task.process(1):
                        processed += 1
                        task.flush_caches()
            self._process_total += processed
            if not fed and not processed:
                # The record caches flush as Kafka's driver commits after each record: what
                # they forward to repartition topics is processed before pipe_input returns.
                for task in self._tasks.values():
                    task.flush_caches()
                if not self._feed():
                    break
        self._commit()

    def _feed(self) -> bool:
        fed = False
        for topic, start in self._fed.items():
            log = self._logs.get(topic, [])
            if len(log) == start:
                continue
            self._fed[topic] = len(log)
            fed = True
            store_name = self._global_topics.get(topic)
            if store_name is not None:
                self._update_global_store(store_name, log[start:])
            else:
                task = self._tasks[self._topology.task_id(topic, 0)]
                task.add_records(TopicPartition(topic, 0), log[start:])
        return fed

    def _update_global_store(self, name: str, messages: list[Message]) -> None:
        store = self._global_stores[name]
        for message in messages:
            key, value = message.key(), message.value()
            if key is None:
                raise StreamsError(
                    f"global store {name!r}: a record without a key cannot be stored",
                    topic=message.topic(),
                    partition=0,
                    offset=message.offset(),
                )
            if value is None:
                store.delete(key)
            else:
                store.put(key, value)

    def _commit(self) -> None:
        for task in self._tasks.values():
            task.flush_caches()
        self._producer.flush()
        for task in self._tasks.values():
            if self.config.exactly_once:
                task.committable_offsets()
                task.apply_committed()
            else:
                task.prepare_commit()
            task.mark_committed()

    # -- life -----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StreamsError("the TopologyTestDriver is closed")

    def close(self) -> None:
        """Closes the processors and stores, and deletes the application's state (Kafka's
        driver does too), and the temporary state directory."""
        if self._closed:
            return
        self._closed = True
        try:
            for task in self._tasks.values():
                task.close()
            for store in self._global_stores.values():
                store.close()
        finally:
            # Kafka's driver cleans its state directory on close: the next driver of the same
            # application starts with empty stores.
            shutil.rmtree(self.config.app_dir(), ignore_errors=True)
            if self._temporary is not None:
                self._temporary.cleanup()
