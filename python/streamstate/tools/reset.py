"""Kafka's application reset tool (``kafka-streams-application-reset``, Kafka's
``org.apache.kafka.tools.StreamsResetter``) as a library call: :func:`reset_application`.

Resetting an application so that its next run reprocesses its input from scratch:

1. refuse while the group ``application.id`` has active members (``force`` removes them from a
   classic group, as Kafka's ``--force`` does);
2. set the group's committed offsets of the *input topics* to the chosen position (the earliest
   offset by default; or the latest, an offset, a time, a duration back from now, a shift of
   the committed offset, or a plan file), and those of the *intermediate topics* to their end;
3. delete the application's *internal topics*: those named ``<application.id>-...`` that end as
   Kafka Streams' changelog, repartition and foreign-key subscription topics do
   (:func:`is_internal_topic`), or the subset of them given.

Output topics are never touched. The local state of the application's instances is not either,
unless ``state_dir`` is given: Kafka's tool leaves it to ``KafkaStreams#cleanUp()``, here
:meth:`StreamsApp.clean_up() <streamstate.StreamsApp.clean_up>` before the next ``start()``.

Where Kafka's tool acts first and complains afterwards, this one checks first: an unknown input
or intermediate topic, an ``internal_topics`` entry that is no internal topic of the
application, or an unreadable plan file are refused before anything changes (Kafka skips the
unknown topics, still deletes the internal ones and exits 1; a typo in a topic name would then
throw away the state while leaving the input where it was). ``dry_run`` computes and reports
the same plan and changes nothing.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from streamstate.app.state_directory import clean_app_dir
from streamstate.app.streams_group import StreamsGroupMember, StreamsGroupTopology
from streamstate.errors import StreamsError
from streamstate.tools.leave_group import remove_members

__all__ = [
    "COORDINATOR_BUSY",
    "PartitionReset",
    "ResetPlan",
    "is_internal_topic",
    "matches_internal_topic_format",
    "parse_datetime",
    "parse_duration",
    "parse_reset_plan",
    "reset_application",
]

_log = logging.getLogger(__name__)

# Kafka's StreamsResetter.matchesInternalTopicFormat: changelogs, repartition topics and the
# foreign-key join's subscription topics (named, or generated with the node's index).
_INTERNAL_SUFFIXES = (
    "-changelog",
    "-repartition",
    "-subscription-registration-topic",
    "-subscription-response-topic",
)
_FK_JOIN_TOPIC = re.compile(r".+-KTABLE-FK-JOIN-SUBSCRIPTION-(?:REGISTRATION|RESPONSE)-\d+-topic")

COORDINATOR_BUSY = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    }
)
"""The errors a group request gets while its coordinator moves or loads (a fresh broker's
``__consumer_offsets``): the request is sent again, until the timeout."""
_NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: no committed offset


def matches_internal_topic_format(topic: str) -> bool:
    """Whether ``topic`` is named as Kafka Streams names internal topics: ``...-changelog``,
    ``...-repartition``, the foreign-key join's ``...-subscription-registration-topic`` and
    ``...-subscription-response-topic``, or their generated forms
    ``...-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic`` and ``...-RESPONSE-<n>-topic``
    (Kafka's ``StreamsResetter.matchesInternalTopicFormat``)."""
    return topic.endswith(_INTERNAL_SUFFIXES) or _FK_JOIN_TOPIC.fullmatch(topic) is not None


def is_internal_topic(topic: str, application_id: str, *, user_topics: Iterable[str] = ()) -> bool:
    """Whether the reset tool takes ``topic`` for an internal topic of ``application_id``: named
    ``<application_id>-...`` in an internal topic's format (:func:`matches_internal_topic_format`)
    and not one of ``user_topics`` (the input and intermediate topics given, which may be named
    like internal topics by chance: KAFKA-7930)."""
    return (
        topic not in set(user_topics)
        and topic.startswith(application_id + "-")
        and matches_internal_topic_format(topic)
    )


def parse_datetime(text: str) -> int:
    """``text``, an ISO-8601 date and time such as ``2026-11-26T10:00:00.000`` (Kafka's
    ``--to-datetime`` format; a zone such as ``Z`` or ``+01:00`` is optional and UTC is meant
    without one, as in Kafka), as milliseconds since the epoch; a ``ValueError`` otherwise."""
    if "T" not in text:
        raise ValueError(
            f"--to-datetime takes an ISO-8601 date and time such as 2026-11-26T10:00:00.000, "
            f"with a 'T' between date and time, not {text!r}"
        )
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError(
            f"--to-datetime takes an ISO-8601 date and time such as 2026-11-26T10:00:00.000 "
            f"(optionally with a zone: Z, +01:00), not {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> timedelta:
    """``text`` in Java's ``Duration.parse`` format, ``PnDTnHnMn.nS`` (``P1D``, ``PT1H30M``,
    ``PT0.5S``, ``-PT10M``), as a ``timedelta`` (Kafka's ``--by-duration``); a ``ValueError``
    otherwise."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or match.group(3) == "T" or text.strip().upper() in ("P", "-P", "+P"):
        raise ValueError(
            f"--by-duration takes a duration as PnDTnHnMn.nS (P1D, PT1H30M, PT0.5S), not {text!r}"
        )
    sign, days, _, hours, minutes, seconds, fraction = match.groups()
    duration = timedelta(
        days=int(days or 0),
        hours=int(hours or 0),
        minutes=int(minutes or 0),
        seconds=int(seconds or 0),
    )
    if fraction:
        nanos = int(fraction.ljust(9, "0"))
        part = timedelta(microseconds=nanos / 1000)
        duration += -part if seconds is not None and seconds.startswith("-") else part
    return -duration if sign == "-" else duration


def parse_reset_plan(text: str) -> dict[tuple[str, int], int]:
    """A reset plan, one ``TOPIC,PARTITION,OFFSET`` line per partition (Kafka's
    ``--from-file``), as ``{(topic, partition): offset}``; a ``ValueError`` naming the line
    otherwise."""
    if not text.strip():
        raise ValueError("the reset plan is empty: it needs TOPIC,PARTITION,OFFSET lines")
    plan: dict[tuple[str, int], int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        try:
            if len(parts) != 3 or not parts[0]:
                raise ValueError
            plan[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise ValueError(
                f"line {number} of the reset plan is not TOPIC,PARTITION,OFFSET: {line!r}"
            ) from None
    return plan


@dataclass(frozen=True)
class PartitionReset:
    """One partition's move: from the group's ``committed`` offset (None: nothing committed)
    to ``offset``; ``note`` says why the offset differs from the one asked for, if it does."""

    topic: str
    partition: int
    committed: int | None
    offset: int
    note: str | None = None

    def line(self) -> str:
        """``topic partition P: committed -> offset``, as the plan prints it."""
        before = "(none)" if self.committed is None else str(self.committed)
        note = f"  ({self.note})" if self.note else ""
        return f"  {self.topic} partition {self.partition}: {before} -> {self.offset}{note}"


@dataclass
class ResetPlan:
    """What a reset does (with ``dry_run``: would do) to application ``application_id``."""

    application_id: str
    position: str
    """The input topics' position, as said: ``earliest``, ``offset 5``, ``shift by -2`` ..."""
    dry_run: bool
    removed_members: tuple[str, ...] = ()
    """The active members ``force`` removed from the group (none without ``force``)."""
    inputs: tuple[PartitionReset, ...] = ()
    intermediates: tuple[PartitionReset, ...] = ()
    internal_topics: tuple[str, ...] = ()
    internal_topics_specified: bool = False
    """Whether ``internal_topics`` were given (a subset) rather than inferred."""
    state_dir: Path | None = None
    """The application's local state directory deleted, if a ``state_dir`` was given."""
    notes: list[str] = field(default_factory=list)

    @property
    def offsets(self) -> dict[tuple[str, int], int]:
        """The offsets committed for the group: input and intermediate partitions."""
        return {(r.topic, r.partition): r.offset for r in (*self.inputs, *self.intermediates)}

    def lines(self) -> list[str]:
        """The plan as an operator reads it, one line each."""
        verb = "would " if self.dry_run else ""
        out = []
        if self.dry_run:
            out.append("Dry run: the actions a reset would take; nothing is changed.")
        out.append(f"Application {self.application_id!r} (consumer group {self.application_id!r})")
        if self.removed_members:
            out.append(
                f"Force {'would remove' if self.dry_run else 'removing'} the active members: "
                + ", ".join(self.removed_members)
            )
        if self.inputs:
            out.append(f"Input topics: {verb}reset offsets to {self.position}")
            out.extend(r.line() for r in self.inputs)
        if self.intermediates:
            out.append(f"Intermediate topics: {verb}seek to end")
            out.extend(r.line() for r in self.intermediates)
        if not self.inputs and not self.intermediates:
            out.append("No input or intermediate topics specified: no offsets reset.")
        how = "specified" if self.internal_topics_specified else "inferred"
        if self.internal_topics:
            out.append(f"Internal topics ({how}): {verb}delete")
            out.extend(f"  {t}" for t in self.internal_topics)
        else:
            out.append("Internal topics: none found")
        if self.state_dir is not None and self.state_dir.is_dir():
            out.append(f"Local state: {verb}delete {self.state_dir}")
        elif self.state_dir is not None:
            out.append(f"Local state: none under {self.state_dir}")
        else:
            out.append(
                "Local state: not touched; delete state.dir/<application.id> on every instance "
                "(StreamsApp.clean_up() before start(), or --state-dir here)"
            )
        out.extend(self.notes)
        return out


def _check_offset_range(offset: int, beginning: int, end: int) -> tuple[int, str | None]:
    # Kafka's StreamsResetter.checkOffsetRange: beyond the end goes to the end, at or before
    # the beginning to the beginning.
    if offset >= end:
        if offset == end:
            return end, None
        return end, f"{offset} is beyond the latest offset {end}"
    if offset < beginning:
        return beginning, f"{offset} is before the earliest offset {beginning}"
    return offset, None


def _describe_position(
    *,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | datetime | int | None,
    by_duration: str | timedelta | None,
    shift_by: int | None,
    from_file: str | Path | None,
) -> str:
    given = {
        "to_earliest": to_earliest or None,
        "to_latest": to_latest or None,
        "to_offset": to_offset,
        "to_datetime": to_datetime,
        "by_duration": by_duration,
        "shift_by": shift_by,
        "from_file": from_file,
    }
    chosen = [name for name, value in given.items() if value is not None]
    if len(chosen) > 1:
        options = ", ".join("--" + name.replace("_", "-") for name in chosen)
        raise ValueError(f"choose one reset position, not several: {options}")
    if not chosen or chosen == ["to_earliest"]:
        return "earliest"
    value = given[chosen[0]]
    return {
        "to_latest": "latest",
        "to_offset": f"offset {value}",
        "to_datetime": f"datetime {value}",
        "by_duration": f"duration {value} back from now",
        "shift_by": f"shift by {value}",
        "from_file": f"the plan in {value}",
    }[chosen[0]]


def _epoch_ms(moment: str | datetime | int) -> int:
    if isinstance(moment, int):
        return moment
    if isinstance(moment, datetime):
        aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
        return int(aware.timestamp() * 1000)
    return parse_datetime(moment)


class _Cluster:
    """The admin calls of a reset, each turning librdkafka's errors into one clear
    :class:`~streamstate.errors.StreamsError`."""

    def __init__(self, bootstrap_servers: str, config: Mapping[str, Any], timeout: float) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout = timeout
        try:
            self.admin = AdminClient({**config, "bootstrap.servers": bootstrap_servers})
        except KafkaException as exc:
            raise ValueError(f"invalid client settings: {_reason(exc)}") from None

    def topics(self) -> dict[str, int]:
        """Every topic's partition count."""
        try:
            metadata = self.admin.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise StreamsError(
                f"no Kafka broker answered at {self.bootstrap_servers} within "
                f"{self.timeout:g} s ({_reason(exc)})"
            ) from None
        return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}

    def classic_members(self, group: str) -> list[Any]:
        """The members of classic consumer group ``group`` (none if there is no such group)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                future = self.admin.describe_consumer_groups([group], request_timeout=self.timeout)
                return list(future[group].result().members)
            except KafkaException as exc:
                code = _code(exc)
                if code == KafkaError.GROUP_ID_NOT_FOUND:
                    return []
                if code in COORDINATOR_BUSY and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise StreamsError(
                    f"could not describe consumer group {group!r} ({_reason(exc)})"
                ) from None

    def watermarks(
        self, partitions: Sequence[tuple[str, int]], spec: Callable[[], Any]
    ) -> dict[tuple[str, int], int]:
        """``spec``'s offset (earliest, latest, for a timestamp) of every partition."""
        if not partitions:
            return {}
        request = {KafkaTopicPartition(t, p): spec() for t, p in partitions}
        try:
            futures = self.admin.list_offsets(request, request_timeout=self.timeout)
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
        except KafkaException as exc:
            raise StreamsError(f"could not list offsets ({_reason(exc)})") from None

    def committed(
        self, group: str, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int | None]:
        """The offsets ``group`` committed for ``partitions`` (None where it committed none)."""
        if not partitions:
            return {}
        request = [KafkaTopicPartition(t, p) for t, p in partitions]
        answered = self._group_offsets(
            group,
            lambda: self.admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, request)], request_timeout=self.timeout
            ),
            f"read the offsets committed by group {group!r}",
        )
        for tp in answered:
            if tp.error is not None:
                raise StreamsError(
                    f"could not read the offset committed by group {group!r} ({tp.error.str()})",
                    topic=tp.topic,
                    partition=tp.partition,
                )
        return {(tp.topic, tp.partition): None if tp.offset < 0 else tp.offset for tp in answered}

    def commit(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commits ``offsets`` for ``group`` (which must have no active member)."""
        if not offsets:
            return
        request = [KafkaTopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        answered = self._group_offsets(
            group,
            lambda: self.admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, request)], request_timeout=self.timeout
            ),
            f"commit the reset offsets for group {group!r}",
        )
        for tp in answered:
            if tp.error is not None:
                raise StreamsError(
                    f"could not commit the reset offset for group {group!r} ({tp.error.str()})",
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=offsets[(tp.topic, tp.partition)],
                )

    def _group_offsets(
        self, group: str, send: Callable[[], Any], action: str
    ) -> list[KafkaTopicPartition]:
        """The partitions (errors included) of ``send``'s answer, an admin call on ``group``'s
        offsets, sent again while the group's coordinator is loading or moving (a group just
        left, or a broker just started) until the timeout; ``action`` names it in the error."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                answered: list[KafkaTopicPartition] = send()[group].result().topic_partitions
            except KafkaException as exc:
                if _code(exc) in COORDINATOR_BUSY and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise StreamsError(f"could not {action} ({_reason(exc)})") from None
            codes = [tp.error.code() for tp in answered if tp.error is not None]
            busy = bool(codes) and all(code in COORDINATOR_BUSY for code in codes)
            if busy and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            return answered

    def delete_topics(self, topics: Sequence[str]) -> list[str]:
        """Deletes ``topics``; returns the errors, one line per topic that failed."""
        if not topics:
            return []
        futures = self.admin.delete_topics(
            list(topics), operation_timeout=self.timeout, request_timeout=self.timeout
        )
        failed = []
        for topic, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                failed.append(f"{topic}: {_reason(exc)}")
        if not failed:
            self._wait_gone(set(topics))
        return failed

    def _wait_gone(self, topics: set[str]) -> None:
        # The deletion is acknowledged before every broker's metadata shows it: an app started
        # right after the reset must not find the old topics and write to them while they go.
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if topics.isdisjoint(self.topics()):
                return
            time.sleep(0.1)


