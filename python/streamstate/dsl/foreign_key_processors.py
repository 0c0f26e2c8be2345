"""The processors of the foreign-key join (KIP-213), one per Kafka class of
``streams/.../kstream/internals/foreignkeyjoin``:

* :class:`SubscriptionSendProcessor` (``SubscriptionSendProcessorSupplier``), on the left
  table: each change of a row becomes subscriptions keyed by the foreign key, sent through the
  subscription-registration topic to the right table's partition of that key (and, when the
  foreign key changed, an unsubscription from the old one);
* :class:`SubscriptionReceiveProcessor` (``SubscriptionReceiveProcessorSupplier``), on the
  right side: keeps the subscriptions in the subscription store, keyed by (foreign key, primary
  key);
* :class:`SubscriptionJoinProcessor` (``SubscriptionJoinProcessorSupplier``): answers a new
  subscription with the foreign key's current right value;
* :class:`ForeignTableJoinProcessor` (``ForeignTableJoinProcessorSupplier``): answers every
  subscription of a right key that changed (a prefix scan of the subscription store);
* :class:`ResponseJoinProcessor` (``ResponseJoinProcessorSupplier``), back on the left table's
  partition: joins a response with the row's current value, or drops it when the row has
  changed since (its value's hash differs).

Both tables are read through their value getters (:mod:`streamstate.dsl.value_getters`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streamstate.dsl.stores import ValueAndTimestamp
from streamstate.dsl.subscription import (
    DELETE_KEY_AND_PROPAGATE,
    DELETE_KEY_NO_PROPAGATE,
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE,
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE,
    SubscriptionDeserializer,
    SubscriptionResponseWrapper,
    SubscriptionSerializer,
    SubscriptionWrapper,
    combined_key,
    murmur3_128,
    split_combined_key,
)
from streamstate.dsl.table_processors import Change, skip_record
from streamstate.dsl.value_getters import ValueGetterSupplier
from streamstate.errors import StreamsError
from streamstate.processor.context import ProcessorGraphContext
from streamstate.processor.processor import Processor
from streamstate.processor.record import Record
from streamstate.processor.serde_slot import SerdeSlot

__all__ = [
    "ForeignTableJoinProcessor",
    "ResponseJoinProcessor",
    "SubscriptionJoinProcessor",
    "SubscriptionReceiveProcessor",
    "SubscriptionSendProcessor",
    "SubscriptionStoreView",
]

_log = logging.getLogger(__name__)
_DELETES = (DELETE_KEY_AND_PROPAGATE, DELETE_KEY_NO_PROPAGATE)


def _pseudo_topic(context: ProcessorGraphContext, topic: str, suffix: str) -> str:
    # Kafka serializes keys and values for the join's internal "pseudo topics", named after the
    # subscription topic (decorated with the application id), so topic-aware serdes see them.
    return f"{context.application_id}-{topic}{suffix}"


class SubscriptionSendProcessor(Processor):
    """A left-table change as subscription instructions keyed by the foreign key; see the
    module doc. ``extractor(value)`` (``extractor(key, value)`` with ``with_key``)."""

    def __init__(
        self,
        extractor: Callable[..., Any],
        with_key: bool,
        left_join: bool,
        slots: tuple[SerdeSlot, SerdeSlot],
        topic: str,
        *,
        versioned: bool = False,
    ) -> None:
        """``slots``: the foreign key's (the right table's key) and the left value's;
        ``topic``: the subscription topic (for the serializers' pseudo topics);
        ``versioned``: the left table is versioned (its out-of-order updates are dropped)."""
        self.versioned = versioned
        self.extractor = extractor
        self.with_key = with_key
        self.left_join = left_join
        self.slots = slots
        self.topic = topic
        self._hash: tuple[int, int] | None = None

    def init(self, context: ProcessorGraphContext) -> None:
        """Resolves the serializers; the response goes back to this task's partition."""
        self.context = context
        self.fk_serialize = self.slots[0].get().serializer.serialize
        self.value_serialize = self.slots[1].get().serializer.serialize
        self.fk_topic = _pseudo_topic(context, self.topic, "-fk")
        self.value_topic = _pseudo_topic(context, self.topic, "-vh")
        # Kafka takes the partition of the record being processed; a left-table change is
        # always processed by the task of its key's partition, which is that partition (and
        # a record cache flushing at a commit has no record being processed).
        self.partition = context.task_id.partition

    def _extract(self, key: Any, value: Any) -> Any:
        return self.extractor(key, value) if self.with_key else self.extractor(value)

    def _same(self, one: Any, other: Any) -> bool:
        # Foreign keys are compared serialized, as Kafka compares them.
        return bool(
            self.fk_serialize(self.fk_topic, one) == self.fk_serialize(self.fk_topic, other)
        )

    def process(self, record: Record) -> None:
        """Forwards the subscriptions (Kafka 4.4's instructions for inner and left joins)."""
        self._hash = None
        change = record[1]
        if self.versioned and not change.is_latest:
            _drop_out_of_order(self.context)
            return
        if self.left_join:
            self._left(record, change.old, change.new)
        else:
            self._inner(record, change.old, change.new)

    def _left(self, record: Record, old: Any, new: Any) -> None:
        if old is None and new is None:
            return  # an idempotent delete of the left row: no output
        key = record[0]
        old_fk = None if old is None else self._extract(key, old)
        new_fk = None if new is None else self._extract(key, new)
        if old_fk is not None and not self._same(new_fk, old_fk):
            self._forward(record, old_fk, DELETE_KEY_NO_PROPAGATE)
        # Always a response back, so the left join emits a result (a None foreign key
        # subscribes to nothing but still gets its answer).
        self._forward(record, new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)

    def _inner(self, record: Record, old: Any, new: Any) -> None:
        key = record[0]
        old_fk = None if old is None else self._extract(key, old)
        if new is None:
            if old_fk is not None:
                self._forward(record, old_fk, DELETE_KEY_AND_PROPAGATE)
            return
        new_fk = self._extract(key, new)
        if new_fk is None:
            skip_record(self.context, "null foreign key")
            if old_fk is not None:
                self._forward(record, old_fk, DELETE_KEY_AND_PROPAGATE)
            return
        if old_fk is None:
            self._forward(record, new_fk, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)
        elif not self._same(new_fk, old_fk):
            # The old subscription lives on another partition: remove it; the new one must
            # answer even without a match, to delete the result the old one made.
            self._forward(record, old_fk, DELETE_KEY_NO_PROPAGATE)
            self._forward(record, new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
        else:
            self._forward(record, new_fk, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)

    def _forward(self, record: Record, foreign_key: Any, instruction: int) -> None:
        new = record[1].new
        if self._hash is None and new is not None:
            self._hash = murmur3_128(bytes(self.value_serialize(self.value_topic, new) or b""))
        wrapper = SubscriptionWrapper(self._hash, instruction, record[0], self.partition)
        self.context.forward(Record(foreign_key, wrapper, record[2], record[3]))


class _SubscriptionStoreProcessor(Processor):
    """A processor of the subscription store, whose keys are the bytes of (foreign key,
    primary key), each serialized for its pseudo topic of the subscription topic ``topic``."""

    def __init__(self, store: str, slots: tuple[SerdeSlot, SerdeSlot], topic: str) -> None:
        """``slots``: the foreign key's and the primary key's."""
        self.store_name = store
        self.slots = slots
        self.topic = topic

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the subscription store and resolves the keys' serdes."""
        self.context = context
        self.store = context.get_state_store(self.store_name)
        self.fk_serialize = self.slots[0].get().serializer.serialize
        self.fk_topic = _pseudo_topic(context, self.topic, "-fk")
        self.pk_topic = _pseudo_topic(context, self.topic, "-pk")
        pk_serde = self.slots[1].get()
        self.pk_serialize = pk_serde.serializer.serialize
        self.pk_deserialize = pk_serde.deserializer.deserialize
        self.wrapper_deserializer = SubscriptionDeserializer(pk_serde.deserializer, self.pk_topic)


class SubscriptionReceiveProcessor(_SubscriptionStoreProcessor):
    """Keeps each subscription in the subscription store and forwards it as a change keyed by
    ``(foreign key, primary key)``; see the module doc."""

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the store."""
        super().init(context)
        self.wrapper_serializer = SubscriptionSerializer(
            self.slots[1].get().serializer, self.pk_topic
        )

    def process(self, record: Record) -> None:
        """Stores (or deletes) the subscription and forwards the change."""
        foreign_key, wrapper = record[0], record[1]
        timestamp = record[2]
        if foreign_key is None and wrapper.instruction != PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            skip_record(self.context, "null foreign key")
            return
        new = ValueAndTimestamp(wrapper, timestamp)
        old = None
        if foreign_key is not None:
            key = combined_key(
                bytes(self.fk_serialize(self.fk_topic, foreign_key)),
                bytes(self.pk_serialize(self.pk_topic, wrapper.primary_key)),
            )
            raw = self.store.get(key)
            if raw is not None:
                old = ValueAndTimestamp(
                    self.wrapper_deserializer.deserialize(None, raw[8:]),
                    int.from_bytes(raw[:8], "big", signed=True),
                )
            if wrapper.instruction in _DELETES:
                self.store.put(key, None)
            else:
                encoded = self.wrapper_serializer.serialize(None, wrapper) or b""
                self.store.put(key, timestamp.to_bytes(8, "big", signed=True) + encoded)
        self.context.forward(
            Record((foreign_key, wrapper.primary_key), Change(new, old), timestamp, record[3])
        )


class SubscriptionJoinProcessor(Processor):
    """Answers a subscription with the foreign key's right value, as its instruction says."""

    def __init__(self, right: ValueGetterSupplier) -> None:
        """``right``: how to read the right table."""
        self.right = right

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the right table's getter."""
        self.context = context
        self.getter = self.right.open(context)

    def process(self, record: Record) -> None:
        """Forwards the response, keyed by the primary key (or nothing)."""
        foreign_key, primary_key = record[0]
        subscription = record[1].new
        wrapper: SubscriptionWrapper = subscription.value
        found = None if foreign_key is None else self.getter.get_with_timestamp(foreign_key)
        timestamp = subscription.timestamp
        if found is not None:
            timestamp = max(timestamp, found.timestamp)
        instruction = wrapper.instruction
        if instruction == DELETE_KEY_AND_PROPAGATE:
            value = None
        elif instruction == PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            value = None if found is None else found.value
        elif instruction == PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE:
            if found is None:
                return
            value = found.value
        else:  # DELETE_KEY_NO_PROPAGATE
            return
        response = SubscriptionResponseWrapper(wrapper.hash, value, wrapper.primary_partition)
        self.context.forward(Record(primary_key, response, timestamp, record[3]))


class ForeignTableJoinProcessor(_SubscriptionStoreProcessor):
    """A right-table change answered to every subscription of its key (a prefix scan of the
    subscription store)."""

    def __init__(
        self,
        store: str,
        slots: tuple[SerdeSlot, SerdeSlot],
        topic: str,
        versioned: bool = False,
    ) -> None:
        """``slots``: the foreign key's and the primary key's; ``versioned``: the right table
        is versioned (its out-of-order updates are dropped)."""
        super().__init__(store, slots, topic)
        self.versioned = versioned

    def process(self, record: Record) -> None:
        """Forwards a response per subscription of the changed right key."""
        if record[0] is None:
            skip_record(self.context, "null key")
            return
        if self.versioned and not record[1].is_latest:
            _drop_out_of_order(self.context)
            return
        prefix = combined_key(bytes(self.fk_serialize(self.fk_topic, record[0])))
        # Read all first: the responses are forwarded while no store iterator is open.
        matches = [
            (key, value)
            for key, value in self.store.range(prefix, _increment(prefix))
            if key.startswith(prefix)
        ]
        new = record[1].new
        for key, value in matches:
            primary_key = self.pk_deserialize(self.pk_topic, split_combined_key(key)[1])
            wrapper = self.wrapper_deserializer.deserialize(None, value[8:])
            assert wrapper is not None
            response = SubscriptionResponseWrapper(wrapper.hash, new, wrapper.primary_partition)
            self.context.forward(Record(primary_key, response, record[2], record[3]))


def _drop_out_of_order(context: ProcessorGraphContext) -> None:
    """Kafka's KIP-914 rule: an update of a versioned table older than its key's latest
    changes no join result."""
    _log.info(
        "Skipping out-of-order record from versioned table while performing table-table join."
    )
    context.record_dropped()


def _increment(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix`` but one (Kafka's
    ``Bytes.increment``; a combined-key prefix never is all 0xff: it starts with a length)."""
    number = int.from_bytes(prefix, "big") + 1
    return number.to_bytes(len(prefix), "big")


class ResponseJoinProcessor(Processor):
    """Joins a response with the left row's current value, unless the row changed since the
    subscription (the hashes differ: a stale response, dropped and counted)."""

    def __init__(
        self,
        left: ValueGetterSupplier,
        value_slot: SerdeSlot,
        joiner: Callable[[Any, Any], Any],
        left_join: bool,
        topic: str,
    ) -> None:
        """``left``: how to read the left table; ``value_slot``: its value serde (hashed)."""
        self.left = left
        self.value_slot = value_slot
        self.joiner = joiner
        self.left_join = left_join
        self.topic = topic

    def init(self, context: ProcessorGraphContext) -> None:
        """Opens the left table's getter."""
        self.context = context
        self.getter = self.left.open(context)
        self.value_serialize = self.value_slot.get().serializer.serialize
        self.value_topic = _pseudo_topic(context, self.topic, "-vh")

    def process(self, record: Record) -> None:
        """Forwards the join result (``None``: a tombstone) or drops a stale response."""
        response: SubscriptionResponseWrapper = record[1]
        current = self.getter.get_with_timestamp(record[0])
        current_hash = None
        if current is not None:
            raw = self.value_serialize(self.value_topic, current.value)
            current_hash = murmur3_128(bytes(raw or b""))
        if response.original_hash != current_hash:
            _log.debug("Dropping FK-join response due to hash mismatch.")
            self.context.record_dropped()
            return
        foreign = response.foreign_value
        if foreign is None and (not self.left_join or current is None):
            result = None
        else:
            result = self.joiner(None if current is None else current.value, foreign)
        self.context.forward(Record(record[0], result, record[2], record[3]))


class SubscriptionStoreView:
    """The subscription store as queries and the ``TopologyTestDriver`` read it: combined-key
    bytes to :class:`SubscriptionWrapper` (Kafka's store of ``Bytes`` keys)."""

    def __init__(self, inner: Any, pk_slot: SerdeSlot, name: str) -> None:
        """``inner``: the byte store's reads."""
        self.inner = inner
        self.name = name
        self._pk_slot = pk_slot

    def _decode(self, raw: bytes) -> SubscriptionWrapper:
        wrapper = SubscriptionDeserializer(self._pk_slot.get().deserializer, self.name)
        found = wrapper.deserialize(None, raw[8:])
        if found is None:  # pragma: no cover - a stored value is never None
            raise StreamsError(f"store {self.name!r}: an empty subscription")
        return found

    def get(self, key: bytes) -> SubscriptionWrapper | None:
        """The subscription stored under the combined key ``key``, or ``None``."""
        raw = self.inner.get(bytes(key))
        return None if raw is None else self._decode(raw)

    def all(self) -> Any:
        """Every ``(combined key, subscription)``."""
        for key, raw in self.inner.all():
            yield bytes(key), self._decode(raw)

    def approximate_num_entries(self) -> int:
        """The number of subscriptions, approximately."""
        return int(self.inner.approximate_num_entries())
