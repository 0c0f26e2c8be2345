"""``StreamsConfig``: a StreamsApp's settings, under Kafka Streams' config names."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamstate.clients.config import PREFIXES
from streamstate.timestamps import FailOnInvalidTimestamp

__all__ = ["StreamsConfig"]

_GUARANTEES = ("at_least_once", "exactly_once_v2")
_KNOWN = {
    "application.id",
    "bootstrap.servers",
    "state.dir",
    "num.stream.threads",
    "poll.ms",
    "commit.interval.ms",
    "processing.guarantee",
    "default.timestamp.extractor",
    "default.deserialization.exception.handler",
    "max.task.idle.ms",
    "group.instance.id",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "client.id",
}


@dataclass(frozen=True)
class StreamsConfig:
    """Parsed settings; build with :meth:`from_mapping`.

    ``processing.guarantee=exactly_once_v2`` is accepted for compatibility of configs, but
    processing is at-least-once (see ``docs/runtime.md``): it raises unless
    ``allow.at.least.once.fallback`` is set, so nobody gets weaker guarantees by surprise.
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
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> StreamsConfig:
        """Reads Kafka Streams' names; ``consumer.*``, ``producer.*``, ``restore.consumer.*``
        and ``global.consumer.*`` pass settings to those clients. Unknown names raise
        ``ValueError`` (a typo would otherwise be silently ignored)."""
        unknown = [k for k in config if k not in _KNOWN and not k.startswith(PREFIXES)]
        if unknown:
            raise ValueError(f"unknown config names {sorted(unknown)}")
        for required in ("application.id", "bootstrap.servers"):
            if not config.get(required):
                raise ValueError(f"config {required!r} is required")
        guarantee = str(config.get("processing.guarantee", "at_least_once"))
        if guarantee not in _GUARANTEES:
            raise ValueError(
                f"processing.guarantee must be one of {_GUARANTEES}, not {guarantee!r}"
            )
        if guarantee == "exactly_once_v2":
            raise ValueError(
                "processing.guarantee=exactly_once_v2 is not implemented yet: streamstate "
                "processes at-least-once (docs/runtime.md)"
            )
        overrides: dict[str, dict[str, Any]] = {p: {} for p in PREFIXES}
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
        return cls(
            application_id=app_id,
            bootstrap_servers=str(config["bootstrap.servers"]),
            state_dir=Path(state_dir),
            num_stream_threads=threads,
            poll_ms=int(config.get("poll.ms", 100)),
            commit_interval_ms=int(config.get("commit.interval.ms", 30_000)),
            processing_guarantee=guarantee,
            default_timestamp_extractor=config.get(
                "default.timestamp.extractor", FailOnInvalidTimestamp()
            ),
            default_deserialization_exception_handler=config.get(
                "default.deserialization.exception.handler", "fail"
            ),
            max_task_idle_ms=int(config.get("max.task.idle.ms", 0)),
            group_instance_id=config.get("group.instance.id"),
            partition_assignment_strategy=str(
                config.get("partition.assignment.strategy", "cooperative-sticky")
            ),
            session_timeout_ms=int(config.get("session.timeout.ms", 10_000)),
            client_id=str(config.get("client.id") or app_id),
            overrides=overrides,
        )

    def app_dir(self) -> Path:
        """``state.dir/application.id``: every store of this app lives below it."""
        return self.state_dir / self.application_id