def _code(exc: KafkaException) -> Any:
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    return error.code() if error is not None else None


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}" if error.str() else error.name()
    return str(exc)


def _member_text(member: Any) -> str:
    instance = f", group.instance.id {member.group_instance_id}" if member.group_instance_id else ""
    return f"{member.member_id} (client.id {member.client_id}, host {member.host}{instance})"


def _protocol(config: Mapping[str, Any]) -> str:
    return str(config.get("security.protocol", "PLAINTEXT")).upper()


def _streams_group_members(
    bootstrap_servers: str, group: str, config: Mapping[str, Any], timeout: float
) -> list[str] | None:
    """The members of *streams* group ``group`` (KIP-1071, ``group.protocol=streams``), none if
    there is no such group, or None where it cannot be asked (a broker without the streams
    protocol, a secured listener). librdkafka's describe does not see streams groups at all: it
    reports them as dead classic groups with no member."""
    if _protocol(config) != "PLAINTEXT":
        return None
    asker = StreamsGroupMember(
        bootstrap_servers,
        group,
        StreamsGroupTopology(()),
        client_id="streamstate-reset",
        request_timeout_ms=int(timeout * 1000),
    )
    try:
        description = asker.describe()
    except StreamsError as exc:
        text = str(exc)
        if "GROUP_ID_NOT_FOUND" in text:
            return []
        if "UNSUPPORTED_VERSION" in text or "streams rebalance protocol" in text:
            return None
        raise
    return [
        f"{m.member_id} (process {m.process_id}, streams group member)" for m in description.members
    ]


