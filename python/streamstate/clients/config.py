"""Every Kafka client's configuration, built here, with the user's overrides merged in one place.

A :class:`~streamstate.StreamsApp` runs four kinds of clients per Kafka Streams' design: each
stream thread's *main consumer* (a group member) and *producer* (sinks and changelogs), its
*restore consumer* (assigned changelog partitions by hand), and the global thread's *global
consumer*; an *admin* client creates changelog topics. Each builder below starts from the
settings streamstate needs and lays the user's overrides over them last, so a user setting
always wins. The overrides come from the app's config under Kafka Streams' prefixes
(:data:`PREFIXES`): ``consumer.*``, ``producer.*``, ``restore.consumer.*``,
``global.consumer.*``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CONSUMER_PREFIX",
    "GLOBAL_CONSUMER_PREFIX",
    "PREFIXES",
    "PRODUCER_PREFIX",
    "RESTORE_CONSUMER_PREFIX",
    "Overrides",
    "admin_config",
    "global_consumer_config",
    "main_consumer_config",
    "producer_config",
    "restore_consumer_config",
    "thread_restore_consumer_config",
]

CONSUMER_PREFIX = "consumer."
PRODUCER_PREFIX = "producer."
RESTORE_CONSUMER_PREFIX = "restore.consumer."
GLOBAL_CONSUMER_PREFIX = "global.consumer."
PREFIXES = (CONSUMER_PREFIX, PRODUCER_PREFIX, RESTORE_CONSUMER_PREFIX, GLOBAL_CONSUMER_PREFIX)
"""The config prefixes that pass settings to one kind of client, as in Kafka Streams."""

Overrides = Mapping[str, Mapping[str, Any]]
"""The user's client settings by prefix, ``{"consumer.": {"fetch.min.bytes": 1}, ...}`` (what
``StreamsConfig.overrides`` holds); a prefix may be missing."""

# Bytes per partition per fetch of a restore consumer (see restore_consumer_config).
_FETCH_BYTES = 4 * 1024 * 1024


def _merged(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` laid over it: the one place a user setting beats ours."""
    base.update(overrides)
    return base


def main_consumer_config(
    bootstrap_servers: str,
    *,
    group_id: str,
    client_id: str,
    partition_assignment_strategy: str,
    session_timeout_ms: int,
    group_instance_id: str | None = None,
    overrides: Overrides | None = None,
) -> dict[str, Any]:
    """A stream thread's main consumer: a member of group ``group_id`` (the application id)
    that commits by hand, starts at the earliest offset without a committed one, and reads
    ``read_uncommitted``; ``group_instance_id`` makes it a static member. ``consumer.*``
    overrides apply."""
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": group_id,
        "client.id": client_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": partition_assignment_strategy,
        "session.timeout.ms": session_timeout_ms,
        "isolation.level": "read_uncommitted",
    }
    if group_instance_id:
        base["group.instance.id"] = group_instance_id
    return _merged(base, (overrides or {}).get(CONSUMER_PREFIX, {}))


def producer_config(
    bootstrap_servers: str, *, client_id: str, overrides: Overrides | None = None
) -> dict[str, Any]:
    """A stream thread's producer: idempotent, lingering 5 ms to batch sink and changelog
    records. ``producer.*`` overrides apply."""
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_id,
        "enable.idempotence": True,
        "linger.ms": 5,
    }
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
    * ``enable.partition.eof=true``: end-of-partition events tell the reader where the fetcher
      stands even when nothing but transaction markers is left to read.
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
    }
    return _merged(base, overrides)


def thread_restore_consumer_config(
    bootstrap_servers: str, *, client_id: str, overrides: Overrides | None = None
) -> dict[str, Any]:
    """A stream thread's restore consumer: :func:`restore_consumer_config` named ``client_id``.
    ``restore.consumer.*`` overrides apply."""
    user = (overrides or {}).get(RESTORE_CONSUMER_PREFIX, {})
    return restore_consumer_config(bootstrap_servers, **_merged({"client.id": client_id}, user))


def global_consumer_config(
    bootstrap_servers: str, *, client_id: str, overrides: Overrides | None = None
) -> dict[str, Any]:
    """The global thread's consumer: a :func:`restore_consumer_config` (it bootstraps global
    stores with a changelog reader, then follows their topics) named ``client_id``.
    ``global.consumer.*`` overrides apply."""
    user = (overrides or {}).get(GLOBAL_CONSUMER_PREFIX, {})
    return restore_consumer_config(bootstrap_servers, **_merged({"client.id": client_id}, user))


def admin_config(bootstrap_servers: str, **settings: Any) -> dict[str, Any]:
    """An admin client's configuration (creating changelog topics, reading metadata), with
    ``settings`` added (``log_level=0`` silences librdkafka's log for one-shot probes)."""
    return _merged({"bootstrap.servers": bootstrap_servers}, settings)
