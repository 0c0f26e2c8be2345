"""The exception hierarchy of streamstate.

Python owns these classes; the Rust extension raises them by import, so an error raised deep in
Rust is the same class a user catches here, and it survives pickling across Spark workers.

Interactive-query errors follow KIP-216: every error a store facade raises says whether to
*retry* (``StateStoreRetryableError``), *rediscover* the store (``StateStoreMigratedError``) or
*give up* (``StateStoreFailError``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AuthenticationError",
    "CorruptCheckpointError",
    "DeserializationError",
    "InvalidStateStoreError",
    "InvalidStateStorePartitionError",
    "InvalidTimestampError",
    "NoSuchElementError",
    "ProcessorStateError",
    "SaslAuthenticationError",
    "SslAuthenticationError",
    "StateStoreFailError",
    "StateStoreMigratedError",
    "StateStoreNotAvailableError",
    "StateStoreRetryableError",
    "StreamsError",
    "StreamsNotStartedError",
    "StreamsRebalancingError",
    "TaskCorruptedError",
    "TaskMigratedError",
    "TopologyError",
    "UnknownStateStoreError",
]


class StreamsError(Exception):
    """Base of every streamstate error.

    Carries where it happened, as far as it is known: ``topic``, ``partition``, ``offset`` and
    ``store_name``. The message names each known one, so a log line alone tells an operator
    which record or store to look at.
    """

    topic: str | None
    partition: int | None
    offset: int | None
    store_name: str | None

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        store_name: str | None = None,
    ) -> None:
        self.reason = message
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.store_name = store_name
        super().__init__(_with_location(message, topic, partition, offset, store_name))

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's default reduce replays ``args`` positionally, which would lose the
        # keyword-only location attributes (and double the location suffix).
        location = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "store_name": self.store_name,
        }
        return (_rebuild, (type(self), self.reason, location, self.__dict__))


def _rebuild(
    cls: type[StreamsError], message: str, location: dict[str, Any], state: dict[str, Any]
) -> StreamsError:
    err = cls(message, **location)
    err.__dict__.update(state)
    return err


def _with_location(
    message: str,
    topic: str | None,
    partition: int | None,
    offset: int | None,
    store_name: str | None,
) -> str:
    parts = []
    if store_name is not None:
        parts.append(f"store {store_name!r}")
    if topic is not None:
        parts.append(f"topic {topic!r}")
    if partition is not None:
        parts.append(f"partition {partition}")
    if offset is not None:
        parts.append(f"offset {offset}")
    if not parts:
        return message
    return f"{message} ({', '.join(parts)})"


class DeserializationError(StreamsError, ValueError):
    """A record's key or value could not be deserialized."""


class InvalidTimestampError(StreamsError, ValueError):
    """A timestamp extractor found no valid timestamp and its policy is to fail."""


class CorruptCheckpointError(StreamsError):
    """A ``.checkpoint`` file could not be parsed; the store must be restored from scratch."""


class ProcessorStateError(StreamsError):
    """A state store or its changelog is in a state that processing cannot continue from."""


class TaskCorruptedError(StreamsError):
    """A task's state is inconsistent with its changelog; its stores are wiped and restored."""


class TaskMigratedError(StreamsError):
    """A task now belongs to another member of the group; this member must rejoin."""


class TopologyError(StreamsError, ValueError):
    """A topology that cannot run (Kafka's ``TopologyException``): a duplicate or unknown name,
    a cycle, a store connected to no processor, source topics of one sub-topology that are not
    co-partitioned, an internal topic with the wrong partition count. Also a ``ValueError``."""


class AuthenticationError(StreamsError):
    """The cluster refused this client's credentials (Kafka's ``AuthenticationException``):
    a wrong password, an unknown user, a mechanism the listener lacks, a certificate either
    side does not trust. Never retried, since retrying cannot fix it; the subclass says which
    layer refused, and the message names the broker (and the SASL mechanism)."""


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication failed (Kafka's ``SaslAuthenticationException``): the message names
    the mechanism and carries the broker's own words."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed (Kafka's ``SslAuthenticationException``): an untrusted or
    mismatched broker certificate, or a listener that requires a client certificate
    (``ssl.client.auth=required``) and got none it trusts."""


class NoSuchElementError(StreamsError, LookupError):
    """A test output topic of the ``TopologyTestDriver`` was read while empty (Java's
    ``NoSuchElementException``). Also a ``LookupError``."""


class InvalidStateStoreError(StreamsError):
    """An interactive query could not be served (KIP-216); the subclass says what to do."""


class StateStoreRetryableError(InvalidStateStoreError):
    """The store is briefly unavailable: retry the same query after a short wait."""


class StreamsNotStartedError(StateStoreRetryableError):
    """The client is still ``CREATED``: call ``start()`` and retry."""


class StreamsRebalancingError(StateStoreRetryableError):
    """The client is ``REBALANCING`` or ``RESTORING``: retry once it is ``RUNNING``."""


class StateStoreMigratedError(InvalidStateStoreError):
    """The store was closed or moved away while ``RUNNING``: rediscover where it lives now."""


class InvalidStateStorePartitionError(StateStoreMigratedError):
    """The requested partition of the store is not hosted on this client."""


class StateStoreFailError(InvalidStateStoreError):
    """Fatal for this client: neither retrying nor rediscovering here will help."""


class StateStoreNotAvailableError(StateStoreFailError):
    """The client is shutting down, stopped or failed (``PENDING_SHUTDOWN``, ``NOT_RUNNING``,
    ``PENDING_ERROR`` or ``ERROR``)."""


class UnknownStateStoreError(StateStoreFailError):
    """No store of that name exists in this client's topology."""
