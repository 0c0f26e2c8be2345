"""Where a key lives: ``HostInfo``, ``KeyQueryMetadata`` and the streams group members a
``StreamsApp`` runs under ``group.protocol="streams"``.

Under the Streams rebalance protocol (KIP-1071) every heartbeat response can carry every
instance's ``application.server`` endpoint with the partitions of its active and standby tasks
(``partitionsByUserEndpoint``). :func:`key_query_metadata` answers Kafka's
``queryMetadataForKey`` from it: the key's partition is the default partitioner's (murmur2 of
the serialized key over the partition count of the store's source topic with the most
partitions, as Kafka's ``StreamsMetadataState``), and the hosts are those whose tasks read that
partition of a source topic of the store's sub-topology.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamstate.app.config import StreamsConfig
from streamstate.app.streams_group import (
    EndpointPartitions,
    SslSettings,
    StreamsGroupMember,
    sasl_settings,
)
from streamstate.app.task_assignment import group_topology
from streamstate.app.topology import Topology
from streamstate.clients.config import CONSUMER_PREFIX
from streamstate.errors import AuthenticationError, StreamsError
from streamstate.records import TopicPartition

__all__ = [
    "HostInfo",
    "KeyQueryMetadata",
    "StreamsMetadata",
    "check_streams_broker",
    "key_query_metadata",
    "murmur2",
    "new_streams_member",
    "streams_metadata",
]


@dataclass(frozen=True)
class HostInfo:
    """An instance's ``application.server``: ``host`` and ``port`` (hashable)."""

    host: str
    port: int

    @staticmethod
    def unavailable() -> HostInfo:
        """Kafka's ``HostInfo.unavailable()``: ``("unavailable", -1)``."""
        return HostInfo("unavailable", -1)


@dataclass(frozen=True)
class KeyQueryMetadata:
    """Where a key lives (Kafka's ``KeyQueryMetadata``): the instance running the active task
    of its partition, those keeping standbys of it, and the partition."""

    active_host: HostInfo
    standby_hosts: frozenset[HostInfo] = field(default_factory=frozenset)
    partition: int = -1


@dataclass(frozen=True)
class StreamsMetadata:
    """One instance of the application (Kafka's ``StreamsMetadata``): its endpoint, the stores
    of its active and standby tasks, and the source partitions of each."""

    host_info: HostInfo
    state_store_names: frozenset[str]
    topic_partitions: frozenset[TopicPartition]
    standby_topic_partitions: frozenset[TopicPartition]


def streams_metadata(
    endpoints: Iterable[EndpointPartitions], stores_by_topic: Mapping[str, Iterable[str]]
) -> list[StreamsMetadata]:
    """Every instance's :class:`StreamsMetadata`, from the endpoints the broker shares;
    ``stores_by_topic`` names the stores of the sub-topology reading each source topic."""
    out = []
    for e in endpoints:
        active = frozenset(TopicPartition(t, p) for t, ps in e.active.items() for p in ps)
        standby = frozenset(TopicPartition(t, p) for t, ps in e.standby.items() for p in ps)
        topics = {tp.topic for tp in active | standby}
        stores = frozenset(s for t in topics for s in stores_by_topic.get(t, ()))
        out.append(StreamsMetadata(HostInfo(e.host, e.port), stores, active, standby))
    return sorted(out, key=lambda m: (m.host_info.host, m.host_info.port))


NOT_AVAILABLE = KeyQueryMetadata(HostInfo.unavailable(), frozenset(), -1)
"""Kafka's ``KeyQueryMetadata.NOT_AVAILABLE``: nothing known yet (no endpoint received)."""


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (a signed 32-bit int), the default partitioner's hash."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length - length % 4
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, partitions: int) -> int:
    """The default partitioner's partition of a serialized key (``toPositive(murmur2) % n``)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def serialize_key(key: Any, serializer: Any, topic: str) -> bytes:
    """``key``'s bytes: through ``serializer`` (a :class:`~streamstate.serde.Serde`, a
    serializer with ``serialize(topic, key)``, or a callable), or ``key`` itself when bytes."""
    if serializer is None:
        if isinstance(key, bytes | bytearray):
            return bytes(key)
        raise StreamsError(
            f"query_metadata_for_key needs a key_serializer for a {type(key).__name__} key"
        )
    inner = getattr(serializer, "serializer", serializer)
    raw = inner.serialize(topic, key) if hasattr(inner, "serialize") else inner(key)
    if raw is None:
        raise StreamsError("the key serialized to None")
    return bytes(raw)


def key_query_metadata(
    endpoints: Iterable[EndpointPartitions],
    source_topics: Iterable[str],
    partition_counts: Mapping[str, int],
    key: bytes,
) -> KeyQueryMetadata:
    """Where serialized ``key`` lives, for a store read by a sub-topology with
    ``source_topics`` (see the module doc); :data:`NOT_AVAILABLE` when no endpoint is known
    yet, and an ``unavailable`` active host while no instance runs the partition."""
    endpoints = list(endpoints)
    topics = [t for t in source_topics if partition_counts.get(t)]
    if not endpoints or not topics:
        return NOT_AVAILABLE
    widest = max(topics, key=lambda t: partition_counts[t])
    partition = default_partition(key, partition_counts[widest])
    active = HostInfo.unavailable()
    standbys: set[HostInfo] = set()
    for e in endpoints:
        host = HostInfo(e.host, e.port)
        if any(partition in e.active.get(t, ()) for t in topics):
            active = host
        elif any(partition in e.standby.get(t, ()) for t in topics):
            standbys.add(host)
    return KeyQueryMetadata(active, frozenset(standbys), partition)


def new_streams_member(
    config: StreamsConfig,
    topology: Topology,
    partition_counts: Mapping[str, int],
    process_id: str,
    index: int,
) -> StreamsGroupMember:
    """A stream thread's member of the streams group ``application.id``: the process id is
    the client's (shared by its threads, as Kafka Streams shares it), the endpoint its
    ``application.server``."""
    instance_id = None
    if config.group_instance_id:
        suffix = f"-{index + 1}" if config.num_stream_threads > 1 else ""
        instance_id = f"{config.group_instance_id}{suffix}"
    overrides = config.overrides.get(CONSUMER_PREFIX, {})
    mechanism, username, password = sasl_settings(overrides)
    return StreamsGroupMember(
        config.bootstrap_servers,
        config.application_id,
        group_topology(topology, config.topic_configs, partition_counts),
        process_id=process_id,
        client_id=f"{config.client_id}-StreamThread-{index + 1}-consumer",
        instance_id=instance_id,
        rebalance_timeout_ms=int(overrides.get("max.poll.interval.ms", 300_000)),
        application_server=config.application_server,
        security_protocol=str(overrides.get("security.protocol", "PLAINTEXT")),
        sasl_mechanism=mechanism,
        sasl_username=username,
        sasl_password=password,
        ssl=SslSettings.from_config(overrides),
    )


def check_streams_broker(member: StreamsGroupMember) -> None:
    """Raises the member's :class:`StreamsError` when the broker lacks the streams rebalance
    protocol (naming the broker and ``group.protocol=classic``), and its
    :class:`~streamstate.errors.AuthenticationError` when SASL authentication (naming the
    mechanism and the broker's message) or the TLS handshake fails; other answers (the group
    does not exist yet, say) are fine here."""
    try:
        member.describe()
    except AuthenticationError:
        # A wrong password or an untrusted certificate will not heal: fail start().
        raise
    except StreamsError as exc:
        if "does not support the streams rebalance protocol" in str(exc):
            raise
