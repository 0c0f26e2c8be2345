"""A member of a Kafka Streams group: the Streams rebalance protocol (KIP-1071).

``group.protocol="streams"`` hands task assignment to the broker: each member sends its topology
in ``StreamsGroupHeartbeat`` (API key 88) and gets back its active, standby and warm-up tasks,
and every instance's endpoint with its partitions. librdkafka does not speak this protocol, so
the member is ours, in Rust (``rust/group``); this module gives it Python's types.

The member does not own tasks: the caller reports the tasks it holds in every
:meth:`StreamsGroupMember.heartbeat` and applies the result: revoke (commit and close) what is in
``revoke``, open what is in ``assign``, and heartbeat again at once when ``heartbeat_now`` is set
(the broker hands a task to its new owner only after the old owner's heartbeat no longer lists
it). When ``lost`` is set the member was fenced: its tasks already belong to others, so close
them without committing; the next heartbeat rejoins under the same member id.

``security.protocol`` may be ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``, with
librdkafka's names: ``sasl.mechanism`` ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` with
``sasl.username``/``sasl.password``; ``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``, ``ssl.key.password``, ``ssl.endpoint.identification.algorithm``
(:class:`SslSettings`). A failed SASL authentication raises a
:class:`~streamstate.errors.SaslAuthenticationError` naming the mechanism, the broker and its
message, a failed TLS handshake (an untrusted broker certificate, a client certificate the
listener refuses) an :class:`~streamstate.errors.SslAuthenticationError` naming the broker; both
are :class:`~streamstate.errors.AuthenticationError` errors, raised at once and never retried.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from streamstate import _core
from streamstate.errors import StreamsError

__all__ = [
    "CopartitionGroup",
    "DescribedMember",
    "EndpointPartitions",
    "GroupStatus",
    "HeartbeatResult",
    "SslSettings",
    "StreamsGroupDescription",
    "StreamsGroupMember",
    "StreamsGroupTopology",
    "Subtopology",
    "TaskId",
    "Tasks",
    "TopicInfo",
]


@dataclass(frozen=True)
class TopicInfo:
    """An internal topic the broker creates: a changelog or a repartition topic.

    ``partitions`` 0 lets the broker derive the count (always 0 for changelogs);
    ``replication_factor`` 0 uses the broker's default."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CopartitionGroup:
    """Indexes into a sub-topology's topic lists of topics that must be co-partitioned."""

    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True)
class Subtopology:
    """A sub-topology as the broker sees it: its topics, whose partitions become its tasks."""

    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()


@dataclass(frozen=True)
class StreamsGroupTopology:
    """The topology a member sends when it joins; raise ``epoch`` to change a running group's."""

    subtopologies: tuple[Subtopology, ...]
    epoch: int = 0


class TaskId(NamedTuple):
    """A task: ``(subtopology_id, partition)``, Kafka Streams' ``0_3``."""

    subtopology_id: str
    partition: int


@dataclass(frozen=True)
class Tasks:
    """Active, standby and warm-up tasks."""

    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()

    @staticmethod
    def _of(
        raw: tuple[list[tuple[str, int]], list[tuple[str, int]], list[tuple[str, int]]],
    ) -> Tasks:
        active, standby, warmup = raw
        return Tasks(
            frozenset(TaskId(*t) for t in active),
            frozenset(TaskId(*t) for t in standby),
            frozenset(TaskId(*t) for t in warmup),
        )

    def __bool__(self) -> bool:
        return bool(self.active or self.standby or self.warmup)


@dataclass(frozen=True)
class GroupStatus:
    """A status of the group, e.g. ``MISSING_SOURCE_TOPICS`` with the coordinator's detail."""

    code: str
    detail: str


@dataclass(frozen=True)
class HeartbeatResult:
    """What one heartbeat returned (see the module docstring for what to do with it)."""

    member_epoch: int
    target: Tasks
    revoke: Tasks
    assign: Tasks
    lost: bool
    statuses: tuple[GroupStatus, ...]
    heartbeat_interval_ms: int
    heartbeat_now: bool
    retriable_error: str | None


@dataclass(frozen=True)
class EndpointPartitions:
    """One instance's ``application.server`` and the partitions of its tasks."""

    host: str
    port: int
    active: Mapping[str, tuple[int, ...]]
    standby: Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class DescribedMember:
    """A member as the group coordinator sees it."""

    member_id: str
    member_epoch: int
    process_id: str
    endpoint: tuple[str, int] | None
    assignment: Tasks
    target_assignment: Tasks


