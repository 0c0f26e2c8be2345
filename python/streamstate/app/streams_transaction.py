"""Transactional offset commits as a streams group member (``exactly_once_v2`` under
``group.protocol="streams"``, KIP-1071).

Under exactly-once the offsets of a transaction are committed by the producer
(``send_offsets_to_transaction``: a TxnOffsetCommit to the group coordinator) with the
consumer's group metadata: Kafka's coordinator checks its member id and epoch against the group
(``StreamsGroup.validateOffsetCommit``), so that a member fenced out of the group cannot commit
offsets in its transaction (KIP-447's zombie fencing). A stream thread's consumer under the
streams protocol never joins a group (manual assignment: the member is
:class:`~streamstate.app.streams_group.StreamsGroupMember`, in Rust), so its
``consumer_group_metadata()`` carries no member id and generation -1, which the coordinator
accepts from anyone: no fencing.

confluent-kafka's group metadata is the byte string of librdkafka's
``rd_kafka_consumer_group_metadata_write`` (``Consumer.consumer_group_metadata``), read back by
``rd_kafka_consumer_group_metadata_read`` when the producer sends offsets. Its format (v2)::

    b"CGMDv2:" <generation id: int32, native byte order> <group id> NUL <member id> NUL
    <group instance id is null: int8> [<group instance id> NUL]

:func:`member_group_metadata` writes it with the streams member's id and its *current* epoch
(as generation id), taken at each commit since the epoch moves with every assignment. Before the
first such commit, :func:`check_group_metadata_format` compares this module's encoding with
librdkafka's own: a librdkafka whose format differs is refused with a clear
:class:`~streamstate.errors.StreamsError`, never sent.

The coordinator refuses a commit whose epoch is not the member's (``STALE_MEMBER_EPOCH``, which
a 4.4 broker answers librdkafka's TxnOffsetCommit v3 as ``ILLEGAL_GENERATION``), or from a
member it does not know (``UNKNOWN_MEMBER_ID``); librdkafka makes either abortable.
:func:`commit_as_member` turns those into Kafka Streams' task migration (its
``CommitFailedException``): the transaction is aborted, every task closed dirty and the member
rejoins (``docs/rebalancing.md``). Under the classic protocol ``ILLEGAL_GENERATION`` means a
rebalance librdkafka has yet to hear of; a streams member's epoch is the broker's alone.

A task's next owner must not read its committed offsets while a transaction that commits newer
ones is pending (its markers not written yet): it would process those records again (KIP-447's
``requireStable``). The member's own OffsetFetch does not ask for stable offsets, so under
exactly-once :func:`wait_for_stable_offsets` first asks through the ``read_committed``
consumer, whose OffsetFetch does (librdkafka retries ``UNSTABLE_OFFSET_COMMIT``).
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, KafkaException

from streamstate.clients.kafka_errors import error_text, kafka_call, kafka_error
from streamstate.errors import StreamsError, TaskMigratedError

if TYPE_CHECKING:
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    from streamstate.app.streams_membership import StreamsMembership
    from streamstate.app.thread_producer import ThreadProducer

__all__ = [
    "MEMBER_FENCED_CODES",
    "check_group_metadata_format",
    "commit_as_member",
    "decode_group_metadata",
    "encode_group_metadata",
    "member_fenced",
    "member_group_metadata",
    "wait_for_stable_offsets",
]

_MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")  # librdkafka memcpy's the int32: native byte order

MEMBER_FENCED_CODES = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.STALE_MEMBER_EPOCH,
        KafkaError.FENCED_MEMBER_EPOCH,
        KafkaError.UNKNOWN_MEMBER_ID,
    }
)
"""TxnOffsetCommit errors meaning "this member's identity is not the group's any more"."""


def encode_group_metadata(
    group_id: str, member_id: str, generation_id: int, group_instance_id: str | None = None
) -> bytes:
    """librdkafka's serialized consumer group metadata (see the module doc)."""
    for what, text in (
        ("group id", group_id),
        ("member id", member_id),
        ("group instance id", group_instance_id or ""),
    ):
        # librdkafka reads back printable strings only.
        if not (text.isascii() and text.isprintable()):
            raise StreamsError(f"the {what} {text!r} is not printable ASCII")
    blob = _MAGIC + _GENERATION.pack(generation_id)
    blob += group_id.encode() + b"\0" + member_id.encode() + b"\0"
    if group_instance_id is None:
        return blob + b"\x01"
    return blob + b"\x00" + group_instance_id.encode() + b"\0"


