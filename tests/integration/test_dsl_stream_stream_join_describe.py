"""Windowed KStream-KStream joins name their nodes, stores and repartition topics as Kafka Streams
does: each program of ``benches/kstreams/DescribeStreamStreamJoins.java``, written with
streamstate's DSL, describes itself (``str(builder.build().describe())``) exactly as Kafka
Streams 4.4 describes the Java program: inner, left and outer joins, unnamed, with a
``StreamJoined`` name and/or store name, after key changes on both sides (repartitioned, with
Kafka's topic names), a self-join, two joins in a row, two joins of one repartitioned stream
(the second reuses the first's repartition topic, as in Kafka) and a count after a join.

The oracle is Kafka Streams itself (run once per module); without Java or its jars
(``make kstreams``) these tests fail with the error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from benches import _kstreams

from streamstate.dsl import JoinWindows, KStream, StreamsBuilder

Program = Callable[[StreamsBuilder], None]


@pytest.fixture(scope="module")
def kafka_texts() -> dict[str, str]:
    """Kafka Streams' ``describe()`` text of every program, by name (Java runs once)."""
    report = _kstreams._run_java("DescribeStreamStreamJoins", [], 120.0)
    return {str(name): str(text) for name, text in report.items()}


def joiner(left: Any, right: Any) -> str:
    return f"{left}+{right}"


def windows() -> JoinWindows:
    return JoinWindows.of_time_difference_and_grace(100, 10)


_METHODS = {"inner": "join", "left": "left_join", "outer": "outer_join"}


def _join(kind: str, left: KStream, right: KStream, **options: Any) -> KStream:
    result: KStream = getattr(left, _METHODS[kind])(right, joiner, windows(), **options)
    return result


def _programs() -> dict[str, Program]:
    programs: dict[str, Program] = {}
    for kind in _METHODS:

        def plain(b: StreamsBuilder, kind: str = kind) -> None:
            _join(kind, b.stream("left"), b.stream("right")).to("out")

        def named(b: StreamsBuilder, kind: str = kind) -> None:
            _join(kind, b.stream("left"), b.stream("right"), name="enrich", store_name="shop").to(
                "out"
            )

        def name_only(b: StreamsBuilder, kind: str = kind) -> None:
            _join(kind, b.stream("left"), b.stream("right"), name="enrich").to("out")

        def store_only(b: StreamsBuilder, kind: str = kind) -> None:
            _join(kind, b.stream("left"), b.stream("right"), store_name="shop").to("out")

        def key_changed(b: StreamsBuilder, kind: str = kind) -> None:
            left = b.stream("left").map(lambda k, v: (v, k))
            right = b.stream("right").select_key(lambda k, v: v)
            _join(kind, left, right).map_values(lambda v: v).to("out")

        def key_changed_named(b: StreamsBuilder, kind: str = kind) -> None:
            left = b.stream("left").map(lambda k, v: (v, k))
            right = b.stream("right").select_key(lambda k, v: v)
            _join(kind, left, right, name="enrich").to("out")

        programs[kind] = plain
        programs[f"{kind}_named"] = named
        programs[f"{kind}_name_only"] = name_only
        programs[f"{kind}_store_only"] = store_only
        programs[f"{kind}_key_changed"] = key_changed
        programs[f"{kind}_key_changed_named"] = key_changed_named

    def right_key_changed_left(b: StreamsBuilder) -> None:
        right = b.stream("right").select_key(lambda k, v: v)
        b.stream("left").left_join(right, joiner, windows()).to("out")

    def self_join(b: StreamsBuilder) -> None:
        stream = b.stream("left")
        stream.join(stream, joiner, windows()).to("out")

    def two_joins(b: StreamsBuilder) -> None:
        left, right = b.stream("left"), b.stream("right")
        left.join(right, joiner, windows()).left_join(right, joiner, windows()).to("out")

    def reused_repartition(b: StreamsBuilder) -> None:
        left = b.stream("left").select_key(lambda k, v: v)
        right = b.stream("right")
        left.join(right, joiner, windows()).to("out")
        left.left_join(right, joiner, windows()).to("out2")

    def join_then_count(b: StreamsBuilder) -> None:
        left, right = b.stream("left"), b.stream("right")
        (
            left.outer_join(right, joiner, windows())
            .select_key(lambda k, v: v)
            .group_by_key()
            .count()
            .to_stream()
            .to("out")
        )

    def self_join_key_changed(b: StreamsBuilder) -> None:
        stream = b.stream("left").select_key(lambda k, v: v)
        stream.left_join(stream, joiner, windows()).to("out")

    programs["self_join_key_changed"] = self_join_key_changed
    programs["reused_repartition"] = reused_repartition
    programs["join_then_count"] = join_then_count
    programs["right_key_changed_left"] = right_key_changed_left
    programs["self_join"] = self_join
    programs["two_joins"] = two_joins
    return programs


PROGRAMS = _programs()


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_describes_as_kafka(name: str, kafka_texts: dict[str, str]) -> None:
    builder = StreamsBuilder()
    PROGRAMS[name](builder)
    assert str(builder.build().describe()) == kafka_texts[name]


def test_every_java_program_has_a_python_twin(kafka_texts: dict[str, str]) -> None:
    assert sorted(kafka_texts) == sorted(PROGRAMS)
