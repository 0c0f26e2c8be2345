"""Every Kafka client's configuration, built here, with the user's overrides merged in one place.

A :class:`~streamstate.StreamsApp` runs four kinds of clients per Kafka Streams' design: each
stream thread's *main consumer* (a group member) and *producer* (sinks and changelogs), its
*restore consumer* (assigned changelog partitions by hand), and the global thread's *global
consumer*; an *admin* client creates changelog topics. Each builder below starts from the
settings streamstate needs and lays the user's overrides over them last, so a user setting
always wins. The overrides come from the app's config under Kafka Streams' prefixes
(:data:`PREFIXES`): ``consumer.*``, ``producer.*``, ``restore.consumer.*``,
``global.consumer.*``, ``admin.*``. Settings that say how to reach the cluster
(``security.protocol``, ``sasl.*``, ``ssl.*``: :func:`is_connection_setting`) may also be given
without a prefix, as in Kafka Streams: they then reach every client, under any prefixed value.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ADMIN_PREFIX",
    "CONSUMER_PREFIX",
    "GLOBAL_CONSUMER_PREFIX",
    "PREFIXES",
    "PRODUCER_PREFIX",
    "RESTORE_CONSUMER_PREFIX",
    "Overrides",
    "admin_config",
    "connection_settings",
    "global_consumer_config",
    "is_connection_setting",
    "main_consumer_config",
    "producer_config",
    "restore_consumer_config",
    "thread_restore_consumer_config",
]

CONSUMER_PREFIX = "consumer."
PRODUCER_PREFIX = "producer."
RESTORE_CONSUMER_PREFIX = "restore.consumer."
GLOBAL_CONSUMER_PREFIX = "global.consumer."
ADMIN_PREFIX = "admin."
PREFIXES = (
    CONSUMER_PREFIX,
    PRODUCER_PREFIX,
    RESTORE_CONSUMER_PREFIX,
    GLOBAL_CONSUMER_PREFIX,
    ADMIN_PREFIX,
)
"""The config prefixes that pass settings to one kind of client, as in Kafka Streams."""

Overrides = Mapping[str, Mapping[str, Any]]
"""The user's client settings by prefix, ``{"consumer.": {"fetch.min.bytes": 1}, ...}`` (what
``StreamsConfig.overrides`` holds); a prefix may be missing."""

# Kafka Streams' transaction.timeout.ms under exactly-once (see producer_config).
_TRANSACTION_TIMEOUT_MS = 10_000
# Bytes per partition per fetch of a restore consumer (see restore_consumer_config).
_FETCH_BYTES = 4 * 1024 * 1024
# How long librdkafka waits before fetching again once its prefetch queue was full (its default,
# 1,000 ms, starves a reader that drains the queue in a fraction of that: see
# restore_consumer_config).
_FETCH_QUEUE_BACKOFF_MS = 10
# The longest the broker holds a restore consumer's fetch waiting for data (librdkafka's
# default: 500 ms; see restore_consumer_config).
_FETCH_WAIT_MAX_MS = 50


def _merged(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` laid over it: the one place a user setting beats ours."""
    base.update(overrides)
    return base


_MAIN_HEARTBEAT_MS = 500


