"""``KafkaTestCluster``: a broker plus the client helpers the test suites and benchmarks share.

Create a topic, produce, cut the log (``delete_records``), read offsets and make consumers, all
with real ``confluent_kafka`` clients, on a :class:`~streamstate.testing.LocalKafka` the cluster
starts or on any broker given by address.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streamstate.testing._closing import Closing
from streamstate.testing.broker import LocalKafka, LocalKafkaError, client_config

__all__ = ["KafkaTestCluster"]

_BOOTSTRAP_ENV = "STREAMSTATE_BOOTSTRAP_SERVERS"

Record = tuple[Any, ...] | Mapping[str, Any]

# A test broker does not delete records by time or size after its first retention check: tests
# replay event times from fixed dates, and a windowed store's changelog (cleanup.policy
# compact,delete, retention.ms its store's retention plus a day) lost such records at the
# broker's check (every 5 minutes) while a test still read or restored it. A year between
# checks, not none: Kafka still runs the first one 30 s after start (its initial task delay,
# which also paces its checkpoints, so it stays).
_TEST_BROKER_PROPERTIES: Mapping[str, str] = {
    "log.retention.check.interval.ms": str(365 * 24 * 3600 * 1000)
}


class KafkaTestCluster(Closing):
    """A broker plus the client helpers tests and benchmarks need.

    Wraps either a :class:`LocalKafka` it owns (see :meth:`start_local`) or any broker given by
    address. Every helper uses real ``confluent_kafka`` clients. Producers partition keys with
    ``murmur2_random``, the Java client's default, so keyed records land where Kafka Streams
    would put them.
    """

    bootstrap_servers: str
    broker: LocalKafka | None

    def __init__(self, bootstrap_servers: str, *, broker: LocalKafka | None = None) -> None:
        """Wrap the broker at ``bootstrap_servers``; ``broker``, if given, is stopped by
        :meth:`close`."""
        self.bootstrap_servers = bootstrap_servers
        self.broker = broker
        self._admin: Any = None
        self._producer: Any = None
        self._consumers: list[Any] = []
        self._offsets_consumer: Any = None

    @classmethod
    def start_local(
        cls,
        instance_dir: Path | str,
        *,
        heap_mb: int = 1024,
        timeout: float = 90.0,
        properties: Mapping[str, str] | None = None,
    ) -> KafkaTestCluster:
        """Start a fresh :class:`LocalKafka` in ``instance_dir`` (``properties``: broker
        settings over the defaults) and wrap it (it is stopped by :meth:`close`).

        Unlike a plain :class:`LocalKafka`, the broker checks retention only once, 30 s after
        it starts: records with old timestamps stay in topics with a ``retention.ms`` (a
        windowed store's changelog) for the test's life."""
        settings = {**_TEST_BROKER_PROPERTIES, **(properties or {})}
        broker = LocalKafka(instance_dir, heap_mb=heap_mb, properties=settings)
        address = broker.start(fresh=True, timeout=timeout)
        return cls(address, broker=broker)

    @classmethod
    def from_env_or_start(
        cls, instance_dir: Path | str, *, heap_mb: int = 1024, timeout: float = 90.0
    ) -> KafkaTestCluster:
        """Use the broker named by ``$STREAMSTATE_BOOTSTRAP_SERVERS`` if set, else
        :meth:`start_local` one in ``instance_dir``."""
        external = os.environ.get(_BOOTSTRAP_ENV, "").strip()
        if external:
            return cls(external)
        return cls.start_local(instance_dir, heap_mb=heap_mb, timeout=timeout)

    @property
    def admin(self) -> Any:
        """A shared ``confluent_kafka.admin.AdminClient`` for this broker."""
        if self._admin is None:
            self._admin = AdminClient(client_config(self.bootstrap_servers))
        return self._admin

    def _get_producer(self) -> Any:
        if self._producer is None:
            self._producer = Producer(
                client_config(
                    self.bootstrap_servers,
                    **{
                        "partitioner": "murmur2_random",
                        "acks": "all",
                        "enable.idempotence": True,
                        "linger.ms": 5,
                    },
                )
            )
        return self._producer

    def create_topic(
        self,
        name: str | None = None,
        *,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        exist_ok: bool = False,
    ) -> str:
        """Create a topic (replication factor 1) and return its name.

        ``name=None`` picks a unique ``test-<hex>`` name. ``config`` sets topic configs such as
        ``{"cleanup.policy": "compact"}``. With ``exist_ok`` a topic of that name that exists
        already is kept as it is (an example run twice, say). Returns once every partition has
        a leader in the broker's metadata.
        """
        topic = name if name is not None else f"test-{uuid.uuid4().hex[:12]}"
        new_topic = NewTopic(
            topic, num_partitions=partitions, replication_factor=1, config=dict(config or {})
        )
        futures = self.admin.create_topics([new_topic], operation_timeout=timeout)
        try:
            futures[topic].result(timeout=timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            exists = getattr(error, "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS
            if not (exist_ok and exists):
                raise LocalKafkaError(f"could not create topic {topic!r}: {exc}") from exc
            partitions = len(self.partitions(topic, timeout=timeout))
        except Exception as exc:
            raise LocalKafkaError(f"could not create topic {topic!r}: {exc}") from exc
        deadline = time.monotonic() + timeout
        while True:
            metadata = self.admin.list_topics(topic=topic, timeout=timeout)
            info = metadata.topics.get(topic)
            if (
                info is not None
                and info.error is None
                and len(info.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in info.partitions.values())
            ):
                return topic
            if time.monotonic() > deadline:
                raise LocalKafkaError(f"topic {topic!r} did not appear in the metadata in time")
            time.sleep(0.05)

    def produce(
        self,
        topic: str,
        records: Iterable[Record],
        *,
        partition: int | None = None,
        timeout: float = 30.0,
    ) -> list[tuple[int, int]]:
        """Produce ``records`` to ``topic``, flush, and return each record's (partition, offset).

        A record is ``(key, value)``, ``(key, value, timestamp_ms)`` or a mapping with ``value``
        and optionally ``key``, ``timestamp`` (ms), ``partition`` and ``headers``. Keys and values
        are ``bytes``, ``str`` (UTF-8) or ``None``. ``partition`` applies to records that do not
        name their own; otherwise the key decides (murmur2, as in Java).

        Raises:
            LocalKafkaError: a record was not delivered.
        """
        producer = self._get_producer()
        results: list[tuple[int, int] | None] = []
        errors: list[str] = []

        def on_delivery(index: int) -> Callable[[Any, Any], None]:
            def callback(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(f"record {index}: {err}")
                else:
                    results[index] = (int(msg.partition()), int(msg.offset()))

            return callback

        for index, record in enumerate(records):
            kwargs: dict[str, Any] = {}
            if isinstance(record, Mapping):
                kwargs["key"] = record.get("key")
                kwargs["value"] = record.get("value")
                if record.get("timestamp") is not None:
                    kwargs["timestamp"] = int(record["timestamp"])
                if record.get("headers") is not None:
                    kwargs["headers"] = record["headers"]
                record_partition = record.get("partition", partition)
            else:
                if len(record) not in (2, 3):
                    raise ValueError(
                        f"record {index}: expected (key, value) or (key, value, timestamp_ms), "
                        f"got {len(record)} items"
                    )
                kwargs["key"] = record[0]
                kwargs["value"] = record[1]
                if len(record) == 3 and record[2] is not None:
                    kwargs["timestamp"] = int(record[2])
                record_partition = partition
            if record_partition is not None:
                kwargs["partition"] = int(record_partition)
            results.append(None)
            kwargs["on_delivery"] = on_delivery(index)
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        remaining = producer.flush(timeout)
        if remaining:
            # Drop what is still queued, so it neither lingers into the next call nor makes
            # close() wait for it.
            producer.purge()
            producer.flush(0)
        if errors and not remaining:
            raise LocalKafkaError(
                f"producing to {topic!r} failed for {len(errors)} record(s): {errors[0]}"
            )
        if remaining or any(r is None for r in results):
            reason = ""
            with contextlib.suppress(Exception):
                info = self.admin.list_topics(topic=topic, timeout=5).topics.get(topic)
                if info is not None and info.error is not None:
                    reason = f" (topic: {info.error.str()})"
            raise LocalKafkaError(
                f"producing to {topic!r} did not finish within {timeout} s{reason}"
            )
        return [r for r in results if r is not None]

    def delete_records(
        self, topic: str, partition: int, before_offset: int, *, timeout: float = 30.0
    ) -> int:
        """Delete the records of ``topic``/``partition`` below ``before_offset`` (the log start
        moves there; ``-1`` means the high watermark). Returns the new low watermark."""
        request = TopicPartition(topic, partition, before_offset)
        futures = self.admin.delete_records([request], operation_timeout=timeout)
        future = next(iter(futures.values()))
        try:
            deleted = future.result(timeout=timeout)
        except Exception as exc:
            raise LocalKafkaError(
                f"delete_records({topic!r}, {partition}, {before_offset}) failed: {exc}"
            ) from exc
        error = getattr(deleted, "error", None)
        if error is not None:
            raise LocalKafkaError(
                f"delete_records({topic!r}, {partition}, {before_offset}) failed: {error}"
            )
        return int(deleted.low_watermark)

    def partitions(self, topic: str, *, timeout: float = 10.0) -> list[int]:
        """The partition numbers of ``topic``, sorted."""
        metadata = self.admin.list_topics(topic=topic, timeout=timeout)
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            problem = info.error if info is not None else "not found"
            raise LocalKafkaError(f"topic {topic!r}: {problem}")
        return sorted(info.partitions)

    def _watermarks(self, topic: str, timeout: float) -> dict[int, tuple[int, int]]:
        if self._offsets_consumer is None:
            # Never subscribes or commits: it only asks the broker for watermarks.
            self._offsets_consumer = Consumer(
                client_config(
                    self.bootstrap_servers,
                    **{"group.id": "streamstate-offsets", "enable.auto.commit": False},
                )
            )
        watermarks: dict[int, tuple[int, int]] = {}
        for partition in self.partitions(topic, timeout=timeout):
            tp = TopicPartition(topic, partition)
            try:
                low, high = self._offsets_consumer.get_watermark_offsets(
                    tp, timeout=timeout, cached=False
                )
            except Exception as exc:
                raise LocalKafkaError(
                    f"watermarks of {topic!r} partition {partition}: {exc}"
                ) from exc
            watermarks[partition] = (int(low), int(high))
        return watermarks

    def end_offsets(self, topic: str, *, timeout: float = 10.0) -> dict[int, int]:
        """``{partition: high watermark}`` (the offset the next record will get)."""
        return {p: high for p, (_, high) in self._watermarks(topic, timeout).items()}

    def beginning_offsets(self, topic: str, *, timeout: float = 10.0) -> dict[int, int]:
        """``{partition: log start offset}`` (the first offset still readable)."""
        return {p: low for p, (low, _) in self._watermarks(topic, timeout).items()}

    def consumer(self, **overrides: Any) -> Any:
        """A new ``confluent_kafka.Consumer`` on this broker, closed by :meth:`close_consumers`.

        Defaults: a unique ``group.id``, ``auto.offset.reset=earliest``,
        ``enable.auto.commit=false``. Keyword arguments override or add config keys; use
        underscores for dots (``auto_offset_reset="latest"``) or pass dotted keys via ``**{}``.
        """
        config = client_config(
            self.bootstrap_servers,
            **{
                "group.id": f"test-group-{uuid.uuid4().hex[:12]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            },
        )
        for key, value in overrides.items():
            config[key.replace("_", ".")] = value
        consumer = Consumer(config)
        self._consumers.append(consumer)
        return consumer

    def adopt(self, client: Any) -> Any:
        """Closes ``client`` (anything with a ``close()``, such as a restore consumer made by
        :func:`~streamstate.clients.restore_consumer.open_restore_consumer`) with the consumers
        of :meth:`consumer`; returns it."""
        self._consumers.append(client)
        return client

    def close_consumers(self) -> None:
        """Close every consumer made by :meth:`consumer` so far."""
        consumers, self._consumers = self._consumers, []
        for consumer in consumers:
            with contextlib.suppress(Exception):
                consumer.close()

    def close(self) -> None:
        """Close the consumers, flush the producer and stop the broker if this object owns one."""
        self.close_consumers()
        if self._producer is not None:
            if self._producer.flush(10):
                self._producer.purge()
            self._producer = None
        if self._offsets_consumer is not None:
            with contextlib.suppress(Exception):
                self._offsets_consumer.close()
            self._offsets_consumer = None
        self._admin = None
        if self.broker is not None:
            self.broker.stop()
