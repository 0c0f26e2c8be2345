"""Internal topics (changelogs, repartition topics): their settings and their creation, as Kafka
Streams' ``InternalTopicManager`` makes them ready.

``replication.factor`` (``-1``, the default: the broker's ``default.replication.factor``, as
in Kafka 3.0+) is every internal topic's replication factor; ``topic.<name>`` sets the topic
config ``<name>`` on every internal topic (Kafka's ``StreamsConfig.topicPrefix``). A topic's
configs are layered as Kafka layers them: the library's defaults for its kind (a changelog is
compacted; a repartition topic deletes, with infinite retention) < ``topic.*`` < the store's
own (``Materialized`` and friends). :func:`make_ready` creates the missing topics and checks
the partition count of those that exist: an internal topic with another count than the
topology needs fails the start, naming it, since its partition ``p`` would not hold task
``p``'s data.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from streamstate.clients.kafka_errors import error_text, kafka_error
from streamstate.errors import StreamsError, TopologyError

__all__ = [
    "CHANGELOG_TOPIC_CONFIG",
    "TOPIC_PREFIX",
    "internal_topic_config",
    "make_ready",
    "parse_replication_factor",
    "parse_topic_configs",
]

_log = logging.getLogger("streamstate.app")
TOPIC_PREFIX = "topic."
"""The prefix of settings applied to every internal topic (Kafka's ``topic.``)."""
CHANGELOG_TOPIC_CONFIG = {"cleanup.policy": "compact"}
"""Kafka Streams' setting of a key-value store's changelog (a window store's adds its own)."""
_TIMEOUT_S = 30.0


def parse_replication_factor(value: Any) -> int:
    """``replication.factor``: ``-1`` (the broker's default) or at least 1."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"replication.factor takes an integer, not {value!r}")
    try:
        factor = int(value)
    except ValueError:
        raise ValueError(f"replication.factor takes an integer, not {value!r}") from None
    if factor == 0 or factor < -1:
        raise ValueError(
            f"replication.factor must be -1 (the broker's default) or at least 1, not {factor}"
        )
    return factor


def parse_topic_configs(config: Mapping[str, Any]) -> dict[str, str]:
    """The ``topic.*`` settings of ``config`` without their prefix, as the strings the broker
    takes: a string or a number as written, a bool as ``true``/``false``; anything else (a
    ``None``, a list) is a ``ValueError`` naming the setting."""
    configs: dict[str, str] = {}
    for key, value in config.items():
        if not key.startswith(TOPIC_PREFIX):
            continue
        name = key[len(TOPIC_PREFIX) :]
        if not name:
            raise ValueError(
                f"{key!r} names no topic config: use topic.<name>, e.g. topic.min.insync.replicas"
            )
        if isinstance(value, bool):
            configs[name] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            configs[name] = str(value)
        else:
            raise ValueError(
                f"{key} takes a string or a number (a topic config's value), not {value!r}"
            )
    return configs


def internal_topic_config(
    defaults: Mapping[str, str], topic_configs: Mapping[str, str], own: Mapping[str, str] | None
) -> dict[str, str]:
    """A topic's configs: the library's ``defaults`` for its kind, then ``topic.*``, then the
    topic's ``own`` (Kafka's rule: library < global overrides < per-topic overrides)."""
    return {**defaults, **topic_configs, **(own or {})}


def make_ready(admin: AdminClient, wanted: Sequence[NewTopic], existing: Mapping[str, int]) -> None:
    """Creates the topics of ``wanted`` missing from ``existing`` (topic name -> partition
    count on the broker) and checks that those that exist have the partitions wanted. Raises
    :class:`~streamstate.errors.TopologyError` naming a topic with another count (also one
    created meanwhile by another instance) and :class:`~streamstate.errors.StreamsError` when
    the broker refuses a creation."""
    for topic in wanted:
        _check_partitions(topic, existing.get(topic.topic))
    missing = [t for t in wanted if t.topic not in existing]
    if not missing:
        return
    raced: list[NewTopic] = []
    by_name = {t.topic: t for t in missing}
    for name, future in admin.create_topics(missing, operation_timeout=_TIMEOUT_S).items():
        try:
            future.result(timeout=_TIMEOUT_S)
            _log.info("Created internal topic %r", name)
        except Exception as exc:  # a KafkaException, or the future's own timeout
            error = kafka_error(exc) if isinstance(exc, KafkaException) else None
            if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                raced.append(by_name[name])  # another instance made it first: check it
                continue
            text = error_text(exc) if isinstance(exc, KafkaException) else repr(exc)
            raise StreamsError(
                f"could not create internal topic {name!r}: {text}", topic=name
            ) from exc
    if raced:
        metadata = admin.list_topics(timeout=_TIMEOUT_S)
        for topic in raced:
            info = metadata.topics.get(topic.topic)
            _check_partitions(topic, len(info.partitions) if info is not None else None)


def _check_partitions(topic: NewTopic, found: int | None) -> None:
    if found is None or found == topic.num_partitions:
        return
    raise TopologyError(
        f"internal topic {topic.topic!r} exists with {found} partitions, but the topology "
        f"needs {topic.num_partitions}: its partition p would not hold task p's data. Delete "
        "it (with every instance of the app stopped; its contents are rebuilt) or give the "
        f"source topics {found} partitions",
        topic=topic.topic,
    )
