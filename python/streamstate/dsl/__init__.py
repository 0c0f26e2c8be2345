"""The DSL: Kafka Streams' ``StreamsBuilder``, ``KStream``, ``KTable`` and their operations,
compiled into a processor graph (:class:`~streamstate.Topology`) that ``StreamsApp``, the
``TopologyTestDriver`` and Spark run as they run the Processor API::

    builder = StreamsBuilder()
    (builder.stream("text-lines", key_serde=Serdes.String(), value_serde=Serdes.String())
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda _key, word: word)
        .count()
        .to_stream()
        .to("word-counts", value_serde=Serdes.Long()))
    topology = builder.build()

Modules, one concept each: ``builder`` (``StreamsBuilder``), ``stream`` (``KStream``),
``table`` (``KTable``, ``GlobalKTable``), ``grouped`` (``KGroupedStream``, ``KGroupedTable``),
``windowed`` (``TimeWindowedKStream``, ``SessionWindowedKStream``), ``windows`` (window
specifications, ``Windowed``), ``suppress`` (``Suppressed``, ``BufferConfig``),
``materialized`` (``Materialized``), ``naming`` (Kafka's generated names), ``stores`` (the
typed stores) and ``object_cache`` (their record cache of objects), ``versioned_store``
(versioned key-value stores, KIP-889/914), ``windowed_serde`` (windowed keys' serdes), and the
processors (``stream_processors``, ``table_processors``, ``window_processors``,
``sliding_processors``).

Joins: ``joins`` (which join a ``join``/``left_join``/``outer_join`` call is),
``stream_table_join`` (a ``KStream`` with a ``KTable`` or ``GlobalKTable``),
``stream_stream_join`` (windowed, with ``join_stores``, its stores), ``table_table_join`` (on
the primary key), ``foreign_key_join`` (KIP-213, with ``subscription``, its wire formats), each
with its processors (``stream_table_join_processors``, ``stream_join_processors``,
``table_join_processors``, ``foreign_key_processors``), and ``value_getters`` (how a join
reads a table's current values). See ``docs/dsl.md``.
"""

from __future__ import annotations

from streamstate.dsl.builder import StreamsBuilder
from streamstate.dsl.grouped import KGroupedStream, KGroupedTable
from streamstate.dsl.materialized import Materialized
from streamstate.dsl.stores import ValueAndTimestamp
from streamstate.dsl.stream import KStream
from streamstate.dsl.suppress import BufferConfig, Suppressed
from streamstate.dsl.table import GlobalKTable, KTable
from streamstate.dsl.versioned_store import VersionedRecord
from streamstate.dsl.windowed import SessionWindowedKStream, TimeWindowedKStream
from streamstate.dsl.windows import (
    EmitStrategy,
    JoinWindows,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    Window,
    Windowed,
)

__all__ = [
    "BufferConfig",
    "EmitStrategy",
    "GlobalKTable",
    "JoinWindows",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "SessionWindowedKStream",
    "SessionWindows",
    "SlidingWindows",
    "StreamsBuilder",
    "Suppressed",
    "TimeWindowedKStream",
    "TimeWindows",
    "ValueAndTimestamp",
    "VersionedRecord",
    "Window",
    "Windowed",
]