def decode_group_metadata(blob: bytes) -> tuple[str, str, int, str | None]:
    """``(group id, member id, generation id, group instance id)`` of a v2 ``blob``; a
    :class:`~streamstate.errors.StreamsError` for anything else."""
    if not blob.startswith(_MAGIC) or len(blob) < len(_MAGIC) + _GENERATION.size + 3:
        raise StreamsError(
            f"not librdkafka's consumer group metadata v2 (starts {blob[:8]!r}, "
            f"expected {_MAGIC!r})"
        )
    (generation_id,) = _GENERATION.unpack_from(blob, len(_MAGIC))
    rest = blob[len(_MAGIC) + _GENERATION.size :]
    group_id, member_id, tail = rest.split(b"\0", 2)
    if tail == b"\x01":
        instance: str | None = None
    elif tail[:1] == b"\x00" and tail.endswith(b"\0"):
        instance = tail[1:-1].decode()
    else:
        raise StreamsError(f"consumer group metadata with a bad tail {tail!r}")
    return group_id.decode(), member_id.decode(), generation_id, instance


def check_group_metadata_format(group_id: str, reference: bytes | None = None) -> None:
    """Checks that ``reference`` (by default librdkafka's own metadata of a consumer of
    ``group_id`` that is in no group, made here without connecting) is what
    :func:`encode_group_metadata` writes for it; a :class:`~streamstate.errors.StreamsError`
    naming the two formats otherwise."""
    if reference is None:
        consumer = Consumer({"group.id": group_id})
        try:
            reference = bytes(consumer.consumer_group_metadata())
        finally:
            consumer.close()
    ours = encode_group_metadata(group_id, "", -1)
    if reference != ours:
        raise StreamsError(
            "exactly_once_v2 under group.protocol=streams writes librdkafka's consumer group "
            f"metadata v2 ({ours!r}), but this librdkafka writes {reference!r}: its format "
            "changed, so the streams member's id and epoch cannot be put on transactional "
            "offset commits; use group.protocol=classic with this librdkafka"
        )


def member_group_metadata(membership: StreamsMembership, group_id: str) -> bytes:
    """The group metadata of the streams member now (its id and current epoch as generation
    id). A :class:`~streamstate.errors.TaskMigratedError` when it has no epoch (fenced or
    rejoining): its tasks may be another member's already."""
    epoch = membership.member.member_epoch
    member_id = membership.member.member_id
    if epoch <= 0:
        raise TaskMigratedError(
            f"committing the transaction failed: the streams member {member_id} has no epoch "
            f"(epoch {epoch}: fenced or rejoining the group)"
        )
    return encode_group_metadata(group_id, member_id, epoch)


def member_fenced(exc: BaseException) -> TaskMigratedError | None:
    """The task migration ``exc`` (a failure of the transaction's offsets, a
    :class:`KafkaException` anywhere in its causes) means, if its code is one of
    :data:`MEMBER_FENCED_CODES`."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KafkaException):
            error = kafka_error(seen)
            if error is not None and error.code() in MEMBER_FENCED_CODES:
                return TaskMigratedError(
                    f"sending offsets to the transaction failed: {error_text(seen)}; the "
                    "streams group fenced this member"
                )
        seen = seen.__cause__ or seen.__context__
    return None


def commit_as_member(
    txn: ThreadProducer,
    offsets: list[KafkaTopicPartition],
    membership: StreamsMembership,
    group_id: str,
) -> None:
    """Commits the open transaction of ``txn`` with ``offsets`` sent as the streams member
    (its identity taken now: the epoch moves with every assignment); a commit the group
    refuses for the member's identity is :class:`~streamstate.errors.TaskMigratedError`."""
    metadata = member_group_metadata(membership, group_id)
    try:
        txn.commit(offsets, metadata)
    except StreamsError as exc:
        fenced = member_fenced(exc)
        if fenced is None:
            raise
        raise fenced from exc


def wait_for_stable_offsets(
    consumer: Consumer, partitions: list[KafkaTopicPartition], timeout: float
) -> None:
    """Returns once no transaction with offsets of ``partitions`` is pending in the group of
    ``consumer`` (a ``read_committed`` consumer of the group, in no group itself: its
    OffsetFetch asks for stable offsets); a :class:`~streamstate.errors.StreamsError` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            kafka_call(consumer.committed, partitions, max(1.0, min(10.0, timeout)))
            return
        except KafkaException as exc:
            if time.monotonic() >= deadline:
                names = ", ".join(f"{p.topic}-{p.partition}" for p in partitions[:5])
                raise StreamsError(
                    f"the committed offsets of {names} are still pending in a transaction "
                    f"after {timeout:.0f} s: {error_text(exc)}"
                ) from exc