@dataclass(frozen=True)
class StreamsGroupDescription:
    """A streams group as its coordinator sees it (``StreamsGroupDescribe``)."""

    group_state: str
    group_epoch: int
    assignment_epoch: int
    topology_epoch: int | None
    members: tuple[DescribedMember, ...]


def _topic_info(t: TopicInfo) -> tuple[str, int, int, list[tuple[str, str]]]:
    return (t.name, t.partitions, t.replication_factor, sorted(t.configs.items()))


def _task_list(tasks: Iterable[TaskId]) -> list[tuple[str, int]]:
    return [(t.subtopology_id, t.partition) for t in tasks]


@dataclass(frozen=True)
class SslSettings:
    """The member's TLS settings, librdkafka's ``ssl.*`` names: the CA, the client certificate
    and key for mutual TLS, and whether the broker's host name is checked."""

    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = None
    verify_hostname: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SslSettings:
        """From ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
        ``ssl.key.password`` and ``ssl.endpoint.identification.algorithm`` (``https``, the
        default, or ``none``)."""

        def get(key: str) -> str | None:
            value = config.get(key)
            return None if value is None else str(value)

        algorithm = str(config.get("ssl.endpoint.identification.algorithm", "https"))
        return cls(
            get("ssl.ca.location"),
            get("ssl.certificate.location"),
            get("ssl.key.location"),
            get("ssl.key.password"),
            algorithm.lower() != "none",
        )


