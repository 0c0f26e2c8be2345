"""Versioned tables (``Materialized(versioned_retention=...)``, KIP-889) name their nodes and
stores as Kafka Streams does: each program of ``benches/kstreams/DescribeVersionedTables.java``
(tables materialized with ``Stores.persistentVersionedKeyValueStore``), written with
streamstate's DSL, describes itself exactly as Kafka Streams 4.4 describes the Java program;
``suppress`` on a versioned table is refused by both.

The oracle is Kafka Streams itself (run once per module); without Java or its jars
(``make kstreams``) these tests fail with the error.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from benches import _kstreams

from streamstate.dsl import BufferConfig, Materialized, StreamsBuilder, Suppressed
from streamstate.errors import TopologyError

Program = Callable[[StreamsBuilder], None]
FIVE_MINUTES = 300_000


@pytest.fixture(scope="module")
def kafka_texts() -> dict[str, str]:
    """Kafka Streams' ``describe()`` text of every program, by name (Java runs once)."""
    report = _kstreams._run_java("DescribeVersionedTables", [], 120.0)
    return {str(name): str(text) for name, text in report.items()}


def versioned(name: str) -> Materialized:
    return Materialized(name, versioned_retention=FIVE_MINUTES)


def _table(b: StreamsBuilder) -> None:
    b.table("input", materialized=versioned("vs")).to_stream().to("out")


def _table_group_by_count(b: StreamsBuilder) -> None:
    (
        b.table("input", materialized=versioned("vs"))
        .group_by(lambda k, v: (v, v))
        .count()
        .to_stream()
        .to("out")
    )


def _table_filter_map_values(b: StreamsBuilder) -> None:
    (
        b.table("input", materialized=versioned("vs"))
        .filter(lambda k, v: v is not None)
        .map_values(lambda v: v + "!")
        .to_stream()
        .to("out")
    )


def _to_table_after_key_change(b: StreamsBuilder) -> None:
    (
        b.stream("input")
        .select_key(lambda k, v: v)
        .to_table(materialized=versioned("vs"))
        .to_stream()
        .to("out")
    )


def _two_versioned_tables(b: StreamsBuilder) -> None:
    t1 = b.table("a", materialized=versioned("va"))
    t2 = b.stream("b").to_table(materialized=versioned("vb"))
    t1.to_stream().to("o1")
    t2.to_stream().to("o2")


PROGRAMS: dict[str, Program] = {
    "table": _table,
    "table_group_by_count": _table_group_by_count,
    "table_filter_map_values": _table_filter_map_values,
    "to_table_after_key_change": _to_table_after_key_change,
    "two_versioned_tables": _two_versioned_tables,
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_describe_is_kafkas(name: str, kafka_texts: dict[str, str]) -> None:
    builder = StreamsBuilder()
    PROGRAMS[name](builder)
    assert str(builder.build().describe()) == kafka_texts[name]


def test_suppress_on_a_versioned_table_is_refused_as_kafka_refuses_it(
    kafka_texts: dict[str, str],
) -> None:
    assert kafka_texts["suppress"].startswith("ERROR: org.apache.kafka.streams.errors.")
    kafka_message = kafka_texts["suppress"].split("TopologyException: ", 1)[1]
    table = StreamsBuilder().table("input", materialized=versioned("vs"))
    with pytest.raises(TopologyError) as refused:
        table.suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
    assert kafka_message in str(refused.value)
