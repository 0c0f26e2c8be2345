"""Serdes decided when the app binds the topology: :class:`SerdeSlot`.

Kafka resolves a missing serde from ``default.key.serde`` / ``default.value.serde`` when the
app starts; so does streamstate: a DSL operation without a serde holds a slot, which
``StreamsApp`` and the ``TopologyTestDriver`` fill from their config when they bind the
topology, raising :class:`~streamstate.errors.TopologyError` naming the operation when there
is neither. Source and sink nodes hold placeholders (:class:`SlotSerializer`,
:class:`SlotDeserializer`) that :func:`unwrap` replaces with the slot's own serializer, so the
native (Rust) fast paths of the built-in serdes stay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamstate.errors import TopologyError
from streamstate.serde import Serde, Serializer, StringSerializer

__all__ = ["SerdeSlot", "SlotDeserializer", "SlotSerializer", "serialize_function", "unwrap"]


class SerdeSlot:
    """The key or value serde of one operation: the one given, else the app's default."""

    def __init__(self, serde: Serde | None, role: str, operation: str) -> None:
        """``role``: ``"key"`` or ``"value"``; ``operation`` names the DSL call in errors."""
        if serde is not None and not isinstance(serde, Serde):
            raise TopologyError(
                f"{operation}: a {role} serde is a streamstate.Serde (Serdes.String(), ...), "
                f"not {type(serde).__name__}"
            )
        self.given = serde
        self.role = role
        self.operation = operation
        self.resolved: Serde | None = serde
        # Whether a node or store serializes with it: only those need a serde at start.
        self.used = False

    def use(self) -> SerdeSlot:
        """Marks the slot as needed (by a source, sink, repartition topic or store)."""
        self.used = True
        return self

    def resolve(self, default: Serde | None) -> None:
        """Fills the slot with ``default`` unless a serde was given (a slot nothing uses
        stays empty when there is no default)."""
        if self.given is None:
            if default is None and not self.used:
                return
            if default is None:
                raise TopologyError(
                    f"{self.operation}: no {self.role} serde; give one to the operation or set "
                    f"default.{self.role}.serde in the config"
                )
            self.resolved = default

    def get(self) -> Serde:
        """The serde (after :meth:`resolve`)."""
        if self.resolved is None:
            self.resolve(None)
        assert self.resolved is not None
        return self.resolved

    def or_else(self, other: SerdeSlot) -> SerdeSlot:
        """This slot if a serde was given, else ``other`` (Kafka's serde inheritance)."""
        return self if self.given is not None else other


class SlotSerializer:
    """A sink's serializer until the app binds the topology (then :func:`unwrap` replaces it
    with the slot's serializer, so the native fast paths stay)."""

    def __init__(self, slot: SerdeSlot) -> None:
        """Serializes with ``slot``'s serde."""
        self.slot = slot.use()

    def serialize(self, topic: str | None, obj: Any) -> bytes | None:
        """Serializes with the resolved serde."""
        result: bytes | None = self.slot.get().serializer.serialize(topic, obj)
        return result


class SlotDeserializer:
    """A source's deserializer until the app binds the topology."""

    def __init__(self, slot: SerdeSlot) -> None:
        """Deserializes with ``slot``'s serde."""
        self.slot = slot.use()

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        """Deserializes with the resolved serde."""
        return self.slot.get().deserializer.deserialize(topic, data)


def unwrap(obj: Any) -> Any:
    """The real serializer or deserializer behind a slot placeholder (others as they are)."""
    if type(obj) is SlotSerializer:
        return obj.slot.get().serializer
    if type(obj) is SlotDeserializer:
        return obj.slot.get().deserializer
    return obj


def serialize_function(serializer: Any) -> Callable[[str, Any], Any]:
    """The serializer's Rust ``serialize`` itself where its Python method only forwards to it
    (one call per record instead of two on the sink path); a subclass that overrides
    ``serialize`` keeps its override."""
    native = getattr(serializer, "_native", None)
    method_of_class = type(serializer).serialize
    if native is not None and (
        method_of_class is Serializer.serialize
        or (
            method_of_class is StringSerializer.serialize
            and getattr(serializer, "encoding", None) == "utf-8"
        )
    ):
        function: Callable[[str, Any], Any] = native.serialize
        return function
    method: Callable[[str, Any], Any] = serializer.serialize
    return method
