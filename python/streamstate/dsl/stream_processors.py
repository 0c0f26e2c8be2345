"""The processors of ``KStream``'s stateless operations (Kafka's ``KStreamFilter``,
``KStreamMap``, ``KStreamMapValues``, ``KStreamFlatMap``, ``KStreamFlatMapValues``,
``KStreamPeek``, ``KStreamBranch``, ``KStreamPassThrough``).

Each forwards a changed copy of the record it receives (same timestamp and headers), so the
processors of one task need no state. They are small on purpose: one Python call of the user's
function per record, and one ``forward``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streamstate.errors import StreamsError
from streamstate.processor.context import ProcessorGraphContext
from streamstate.processor.processor import Processor
from streamstate.processor.record import Record

__all__ = [
    "BranchProcessor",
    "FilterProcessor",
    "FlatMapProcessor",
    "FlatMapValuesProcessor",
    "ForeachProcessor",
    "MapProcessor",
    "MapValuesProcessor",
    "NullKeyPolicy",
    "PassThroughProcessor",
    "RepartitionFilterProcessor",
    "SelectKeyProcessor",
]


class _Forwarding(Processor):
    """Keeps the context's ``forward``."""

    context: ProcessorGraphContext
    forward: Callable[[Record], None]

    def init(self, context: ProcessorGraphContext) -> None:
        """Keeps the context."""
        self.context = context
        self.forward = context.forward


class PassThroughProcessor(_Forwarding):
    """Forwards every record as it is (``merge``)."""

    def process(self, record: Record) -> None:
        """Forwards ``record``."""
        self.forward(record)


@dataclass
class NullKeyPolicy:
    """Whether one repartition topic's filter lets records without a key through.

    Decided while the topology is built, possibly after the filter was added: a left join
    further down turns ``keep`` on (Kafka's ``NULL_KEY_RELAXED_JOIN`` label). The filter's
    processors read it when a task creates them, after the topology is complete."""

    keep: bool = False


class RepartitionFilterProcessor(_Forwarding):
    """Before a repartition topic: a record without a key cannot be partitioned; it is dropped
    and counted (Kafka drops it after the topic, in the aggregation, and counts it there),
    unless its :class:`NullKeyPolicy` keeps it for a left join downstream."""

    def __init__(self, policy: NullKeyPolicy | None = None) -> None:
        """``policy``: the repartition's; none drops every record without a key."""
        self.keep_null_keys = policy is not None and policy.keep

    def process(self, record: Record) -> None:
        """Forwards ``record`` if it has a key (or records without one are kept)."""
        if record[0] is None and not self.keep_null_keys:
            self.context.record_dropped()
            return
        self.forward(record)


class FilterProcessor(_Forwarding):
    """Forwards the records for which ``predicate(key, value)`` is ``keep``."""

    def __init__(self, predicate: Callable[[Any, Any], Any], keep: bool = True) -> None:
        """``keep=False``: ``filter_not``."""
        self.predicate = predicate
        self.keep = keep

    def process(self, record: Record) -> None:
        """Forwards ``record`` if it passes."""
        if bool(self.predicate(record[0], record[1])) is self.keep:
            self.forward(record)


class MapProcessor(_Forwarding):
    """Forwards ``mapper(key, value) -> (key2, value2)``."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        """The mapper returns a pair."""
        self.mapper = mapper

    def process(self, record: Record) -> None:
        """Forwards the mapped pair."""
        pair = self.mapper(record[0], record[1])
        key, value = _pair(pair, "map")
        self.forward(tuple.__new__(Record, (key, value, record[2], record[3])))


class SelectKeyProcessor(_Forwarding):
    """Forwards the record under ``selector(key, value)``."""

    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        """The selector returns the new key."""
        self.selector = selector

    def process(self, record: Record) -> None:
        """Forwards the re-keyed record."""
        key = self.selector(record[0], record[1])
        self.forward(tuple.__new__(Record, (key, record[1], record[2], record[3])))


class MapValuesProcessor(_Forwarding):
    """Forwards ``mapper(value)`` (or ``mapper(key, value)`` with ``with_key``)."""

    def __init__(self, mapper: Callable[..., Any], with_key: bool = False) -> None:
        """``with_key``: Kafka's ``ValueMapperWithKey``."""
        self.mapper = mapper
        self.with_key = with_key

    def process(self, record: Record) -> None:
        """Forwards the mapped value."""
        value = self.mapper(record[0], record[1]) if self.with_key else self.mapper(record[1])
        self.forward(tuple.__new__(Record, (record[0], value, record[2], record[3])))


class FlatMapProcessor(_Forwarding):
    """Forwards each pair of ``mapper(key, value)``."""

    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        """The mapper returns an iterable of pairs."""
        self.mapper = mapper

    def process(self, record: Record) -> None:
        """Forwards every pair."""
        timestamp, headers = record[2], record[3]
        for pair in self.mapper(record[0], record[1]):
            key, value = _pair(pair, "flat_map")
            self.forward(tuple.__new__(Record, (key, value, timestamp, headers)))


class FlatMapValuesProcessor(_Forwarding):
    """Forwards each value of ``mapper(value)`` under the record's key."""

    def __init__(self, mapper: Callable[..., Any], with_key: bool = False) -> None:
        """``with_key``: the mapper takes ``(key, value)``."""
        self.mapper = mapper
        self.with_key = with_key

    def process(self, record: Record) -> None:
        """Forwards every value."""
        key, timestamp, headers = record[0], record[2], record[3]
        values = self.mapper(key, record[1]) if self.with_key else self.mapper(record[1])
        for value in values:
            self.forward(tuple.__new__(Record, (key, value, timestamp, headers)))


class ForeachProcessor(Processor):
    """Calls ``action(key, value)``; forwards the record too when ``forward`` (``peek``)."""

    def __init__(self, action: Callable[[Any, Any], Any], forward: bool) -> None:
        """``forward=False``: ``foreach``, a terminal operation."""
        self.action = action
        self.forwards = forward
        self._forward: Callable[[Record], None] | None = None

    def init(self, context: ProcessorGraphContext) -> None:
        """Keeps ``forward`` for ``peek``."""
        self._forward = context.forward if self.forwards else None

    def process(self, record: Record) -> None:
        """Calls the action."""
        self.action(record[0], record[1])
        if self._forward is not None:
            self._forward(record)


class BranchProcessor(Processor):
    """Forwards each record to the child of the first predicate it matches (Kafka's
    ``split().branch(...)``); with ``default_child``, records no predicate matches go
    there, else they are dropped (not counted: Kafka drops them too)."""

    def __init__(
        self,
        predicates: Sequence[Callable[[Any, Any], Any]],
        children: Sequence[str],
        default_child: str | None,
    ) -> None:
        """``children[i]`` receives what ``predicates[i]`` matches first."""
        self.routes = list(zip(predicates, children, strict=True))
        self.default_child = default_child
        self.context: ProcessorGraphContext | None = None

    def init(self, context: ProcessorGraphContext) -> None:
        """Keeps the context."""
        self.context = context

    def process(self, record: Record) -> None:
        """Forwards ``record`` to its branch."""
        assert self.context is not None
        key, value = record[0], record[1]
        for predicate, child in self.routes:
            if predicate(key, value):
                self.context.forward(record, child)
                return
        if self.default_child is not None:
            self.context.forward(record, self.default_child)


def _pair(pair: Any, operation: str) -> tuple[Any, Any]:
    try:
        key, value = pair
    except (TypeError, ValueError):
        raise StreamsError(
            f"{operation}: the mapper must return a (key, value) pair, not {pair!r}"
        ) from None
    return key, value