def main_consumer_config(
    bootstrap_servers: str,
    *,
    group_id: str,
    client_id: str,
    partition_assignment_strategy: str,
    session_timeout_ms: int,
    group_instance_id: str | None = None,
    eos: bool = False,
    overrides: Overrides | None = None,
) -> dict[str, Any]:
    """A stream thread's main consumer: a member of group ``group_id`` (the application id)
    that commits by hand, starts at the earliest offset without a committed one, and reads
    ``read_uncommitted``, or ``read_committed`` under exactly-once (``eos``: records of aborted
    transactions are never processed, and librdkafka then fetches committed offsets with
    ``RequireStable``, KIP-447); ``group_instance_id`` makes it a static member.
    End-of-partition events are on: they tell a task that an empty partition has no lag
    (KIP-695 idling). It heartbeats every 500 ms (at most a third of the session timeout)
    where Kafka's consumers default to 3 s: librdkafka hears of a rebalance at a member's next
    heartbeat, and an instance joining a cooperative group takes two rounds, during which the
    partitions on the move are processed by nobody (``docs/runtime.md``). Its
    ``fetch.queue.backoff.ms`` is 10 ms, as the restore consumer's (librdkafka's default, 1 s,
    paused the fetching of a partition for a second whenever its prefetch queue had been full,
    and after a restore's pause and resume: the DSL benchmark's first record came 1 s after
    RUNNING in 5 runs of 6). ``consumer.*`` overrides apply."""
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": group_id,
        "client.id": client_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": partition_assignment_strategy,
        "session.timeout.ms": session_timeout_ms,
        "heartbeat.interval.ms": max(1, min(_MAIN_HEARTBEAT_MS, session_timeout_ms // 3)),
        "isolation.level": "read_committed" if eos else "read_uncommitted",
        "enable.partition.eof": True,
        "fetch.queue.backoff.ms": _FETCH_QUEUE_BACKOFF_MS,
    }
    if group_instance_id:
        base["group.instance.id"] = group_instance_id
    return _merged(base, (overrides or {}).get(CONSUMER_PREFIX, {}))


def producer_config(
    bootstrap_servers: str,
    *,
    client_id: str,
    transactional_id: str | None = None,
    overrides: Overrides | None = None,
) -> dict[str, Any]:
    """A stream thread's producer: idempotent, lingering 5 ms to batch sink and changelog
    records, partitioning keyed records by murmur2 of the key as the Java producer does (so
    streamstate and Kafka Streams apps read each other's topics co-partitioned; librdkafka's
    default is CRC32). Under exactly-once, ``transactional_id`` makes it transactional, with
    ``transaction.timeout.ms=10000`` as Kafka Streams sets it (a transaction left open by a
    crashed member blocks ``read_committed`` readers of its partitions for at most that long;
    librdkafka's default is 60 s). ``producer.*`` overrides apply."""
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_id,
        "enable.idempotence": True,
        "linger.ms": 5,
        "partitioner": "murmur2_random",
    }
    if transactional_id is not None:
        base["transactional.id"] = transactional_id
        base["transaction.timeout.ms"] = _TRANSACTION_TIMEOUT_MS
    return _merged(base, (overrides or {}).get(PRODUCER_PREFIX, {}))


def restore_consumer_config(
    bootstrap_servers: str, *, eos: bool = False, **overrides: Any
) -> dict[str, Any]:
    """The configuration of a restore consumer for :class:`~streamstate.StoreChangelogReader`.

    Pass it to ``confluent_kafka.Consumer``. Settings, each overridable with ``overrides``
    (dotted keys, e.g. ``**{"fetch.max.bytes": 1 << 20}``):

    * ``auto.offset.reset=error``: an out-of-range position is reported (the reader then wipes
      the store and restores it from the beginning) rather than silently moved to the log start
      over a store that still holds what the lost records had written. Kafka Streams sets
      ``none``, the Java equivalent, on its restore consumer.
    * ``isolation.level``: ``read_committed`` when ``eos`` (records of aborted transactions are
      never restored, and the end offset the reader reads is the last stable offset), else
      ``read_uncommitted`` (the Java default; librdkafka's own default is ``read_committed``).
    * ``enable.auto.commit=false`` and ``enable.auto.offset.store=false``: the consumer never
      commits. confluent-kafka insists on a ``group.id``, so a unique one is set, but the
      consumer never joins that group (the reader assigns partitions manually).
    * ``allow.auto.create.topics=false``: reading a changelog's offsets or metadata never creates
      it, even on a broker with ``auto.create.topics.enable=true`` (Kafka's default); a missing
      changelog stays missing and is reported.
    * ``enable.partition.eof=true``: end-of-partition events tell the reader where the fetcher
      stands even when nothing but transaction markers is left to read.
    * ``fetch.queue.backoff.ms=10`` (librdkafka's default is 1,000): once its prefetch queue
      holds ``queued.min.messages`` (100k) records, librdkafka fetches again only after this
      pause; a restore drains 100k records in a fraction of a second, and with the default it
      then sat idle for most of each second (a bare consume loop over 1M records took 7 s with
      the default, 1.8-3 s with 10 ms; ``docs/restoration.md``).
    * ``fetch.wait.max.ms=50`` (librdkafka's default is 500): a fetch for partitions already
      at their end is held by the broker that long, and partitions assigned meanwhile are only
      fetched after it returns (one fetch per broker at a time), so each partition that started
      restoring while another had caught up waited up to half a second; a restore reads to a
      known end offset and has nothing to wait for there.
    * ``check.crcs=true``: a record batch damaged on disk or on the wire is an error naming its
      offset, never records applied from damaged bytes (librdkafka's default is ``false``).
    * ``max.partition.fetch.bytes=4 MiB`` (librdkafka's default is 1 MiB): a restore reads a
      partition from start to end as fast as it can. A bare consume loop over one partition of
      100-byte records read ~110k records/s here with 1 MiB fetches, ~360k with 4 MiB and
      ~400k with 10 MiB, at a peak RSS of 100, 285 and 575 MB (``docs/restoration.md``).
    """
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"streamstate-restore-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "isolation.level": "read_committed" if eos else "read_uncommitted",
        "enable.partition.eof": True,
        "max.partition.fetch.bytes": _FETCH_BYTES,
        "fetch.queue.backoff.ms": _FETCH_QUEUE_BACKOFF_MS,
        "fetch.wait.max.ms": _FETCH_WAIT_MAX_MS,
        "check.crcs": True,
        "allow.auto.create.topics": False,
    }
    return _merged(base, overrides)


