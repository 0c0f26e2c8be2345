"""The topology: what a :class:`~streamstate.StreamsApp` reads, keeps and writes.

A deliberately small, Pythonic subset of Kafka Streams' Processor API::

    topology = Topology()
    topology.add_store("counts")                        # logged to <app id>-counts-changelog
    topology.add_global_store("prices", topic="prices")  # a read-only copy of a whole topic

    @topology.processor(sources=["clicks"], stores=["counts"], sinks=["click-counts"])
    def count(ctx: ProcessorContext, record: StampedRecord) -> None:
        store = ctx.store("counts")
        n = int(store.get(record.key) or b"0") + 1
        store.put(record.key, b"%d" % n)
        ctx.send("click-counts", record.key, b"%d" % n)

Source topics must be co-partitioned (Kafka Streams' rule): partition ``p`` of every source topic
belongs to task ``p``, whose stores hold the state of that partition. Keys and values of stores
are ``bytes``; records reach the processor deserialized by the source's deserializers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamstate.app.context import ProcessorContext
    from streamstate.records import StampedRecord

__all__ = ["GlobalStoreSpec", "Processor", "StoreSpec", "Topology", "TopologyError"]

Processor = Callable[["ProcessorContext", "StampedRecord"], None]


class TopologyError(ValueError):
    """A topology that cannot run: a duplicate or unknown name, no processor, and the like."""


@dataclass(frozen=True)
class StoreSpec:
    """A key-value store of each task: ``persistent`` (fjall, under ``state.dir``) or in
    memory; ``logged`` stores write every change to ``<application.id>-<name>-changelog``."""

    name: str
    persistent: bool = True
    logged: bool = True

    def changelog_topic(self, application_id: str) -> str:
        """Kafka Streams' changelog topic name for this store."""
        return f"{application_id}-{self.name}-changelog"


@dataclass(frozen=True)
class GlobalStoreSpec:
    """A store holding every partition of ``topic`` (key and value bytes, a ``None`` value
    deletes), read-only to processors and queries, kept up to date by the global thread."""

    name: str
    topic: str


@dataclass
class _ProcessorNode:
    function: Processor
    sources: tuple[str, ...]
    stores: tuple[str, ...]
    sinks: tuple[str, ...]
    key_deserializer: Any
    value_deserializer: Any


@dataclass
class Topology:
    """Source topics, one processor, its stores and sinks, and global stores."""

    _stores: dict[str, StoreSpec] = field(default_factory=dict)
    _global_stores: dict[str, GlobalStoreSpec] = field(default_factory=dict)
    _processor: _ProcessorNode | None = None

    def add_store(self, name: str, *, persistent: bool = True, logged: bool = True) -> Topology:
        """Adds a key-value store that every task has one of; returns the topology."""
        self._check_new_name(name)
        self._stores[name] = StoreSpec(name, persistent, logged)
        return self

    def add_global_store(self, name: str, *, topic: str) -> Topology:
        """Adds a global store over every partition of ``topic``; returns the topology."""
        self._check_new_name(name)
        self._global_stores[name] = GlobalStoreSpec(name, topic)
        return self

    def processor(
        self,
        *,
        sources: Sequence[str],
        stores: Sequence[str] = (),
        sinks: Sequence[str] = (),
        key_deserializer: Any = None,
        value_deserializer: Any = None,
    ) -> Callable[[Processor], Processor]:
        """A decorator registering ``fn(ctx, record)`` as the processor of ``sources``.

        ``stores`` names the stores (task or global) it may use through ``ctx.store(name)``,
        ``sinks`` the topics it may ``ctx.send`` to. Deserializers default to the app's
        ``default.key.serde``/``default.value.serde`` equivalents (``BytesDeserializer``).
        """
        if isinstance(sources, str):
            raise TopologyError("sources is a list of topics, not a string")
        if not sources:
            raise TopologyError("a processor needs at least one source topic")

        def register(function: Processor) -> Processor:
            if self._processor is not None:
                raise TopologyError("this topology already has a processor")
            self._processor = _ProcessorNode(
                function,
                tuple(sources),
                tuple(stores),
                tuple(sinks),
                key_deserializer,
                value_deserializer,
            )
            return function

        return register

    # -- read by the runtime ------------------------------------------------------------------

    @property
    def stores(self) -> dict[str, StoreSpec]:
        """The task stores, by name."""
        return dict(self._stores)

    @property
    def global_stores(self) -> dict[str, GlobalStoreSpec]:
        """The global stores, by name."""
        return dict(self._global_stores)

    @property
    def source_topics(self) -> tuple[str, ...]:
        """The processor's source topics."""
        return self._processor.sources if self._processor is not None else ()

    def node(self) -> _ProcessorNode:
        """The processor, checked against the stores; raises :class:`TopologyError`."""
        if self._processor is None:
            raise TopologyError("the topology has no processor: decorate one with .processor()")
        for name in self._processor.stores:
            if name not in self._stores and name not in self._global_stores:
                raise TopologyError(f"the processor uses store {name!r}, which was never added")
        clash = set(self._processor.sources) & {g.topic for g in self._global_stores.values()}
        if clash:
            raise TopologyError(
                f"topics {sorted(clash)} are both a source and a global store topic"
            )
        return self._processor

    def _check_new_name(self, name: str) -> None:
        if not name or "/" in name or name in (".", ".."):
            raise TopologyError(f"a store name must be a plain directory name, not {name!r}")
        if name in self._stores or name in self._global_stores:
            raise TopologyError(f"a store named {name!r} already exists")