def reset_application(
    bootstrap_servers: str,
    application_id: str,
    *,
    input_topics: Sequence[str] = (),
    intermediate_topics: Sequence[str] = (),
    internal_topics: Sequence[str] | None = None,
    to_earliest: bool = False,
    to_latest: bool = False,
    to_offset: int | None = None,
    to_datetime: str | datetime | int | None = None,
    by_duration: str | timedelta | None = None,
    shift_by: int | None = None,
    from_file: str | Path | None = None,
    dry_run: bool = False,
    force: bool = False,
    state_dir: str | Path | None = None,
    config: Mapping[str, Any] | None = None,
    timeout: float = 30.0,
    progress: Callable[[str], None] | None = None,
) -> ResetPlan:
    """Resets application ``application_id`` so that its next run reprocesses its input, as
    Kafka's ``kafka-streams-application-reset`` does; returns what was done (the plan).

    At most one position for the ``input_topics``: ``to_earliest`` (the default),
    ``to_latest``, ``to_offset``, ``to_datetime`` (ISO-8601 text, a ``datetime`` or epoch
    milliseconds; the first offset at or after it, the end where there is none),
    ``by_duration`` (that far back from now; ``PnDTnHnMn.nS`` or a ``timedelta``), ``shift_by``
    (from the committed offset, or from the end where none is committed, as Kafka's consumer
    with its default ``auto.offset.reset``) or ``from_file`` (``TOPIC,PARTITION,OFFSET``
    lines). Offsets beyond a partition's end go to its end, before its beginning to its
    beginning. ``intermediate_topics`` are set to their end. ``internal_topics`` narrows the
    internal topics deleted to those given (each must be one). ``state_dir``: also delete the
    application's local state, ``state_dir/<application_id>`` (what
    :meth:`StreamsApp.clean_up() <streamstate.StreamsApp.clean_up>` deletes). ``config``: client
    settings (``security.protocol``, ``sasl.*``, ``ssl.*`` ...) for the admin client.
    ``progress`` receives each line of the plan and of the progress as it is made.

    Raises :class:`~streamstate.errors.StreamsError` when the group has active members (and
    ``force`` is not given or cannot remove them), a topic is unknown, the broker does not
    answer within ``timeout`` seconds, or the broker refuses a step; ``ValueError`` for
    contradictory or malformed arguments. Everything is checked before anything changes; with
    ``dry_run`` nothing changes at all.
    """
    say = progress or (lambda line: None)
    if not application_id:
        raise ValueError("an application id is required (the application.id of the app)")
    if not bootstrap_servers:
        raise ValueError("bootstrap servers are required (host:port)")
    position = _describe_position(
        to_earliest=to_earliest,
        to_latest=to_latest,
        to_offset=to_offset,
        to_datetime=to_datetime,
        by_duration=by_duration,
        shift_by=shift_by,
        from_file=from_file,
    )
    # Malformed arguments fail before the first request.
    timestamp: int | None = None
    if to_datetime is not None:
        timestamp = _epoch_ms(to_datetime)
    elif by_duration is not None:
        back = parse_duration(by_duration) if isinstance(by_duration, str) else by_duration
        timestamp = int((datetime.now(timezone.utc) - back).timestamp() * 1000)
    file_plan: dict[tuple[str, int], int] | None = None
    if from_file is not None:
        try:
            file_plan = parse_reset_plan(Path(from_file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(
                f"cannot read the reset plan {str(from_file)!r}: {exc.strerror}"
            ) from None
    inputs, intermediates = (
        list(dict.fromkeys(input_topics)),
        list(dict.fromkeys(intermediate_topics)),
    )
    both = sorted(set(inputs) & set(intermediates))
    if both:
        raise ValueError(f"topics given as both input and intermediate topics: {', '.join(both)}")
    client_config = dict(config or {})
    cluster = _Cluster(bootstrap_servers, client_config, timeout)

    topics = cluster.topics()
    group = application_id
    members = [_member_text(m) for m in cluster.classic_members(group)]
    streams_members = _streams_group_members(bootstrap_servers, group, client_config, timeout)
    if streams_members:
        raise StreamsError(
            f"Streams group {group!r} is still active and has the following members: "
            f"{', '.join(streams_members)}. Stop all running application instances before "
            "resetting (members of a streams group cannot be removed by force: their session "
            "ends group.streams.session.timeout.ms after they stopped)"
        )
    notes = []
    if streams_members is None and _protocol(client_config) != "PLAINTEXT":
        notes.append(
            "Note: not checked whether a streams group (group.protocol=streams) of the app has "
            "members: that check needs a PLAINTEXT listener"
        )
    if members and not force:
        raise StreamsError(
            f"Consumer group {group!r} is still active and has the following members: "
            f"{', '.join(members)}. Make sure to stop all running application instances before "
            "running the reset tool. You can use option '--force' to remove active members "
            "from the group."
        )

    unknown = [t for t in (*inputs, *intermediates) if t not in topics]
    if unknown:
        kind = "input" if unknown[0] in inputs else "intermediate"
        raise StreamsError(
            f"unknown {kind} topic{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: "
            "nothing was reset (check the names; list the topics with the broker's tools)",
        )
    user_topics = set(inputs) | set(intermediates)
    inferred = sorted(
        t for t in topics if is_internal_topic(t, application_id, user_topics=user_topics)
    )
    if internal_topics is not None and list(internal_topics):
        not_internal = [t for t in internal_topics if t not in inferred]
        if not_internal:
            raise StreamsError(
                f"not internal topics of application {application_id!r}: "
                f"{', '.join(not_internal)}. --internal-topics takes a subset of the internal "
                "topics a dry run without it lists",
            )
        to_delete = list(dict.fromkeys(internal_topics))
        specified = True
    else:
        to_delete = inferred
        specified = False

    input_partitions = [(t, p) for t in inputs for p in range(topics[t])]
    intermediate_partitions = [(t, p) for t in intermediates for p in range(topics[t])]
    everything = input_partitions + intermediate_partitions
    committed = cluster.committed(group, everything)
    beginning = cluster.watermarks(input_partitions, OffsetSpec.earliest)
    end = cluster.watermarks(everything, OffsetSpec.latest)
    at_time: dict[tuple[str, int], int] = {}
    if timestamp is not None:
        at_time = cluster.watermarks(input_partitions, lambda: OffsetSpec.for_timestamp(timestamp))
    if file_plan is not None:
        missing = [tp for tp in input_partitions if tp not in file_plan]
        if missing:
            raise ValueError(
                f"the reset plan {str(from_file)!r} has no offset for "
                + ", ".join(f"{t} partition {p}" for t, p in missing)
            )

    planned_inputs = []
    for tp in input_partitions:
        asked: int | None
        note: str | None = None
        if to_latest:
            asked = end[tp]
        elif to_offset is not None:
            asked = to_offset
        elif timestamp is not None:
            asked = at_time[tp] if at_time[tp] >= 0 else None
            if asked is None:
                asked, note = end[tp], "no record at or after that time: the latest offset"
        elif shift_by is not None:
            current = committed[tp]
            asked = (end[tp] if current is None else current) + shift_by
        elif file_plan is not None:
            asked = file_plan[tp]
        else:
            asked = beginning[tp]
        offset, clamped = _check_offset_range(asked, beginning[tp], end[tp])
        planned_inputs.append(PartitionReset(tp[0], tp[1], committed[tp], offset, clamped or note))
    planned_intermediates = [
        PartitionReset(t, p, committed[(t, p)], end[(t, p)]) for t, p in intermediate_partitions
    ]
    app_dir = None if state_dir is None else Path(state_dir) / application_id
    if app_dir is not None and app_dir.exists() and not app_dir.is_dir():
        raise StreamsError(f"the application's state directory {app_dir} is not a directory")

    plan = ResetPlan(
        application_id=application_id,
        position=position,
        dry_run=dry_run,
        removed_members=tuple(members),
        inputs=tuple(planned_inputs),
        intermediates=tuple(planned_intermediates),
        internal_topics=tuple(to_delete),
        internal_topics_specified=specified,
        state_dir=app_dir,
        notes=notes,
    )
    for line in plan.lines():
        say(line)
    if dry_run:
        return plan

    if members:
        _remove_members(cluster, bootstrap_servers, group, client_config, timeout)
        say(f"Removed {len(members)} active member(s) from group {group!r}")
    if app_dir is not None and app_dir.is_dir():
        clean_app_dir(app_dir)
        say(f"Deleted the local state under {app_dir}")
    if plan.offsets:
        cluster.commit(group, plan.offsets)
        say(f"Committed the new offsets of {len(plan.offsets)} partition(s) for group {group!r}")
    failed = cluster.delete_topics(to_delete)
    if failed:
        raise StreamsError(
            f"could not delete {len(failed)} of {len(to_delete)} internal topics: "
            + "; ".join(failed)
        )
    if to_delete:
        say(f"Deleted {len(to_delete)} internal topic(s)")
    say("Done.")
    return plan


def _remove_members(
    cluster: _Cluster, bootstrap_servers: str, group: str, config: Mapping[str, Any], timeout: float
) -> None:
    """Removes every member of classic group ``group`` (Kafka's
    ``removeMembersFromConsumerGroup`` with no member named), as ``--force`` does."""
    members = cluster.classic_members(group)
    if members:
        remove_members(
            bootstrap_servers,
            group,
            [(m.member_id, m.group_instance_id) for m in members],
            config=config,
            timeout=timeout,
        )