def sasl_settings(config: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(mechanism, username, password)`` from librdkafka's config names (``sasl.mechanism``,
    or its alias ``sasl.mechanisms``; ``sasl.username``; ``sasl.password``)."""
    values = (
        config.get("sasl.mechanism", config.get("sasl.mechanisms")),
        config.get("sasl.username"),
        config.get("sasl.password"),
    )
    mechanism, username, password = (None if v is None else str(v) for v in values)
    return mechanism, username, password


def _parse_endpoint(server: str) -> tuple[str, int]:
    host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise StreamsError(f"application.server must be host:port, not {server!r}")
    return host, int(port)


class StreamsGroupMember:
    """A member of the streams group ``group_id`` (the ``application.id``).

    Nothing is sent before the first :meth:`heartbeat`, which checks that the broker has the
    streams rebalance protocol (a :class:`~streamstate.errors.StreamsError` naming the broker
    and ``group.protocol=classic`` otherwise), finds the group coordinator and joins."""

    def __init__(
        self,
        bootstrap_servers: str,
        group_id: str,
        topology: StreamsGroupTopology,
        *,
        process_id: str | None = None,
        client_id: str = "streamstate",
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = 300_000,
        application_server: str | None = None,
        client_tags: Mapping[str, str] | None = None,
        request_timeout_ms: int = 30_000,
        security_protocol: str = "PLAINTEXT",
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        ssl: SslSettings | None = None,
    ) -> None:
        ssl = ssl or SslSettings()
        subtopologies = [
            (
                s.subtopology_id,
                list(s.source_topics),
                list(s.source_topic_regex),
                [_topic_info(t) for t in s.state_changelog_topics],
                list(s.repartition_sink_topics),
                [_topic_info(t) for t in s.repartition_source_topics],
                [
                    (
                        list(g.source_topics),
                        list(g.source_topic_regex),
                        list(g.repartition_source_topics),
                    )
                    for g in s.copartition_groups
                ],
            )
            for s in topology.subtopologies
        ]
        self._member = _core.StreamsGroupMember(
            bootstrap_servers,
            group_id,
            process_id or str(uuid.uuid4()),
            topology.epoch,
            subtopologies,
            client_id=client_id,
            instance_id=instance_id,
            rack_id=rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            user_endpoint=_parse_endpoint(application_server) if application_server else None,
            client_tags=sorted((client_tags or {}).items()),
            request_timeout_ms=request_timeout_ms,
            security_protocol=security_protocol,
            sasl_mechanism=sasl_mechanism,
            sasl_username=sasl_username,
            sasl_password=sasl_password,
            ssl_ca_location=ssl.ca_location,
            ssl_certificate_location=ssl.certificate_location,
            ssl_key_location=ssl.key_location,
            ssl_key_password=ssl.key_password,
            ssl_verify_hostname=ssl.verify_hostname,
        )

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], topology: StreamsGroupTopology, *, process_id: str
    ) -> StreamsGroupMember:
        """A member configured from Kafka Streams' config names (``bootstrap.servers``,
        ``application.id``, ``group.instance.id``, ``client.rack``, ``application.server``,
        ``max.poll.interval.ms``, ``client.tag.*``, ``security.protocol``, and librdkafka's
        ``sasl.mechanism`` (or ``sasl.mechanisms``), ``sasl.username``, ``sasl.password`` and
        ``ssl.*`` settings of :class:`SslSettings`)."""
        mechanism, username, password = sasl_settings(config)
        return cls(
            str(config["bootstrap.servers"]),
            str(config["application.id"]),
            topology,
            process_id=process_id,
            client_id=str(config.get("client.id", "streamstate")),
            instance_id=config.get("group.instance.id"),
            rack_id=config.get("client.rack"),
            rebalance_timeout_ms=int(config.get("max.poll.interval.ms", 300_000)),
            application_server=config.get("application.server"),
            client_tags={
                k.removeprefix("client.tag."): str(v)
                for k, v in config.items()
                if k.startswith("client.tag.")
            },
            security_protocol=str(config.get("security.protocol", "PLAINTEXT")),
            sasl_mechanism=mechanism,
            sasl_username=username,
            sasl_password=password,
            ssl=SslSettings.from_config(config),
        )

    @property
    def member_id(self) -> str:
        """The member id this client generated (kept across rejoins, as KIP-1071 asks)."""
        return self._member.member_id

    @property
    def member_epoch(self) -> int:
        """The member epoch: 0 before joining and while rejoining."""
        return self._member.member_epoch

    @property
    def state(self) -> str:
        """``"joining"``, ``"stable"`` or ``"left"``."""
        return self._member.state

    @property
    def heartbeat_version(self) -> int | None:
        """The ``StreamsGroupHeartbeat`` version negotiated with the coordinator."""
        return self._member.heartbeat_version

    def heartbeat(self, owned: Tasks = Tasks()) -> HeartbeatResult:
        """Sends one heartbeat reporting ``owned``; joins on the first call and after fencing.

        Raises:
            StreamsError: the broker lacks the protocol, is unreachable, or refused the member
                (authorization, group errors); ``TopologyError`` for an invalid topology.
        """
        epoch, target, revoke, assign, lost, statuses, interval, now, retriable = (
            self._member.heartbeat(
                _task_list(owned.active), _task_list(owned.standby), _task_list(owned.warmup)
            )
        )
        return HeartbeatResult(
            member_epoch=epoch,
            target=Tasks._of(target),
            revoke=Tasks._of(revoke),
            assign=Tasks._of(assign),
            lost=lost,
            statuses=tuple(GroupStatus(code, detail) for code, detail in statuses),
            heartbeat_interval_ms=interval,
            heartbeat_now=now,
            retriable_error=retriable,
        )

    def set_task_offsets(
        self, offsets: Mapping[TaskId, int], end_offsets: Mapping[TaskId, int]
    ) -> None:
        """Has the next heartbeat carry ``TaskOffsets`` and ``TaskEndOffsets``: per task, the
        sum of its changelog offsets (where its state is) and of their end offsets, so that
        the broker can place tasks where their state is (KIP-1071)."""
        self._member.set_task_offsets(
            [(t.subtopology_id, t.partition, o) for t, o in sorted(offsets.items())],
            [(t.subtopology_id, t.partition, o) for t, o in sorted(end_offsets.items())],
        )

    def leave(self) -> None:
        """Leaves the group (a static member's tasks wait for it until its session ends)."""
        self._member.leave()

    def endpoints(self) -> list[EndpointPartitions]:
        """Every instance's endpoint with its partitions, as last received."""
        return [
            EndpointPartitions(
                host,
                port,
                {t: tuple(ps) for t, ps in active},
                {t: tuple(ps) for t, ps in standby},
            )
            for (host, port), active, standby in self._member.endpoints()
        ]

    def describe(self) -> StreamsGroupDescription:
        """The coordinator's view of the group, for tests and diagnostics."""
        state, group_epoch, assignment_epoch, topology_epoch, members = self._member.describe()
        return StreamsGroupDescription(
            state,
            group_epoch,
            assignment_epoch,
            topology_epoch,
            tuple(
                DescribedMember(mid, epoch, pid, endpoint, Tasks._of(owned), Tasks._of(target))
                for mid, epoch, pid, endpoint, owned, target in members
            ),
        )

    def request_shutdown(self) -> None:
        """Asks every instance of the application to shut down: ``ShutdownApplication`` goes
        with every heartbeat until one answers with the ``SHUTDOWN_APPLICATION`` status."""
        self._member.request_shutdown()
