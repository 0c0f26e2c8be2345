"""``StreamsConfig``: a StreamsApp's settings, under Kafka Streams' config names."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamstate.app.handlers import parse_record_handler
from streamstate.app.internal_topics import (
    TOPIC_PREFIX,
    parse_replication_factor,
    parse_topic_configs,
)
from streamstate.clients.config import PREFIXES, is_connection_setting
from streamstate.serde import Serde
from streamstate.timestamps import FailOnInvalidTimestamp

__all__ = [
    "DEFAULT_STATE_CLEANUP_DELAY_MS",
    "DEFAULT_UNCOMMITTED_MAX_BYTES",
    "EOS_COMMIT_INTERVAL_MS",
    "StreamsConfig",
]

_GUARANTEES = ("at_least_once", "exactly_once_v2")
# Kafka 4 removed these (KIP-732 deprecated them in 3.0): refused, naming their replacement.
_REMOVED_GUARANTEES = ("exactly_once", "exactly_once_beta")
EOS_COMMIT_INTERVAL_MS = 100
"""``commit.interval.ms``'s default under ``exactly_once_v2`` (Kafka Streams' too)."""
DEFAULT_UNCOMMITTED_MAX_BYTES = 64 * 1024 * 1024
"""``statestore.uncommitted.max.bytes``'s default (KIP-892's name): 64 MiB per task."""
_KNOWN = {
    "statestore.uncommitted.max.bytes",
    "application.id",
    "bootstrap.servers",
    "state.dir",
    "num.stream.threads",
    "poll.ms",
    "commit.interval.ms",
    "processing.guarantee",
    "default.timestamp.extractor",
    "default.deserialization.exception.handler",
    "deserialization.exception.handler",
    "max.task.idle.ms",
    "group.instance.id",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "client.id",
    "buffered.records.per.partition",
    "processing.exception.handler",
    "default.production.exception.handler",
    "production.exception.handler",
    "task.timeout.ms",
    "default.key.serde",
    "default.value.serde",
    "state.cleanup.delay.ms",
    "replication.factor",
    "errors.dead.letter.queue.topic.name",
    "group.protocol",
    "application.server",
    "num.standby.replicas",
    "python.gc.freeze",
    "query.server.enabled",
    "query.server.forward.timeout.ms",
}
DEFAULT_STATE_CLEANUP_DELAY_MS = 600_000
"""``state.cleanup.delay.ms``'s default (Kafka's): ten minutes."""


@dataclass(frozen=True)
class StreamsConfig:
    """Parsed settings; build with :meth:`from_mapping`.

    ``processing.guarantee`` is ``at_least_once`` (the default) or ``exactly_once_v2`` (KIP-447:
    one transaction per stream thread and commit; ``docs/runtime.md``), under which
    ``commit.interval.ms`` defaults to 100 and ``statestore.uncommitted.max.bytes`` bounds each
    task's uncommitted writes (key + value bytes; the thread commits early past it).
    ``processing.exception.handler`` and ``production.exception.handler`` take
    ``"fail"`` (the default), ``"continue"`` or a callable (``streamstate.app.handlers``).
    Kafka 4's names ``deserialization.exception.handler`` and ``production.exception.handler``
    (KIP-1056) and the deprecated ``default.*`` forms are both accepted; the two forms of one
    setting with different values are a ``ValueError`` naming both.
    ``state.cleanup.delay.ms`` is how long a task directory no task of this client holds is
    kept (``app/state_directory.py``); ``replication.factor`` and ``topic.*`` configure the
    internal topics (``app/internal_topics.py``). ``errors.dead.letter.queue.topic.name``
    (Kafka 4.2+, KIP-1034) names the dead-letter topic (``app/dead_letter_queue.py``).
    ``group.protocol`` is ``classic`` (the default) or ``streams`` (KIP-1071:
    ``docs/rebalancing.md``); ``application.server`` (``host:port``) is this instance's
    endpoint, shared with the group under the streams protocol. ``python.gc.freeze``
    (``True`` by default; not Kafka's) freezes Python's heap as the client starts, so that the
    cyclic collector's full collections during processing skip it
    (``app/garbage_collection.py``). ``query.server.enabled`` (``False`` by default; not
    Kafka's) serves key lookups over HTTP at ``application.server``, forwarding each to the
    instance holding the key, within ``query.server.forward.timeout.ms``
    (``app/query_server.py``).
    """

    application_id: str
    bootstrap_servers: str
    state_dir: Path
    num_stream_threads: int = 1
    poll_ms: int = 100
    commit_interval_ms: int = 30_000
    processing_guarantee: str = "at_least_once"
    default_timestamp_extractor: Any = field(default_factory=FailOnInvalidTimestamp)
    default_deserialization_exception_handler: Any = "fail"
    max_task_idle_ms: int = 0
    group_instance_id: str | None = None
    partition_assignment_strategy: str = "cooperative-sticky"
    session_timeout_ms: int = 10_000
    client_id: str = ""
    buffered_records_per_partition: int = 1_000
    processing_exception_handler: Any = "fail"
    default_production_exception_handler: Any = "fail"
    task_timeout_ms: int = 300_000
    statestore_uncommitted_max_bytes: int = DEFAULT_UNCOMMITTED_MAX_BYTES
    default_key_serde: Any = None
    default_value_serde: Any = None
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    state_cleanup_delay_ms: int = DEFAULT_STATE_CLEANUP_DELAY_MS
    replication_factor: int = -1
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    dead_letter_queue_topic: str | None = None
    # "classic" (librdkafka's group membership) or "streams" (KIP-1071, docs/rebalancing.md).
    group_protocol: str = "classic"
    application_server: str | None = None
    # Standby replicas per stateful task: group.protocol=streams only (docs/rebalancing.md).
    num_standby_replicas: int | None = None
    # Not Kafka's: gc.freeze() of the heap at start (app/garbage_collection.py).
    python_gc_freeze: bool = True
    # Not Kafka's: the HTTP query endpoint at application.server (app/query_server.py).
    query_server_enabled: bool = False
    query_server_forward_timeout_ms: int = 5_000

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> StreamsConfig:
        """Reads Kafka Streams' names; ``consumer.*``, ``producer.*``, ``restore.consumer.*``,
        ``global.consumer.*`` and ``admin.*`` pass settings to those clients, and the settings
        that say how to reach the cluster (``security.protocol``, ``sasl.*``, ``ssl.*``) reach
        every client when given without a prefix (a prefixed value wins). Unknown names raise
        ``ValueError`` (a typo would otherwise be silently ignored)."""
        unknown = [
            k
            for k in config
            if k not in _KNOWN
            and not k.startswith((*PREFIXES, TOPIC_PREFIX))
            and not is_connection_setting(k)
        ]
        if unknown:
            raise ValueError(f"unknown config names {sorted(unknown)}")
        _check_integers(config)
        for required in ("application.id", "bootstrap.servers"):
            if not config.get(required):
                raise ValueError(f"config {required!r} is required")
        guarantee = str(config.get("processing.guarantee", "at_least_once"))
        if guarantee in _REMOVED_GUARANTEES:
            raise ValueError(
                f"processing.guarantee={guarantee} was removed in Kafka 4: use exactly_once_v2"
            )
        if guarantee not in _GUARANTEES:
            raise ValueError(
                f"processing.guarantee must be one of {_GUARANTEES}, not {guarantee!r}"
            )
        eos = guarantee == "exactly_once_v2"
        uncommitted = int(
            config.get("statestore.uncommitted.max.bytes", DEFAULT_UNCOMMITTED_MAX_BYTES)
        )
        if uncommitted < 0:
            raise ValueError(f"statestore.uncommitted.max.bytes must be >= 0, not {uncommitted}")
        # Every client reaches the cluster the same way (Kafka Streams hands its top-level client
        # settings to all of them); a prefixed value, laid over below, wins.
        connection = {k: v for k, v in config.items() if is_connection_setting(k)}
        overrides: dict[str, dict[str, Any]] = {p: dict(connection) for p in PREFIXES}
        for key, value in config.items():
            for prefix in sorted(PREFIXES, key=len, reverse=True):
                if key.startswith(prefix):
                    overrides[prefix][key[len(prefix) :]] = value
                    break
        state_dir = config.get("state.dir") or Path(tempfile.gettempdir()) / "streamstate"
        threads = int(config.get("num.stream.threads", 1))
        if threads < 1:
            raise ValueError(f"num.stream.threads must be >= 1, not {threads}")
        app_id = str(config["application.id"])
        buffered = int(config.get("buffered.records.per.partition", 1_000))
        if buffered < 1:
            raise ValueError(f"buffered.records.per.partition must be >= 1, not {buffered}")
        task_timeout_ms = int(config.get("task.timeout.ms", 300_000))
        if task_timeout_ms < 0:
            raise ValueError(f"task.timeout.ms must be >= 0, not {task_timeout_ms}")
        return cls(
            application_id=app_id,
            bootstrap_servers=str(config["bootstrap.servers"]),
            state_dir=Path(state_dir),
            num_stream_threads=threads,
            poll_ms=int(config.get("poll.ms", 100)),
            commit_interval_ms=int(
                config.get("commit.interval.ms", EOS_COMMIT_INTERVAL_MS if eos else 30_000)
            ),
            processing_guarantee=guarantee,
            default_timestamp_extractor=config.get(
                "default.timestamp.extractor", FailOnInvalidTimestamp()
            ),
            default_deserialization_exception_handler=_renamed(
                config, "deserialization.exception.handler", "fail"
            ),
            max_task_idle_ms=int(config.get("max.task.idle.ms", 0)),
            group_instance_id=config.get("group.instance.id"),
            partition_assignment_strategy=str(
                config.get("partition.assignment.strategy", "cooperative-sticky")
            ),
            session_timeout_ms=int(config.get("session.timeout.ms", 10_000)),
            client_id=str(config.get("client.id") or app_id),
            buffered_records_per_partition=buffered,
            processing_exception_handler=parse_record_handler(
                "processing.exception.handler", config.get("processing.exception.handler", "fail")
            ),
            default_production_exception_handler=parse_record_handler(
                "production.exception.handler",
                _renamed(config, "production.exception.handler", "fail"),
            ),
            task_timeout_ms=task_timeout_ms,
            statestore_uncommitted_max_bytes=uncommitted,
            default_key_serde=_serde(config, "default.key.serde"),
            default_value_serde=_serde(config, "default.value.serde"),
            overrides=overrides,
            state_cleanup_delay_ms=_cleanup_delay(config),
            replication_factor=parse_replication_factor(config.get("replication.factor", -1)),
            topic_configs=parse_topic_configs(config),
            dead_letter_queue_topic=_dead_letter_topic(config),
            group_protocol=_group_protocol(config),
            application_server=_application_server(config),
            num_standby_replicas=_standby_replicas(config),
            python_gc_freeze=_flag(config, "python.gc.freeze", True),
            query_server_enabled=_query_server(config),
            query_server_forward_timeout_ms=_forward_timeout(config),
        )

    @property
    def exactly_once(self) -> bool:
        """Whether ``processing.guarantee`` is ``exactly_once_v2``."""
        return self.processing_guarantee == "exactly_once_v2"

    def app_dir(self) -> Path:
        """``state.dir/application.id``: every store of this app lives below it."""
        return self.state_dir / self.application_id


# The integer settings read below with int(): a value int() refuses is named here, as Kafka's
# ConfigDef does ("Invalid value x for configuration y"), not left to int()'s own message.
_INTEGER_CONFIGS = (
    "statestore.uncommitted.max.bytes",
    "num.stream.threads",
    "buffered.records.per.partition",
    "task.timeout.ms",
    "poll.ms",
    "commit.interval.ms",
    "max.task.idle.ms",
    "session.timeout.ms",
    "query.server.forward.timeout.ms",
)


def _check_integers(config: Mapping[str, Any]) -> None:
    for name in _INTEGER_CONFIGS:
        if name not in config:
            continue
        value = config[name]
        try:
            int(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"Invalid value {value!r} for configuration {name}: not a number of type int"
            ) from None


def _renamed(config: Mapping[str, Any], name: str, default: Any) -> Any:
    """The value of ``name`` (Kafka 4's name) or of ``default.<name>`` (deprecated by KIP-1056
    and still accepted, as Kafka 4 accepts it); both given with different values is an
    error, since which one wins would be a guess."""
    old = f"default.{name}"
    if name in config and old in config and config[name] != config[old]:
        raise ValueError(
            f"config {name!r} ({config[name]!r}) and its deprecated form {old!r} "
            f"({config[old]!r}) disagree: set one of them"
        )
    if name in config:
        return config[name]
    return config.get(old, default)


def _flag(config: Mapping[str, Any], name: str, default: bool) -> bool:
    value = config.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"{name} must be true or false, not {value!r}")


def _group_protocol(config: Mapping[str, Any]) -> str:
    # Kafka Streams 4.4's values, case-insensitive as its GroupProtocol parsing is.
    value = str(config.get("group.protocol", "classic")).lower()
    if value not in ("classic", "streams"):
        raise ValueError(f"group.protocol must be 'classic' or 'streams', not {value!r}")
    return value


def _standby_replicas(config: Mapping[str, Any]) -> int | None:
    # Under the streams protocol the broker places standbys and this setting is applied to the
    # group (app/standby_replicas.py); classic groups run no standbys here, so a value > 0 is
    # refused rather than silently ignored.
    if "num.standby.replicas" not in config:
        return None
    value = config["num.standby.replicas"]
    try:
        replicas = int(value)
    except (TypeError, ValueError):
        replicas = -1
    if replicas < 0:
        raise ValueError(
            f"Invalid value {value!r} for configuration num.standby.replicas: must be an "
            "integer >= 0"
        )
    if replicas > 0 and _group_protocol(config) != "streams":
        raise ValueError(
            f"num.standby.replicas={replicas} needs group.protocol=streams: standby tasks run "
            "only under the streams rebalance protocol (KIP-1071, docs/rebalancing.md); the "
            "classic protocol runs none, so set it to 0 or set group.protocol=streams"
        )
    return replicas


def _application_server(config: Mapping[str, Any]) -> str | None:
    value = config.get("application.server")
    if value is None or value == "":
        return None  # Kafka's default: no endpoint
    host, sep, port = str(value).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"application.server must be host:port, not {value!r}")
    return str(value)


def _query_server(config: Mapping[str, Any]) -> bool:
    enabled = _flag(config, "query.server.enabled", False)
    if enabled and _application_server(config) is None:
        raise ValueError(
            "query.server.enabled=true needs application.server (host:port): the query "
            "endpoint listens there (docs/rebalancing.md)"
        )
    return enabled


def _forward_timeout(config: Mapping[str, Any]) -> int:
    timeout = int(config.get("query.server.forward.timeout.ms", 5_000))
    if timeout < 1:
        raise ValueError(f"query.server.forward.timeout.ms must be at least 1, not {timeout}")
    return timeout


def _dead_letter_topic(config: Mapping[str, Any]) -> str | None:
    value = config.get("errors.dead.letter.queue.topic.name")
    if value is None:
        return None  # Kafka's default: no dead-letter queue
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"errors.dead.letter.queue.topic.name takes a topic name, not {value!r}")
    return value


def _cleanup_delay(config: Mapping[str, Any]) -> int:
    value = config.get("state.cleanup.delay.ms", DEFAULT_STATE_CLEANUP_DELAY_MS)
    try:
        if isinstance(value, bool | float):
            raise ValueError
        delay = int(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"state.cleanup.delay.ms takes milliseconds (an integer), not {value!r}"
        ) from None
    if delay < 1:
        raise ValueError(f"state.cleanup.delay.ms must be at least 1, not {delay}")
    return delay


def _serde(config: Mapping[str, Any], name: str) -> Any:
    value = config.get(name)
    if value is None:
        return None
    if not isinstance(value, Serde):
        raise ValueError(
            f"{name} takes a streamstate.Serde (Serdes.String(), Serdes.Long(), ...), not "
            f"{type(value).__name__}"
        )
    return value