def thread_restore_consumer_config(
    bootstrap_servers: str, *, client_id: str, eos: bool = False, overrides: Overrides | None = None
) -> dict[str, Any]:
    """A stream thread's restore consumer: :func:`restore_consumer_config` named ``client_id``,
    reading ``read_committed`` under exactly-once (``eos``: a restore ends at the last stable
    offset and never applies an aborted transaction's changelog records) and
    ``read_uncommitted`` otherwise, as Kafka Streams does. ``restore.consumer.*`` overrides
    apply."""
    user = (overrides or {}).get(RESTORE_CONSUMER_PREFIX, {})
    return restore_consumer_config(
        bootstrap_servers, eos=eos, **_merged({"client.id": client_id}, user)
    )


def global_consumer_config(
    bootstrap_servers: str, *, client_id: str, eos: bool = False, overrides: Overrides | None = None
) -> dict[str, Any]:
    """The global thread's consumer: a :func:`restore_consumer_config` (it bootstraps global
    stores with a changelog reader, then follows their topics) named ``client_id``, reading
    ``read_committed`` under exactly-once (``eos``) as Kafka Streams' global consumer does, and
    ``read_uncommitted`` otherwise (Kafka's at-least-once default: an open transaction of
    another producer on a global topic then never holds the bootstrap back at its last stable
    offset). ``global.consumer.*`` overrides apply."""
    user = (overrides or {}).get(GLOBAL_CONSUMER_PREFIX, {})
    return restore_consumer_config(
        bootstrap_servers, eos=eos, **_merged({"client.id": client_id}, user)
    )


# Client settings that decide how to reach the cluster (as opposed to how to consume or produce).
_CONNECTION_PREFIXES = ("security.protocol", "sasl.", "ssl.", "enable.ssl.", "client.dns.")


def is_connection_setting(name: str) -> bool:
    """Whether the client setting ``name`` says how to reach the cluster (``security.protocol``,
    ``sasl.*``, ``ssl.*``) rather than how to consume or produce."""
    return name.startswith(_CONNECTION_PREFIXES)


def connection_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of ``config`` that say how to reach the cluster (``security.protocol``,
    ``sasl.*``, ``ssl.*``): what another client of the same cluster (an admin client reading
    metadata, say) needs too."""
    return {k: v for k, v in config.items() if is_connection_setting(k)}


def admin_config(
    bootstrap_servers: str, *, overrides: Overrides | None = None, **settings: Any
) -> dict[str, Any]:
    """An admin client's configuration (creating changelog topics, reading metadata), with
    ``settings`` added (``log_level=0`` silences librdkafka's log for one-shot probes) and the
    ``admin.*`` overrides laid over them."""
    user = (overrides or {}).get(ADMIN_PREFIX, {})
    return _merged(_merged({"bootstrap.servers": bootstrap_servers}, settings), user)
