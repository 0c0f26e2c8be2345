"""The DSL names its nodes, stores and topics as Kafka Streams does: each program of
``benches/kstreams/DescribeDsl.java``, written with streamstate's DSL, describes itself
(``str(builder.build().describe())``) exactly as Kafka Streams describes the Java program.

The oracle is Kafka Streams itself (``benches._kstreams.describe_dsl_programs()``, run once per
module); without Java or its jars (``make kstreams``) these tests fail with the error.

Two programs cannot match word for word, for reasons stated where they are checked:

* ``split``: Kafka's ``split().defaultBranch()`` names its default branch ``<splitter>0`` and
  numbers it after the predicates' branches; ``KStream.branch`` has no default branch, so the
  program ends with a catch-all predicate, a third branch named ``<splitter>3``.
* ``global_table``: Kafka numbers a global store's sub-topology among the others, in the order
  the nodes were added (``Sub-topology: 0 for global store``, then the stream's
  ``Sub-topology: 1``); streamstate's stream sub-topology ids are its task ids, which count no
  global store, and its ``describe()`` prints the global stores after them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from benches import _kstreams

from streamstate.dsl import (
    BufferConfig,
    EmitStrategy,
    Materialized,
    SessionWindowedKStream,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
)
from streamstate.processor.processor import Processor
from streamstate.serde import Serdes

Program = Callable[[StreamsBuilder], None]

MINUTE = 60_000


@pytest.fixture(scope="module")
def kafka_texts() -> dict[str, str]:
    """Kafka Streams' ``describe()`` text of every program, by name (Java runs once)."""
    return _kstreams.describe_dsl_programs()


def words(line: str) -> list[str]:
    return line.lower().split()


def always(_key: Any, _value: Any) -> bool:
    return True


def never(_key: Any, _value: Any) -> bool:
    return False


def swap(key: Any, value: Any) -> tuple[Any, Any]:
    return value, key


def last(_aggregate: Any, value: Any) -> Any:
    return value


def concat(aggregate: Any, value: Any) -> Any:
    return aggregate + value


def count_one(_key: Any, _value: Any, aggregate: int) -> int:
    return aggregate + 1


class Nothing(Processor):
    """A processor that forwards nothing (the Java program's is empty too)."""

    def process(self, record: Any) -> None:
        pass


# --- the programs, as in DescribeDsl.java --------------------------------------------------------


def word_count(b: StreamsBuilder) -> None:
    (
        b.stream("text-lines")
        .flat_map_values(words)
        .group_by(lambda _key, word: word)
        .count()
        .to_stream()
        .to("word-counts")
    )


def stateless(b: StreamsBuilder) -> None:
    (
        b.stream("input")
        .filter(always)
        .filter_not(never)
        .map_values(lambda v: v)
        .map(lambda k, v: (k, v))
        .flat_map(lambda k, v: [(k, v)])
        .select_key(lambda k, _v: k)
        .peek(lambda _k, _v: None)
        .to("output")
    )


def foreach(b: StreamsBuilder) -> None:
    b.stream("input").foreach(lambda _k, _v: None)


def merge(b: StreamsBuilder) -> None:
    a = b.stream("a")
    c = b.stream("b")
    a.merge(c).to("out")


def split(b: StreamsBuilder) -> None:
    # Kafka's defaultBranch() is a last branch that takes the rest: here a catch-all predicate.
    first, second, default = b.stream("input").branch(always, never, always)
    # Java sent its branches to out-0..2 in its HashMap's order: second, default, first.
    for i, branch in enumerate((second, default, first)):
        branch.to(f"out-{i}")


def group_by_key_count(b: StreamsBuilder) -> None:
    b.stream("input").group_by_key().count().to_stream().to("output")


def map_group_by_key_reduce(b: StreamsBuilder) -> None:
    b.stream("input").map(swap).group_by_key().reduce(last).to_stream().to("output")


def aggregate(b: StreamsBuilder) -> None:
    (
        b.stream("input")
        .group_by_key()
        .aggregate(
            lambda: 0, count_one, materialized=Materialized.with_(Serdes.String(), Serdes.Long())
        )
        .to_stream()
        .to("output")
    )


def named(b: StreamsBuilder) -> None:
    (
        b.stream("input")
        .group_by(lambda _k, v: v, name="by-word")
        .count(materialized="counts")
        .to_stream()
        .to("out")
    )


def repartition(b: StreamsBuilder) -> None:
    b.stream("input").repartition(name="rp", partitions=3).to("out")


def repartition_unnamed(b: StreamsBuilder) -> None:
    b.stream("input").repartition().to("out")


def windowed_count(b: StreamsBuilder) -> None:
    (
        b.stream("input")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(MINUTE))
        .count()
        .to_stream()
        .to("output")
    )


def hopping_reduce(b: StreamsBuilder) -> None:
    (
        b.stream("input")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(5 * MINUTE, MINUTE).advance_by(MINUTE))
        .reduce(concat)
        .to_stream()
        .to("output")
    )


def emit_final(b: StreamsBuilder) -> None:
    (
        b.stream("input")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(MINUTE))
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
        .to_stream()
        .to("output")
    )


def sliding(b: StreamsBuilder) -> None:
    (
        b.stream("input")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_with_no_grace(10_000))
        .count()
        .to_stream()
        .to("output")
    )


def session_suppress(b: StreamsBuilder) -> None:
    (
        b.stream("input")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5 * MINUTE))
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to("output")
    )


def session_aggregate(b: StreamsBuilder) -> None:
    sessions = (
        b.stream("input")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5 * MINUTE, MINUTE))
    )
    assert isinstance(sessions, SessionWindowedKStream)
    (
        sessions.aggregate(
            lambda: 0,
            count_one,
            lambda _k, x, y: x + y,
            materialized=Materialized.with_(Serdes.String(), Serdes.Long()),
        )
        .to_stream()
        .to("output")
    )


def table_ops(b: StreamsBuilder) -> None:
    b.table("input").filter(always).map_values(lambda v: v).to_stream().to("out")


def table_materialized(b: StreamsBuilder) -> None:
    b.table("input", materialized="input-store").filter_not(never).to_stream().to("out")


def table_group_by_count(b: StreamsBuilder) -> None:
    b.table("users").group_by(swap).count().to_stream().to("counts")


def table_group_by_reduce(b: StreamsBuilder) -> None:
    b.table("users").group_by(swap).reduce(concat, lambda x, _y: x).to_stream().to("out")


def table_suppress(b: StreamsBuilder) -> None:
    (
        b.table("input")
        .group_by(swap)
        .count()
        .suppress(
            Suppressed.until_time_limit(
                10_000, BufferConfig.max_records(100).emit_early_when_full()
            )
        )
        .to_stream()
        .to("out")
    )


def to_table(b: StreamsBuilder) -> None:
    b.stream("input").to_table().to_stream().to("out")


def global_table(b: StreamsBuilder) -> None:
    b.global_table("g")
    b.stream("input").to("out")


def two_groupings(b: StreamsBuilder) -> None:
    s = b.stream("input").select_key(lambda _k, v: v)
    s.group_by_key().count().to_stream().to("o1")
    s.group_by_key().reduce(last).to_stream().to("o2")


def to_stream_mapper(b: StreamsBuilder) -> None:
    b.table("input").to_stream(lambda k, _v: k).to("out")


def process(b: StreamsBuilder) -> None:
    b.add_state_store("my-store")
    b.stream("input").process(Nothing, "my-store").to("out")


PROGRAMS: dict[str, Program] = {
    program.__name__: program
    for program in (
        word_count,
        stateless,
        foreach,
        merge,
        split,
        group_by_key_count,
        map_group_by_key_reduce,
        aggregate,
        named,
        repartition,
        repartition_unnamed,
        windowed_count,
        hopping_reduce,
        emit_final,
        sliding,
        session_suppress,
        session_aggregate,
        table_ops,
        table_materialized,
        table_group_by_count,
        table_group_by_reduce,
        table_suppress,
        to_table,
        global_table,
        two_groupings,
        to_stream_mapper,
        process,
    )
}

# Programs whose text differs from Kafka's on purpose; each has its own test below.
DIFFERENT = {"split", "global_table"}


def describe(program: Program) -> str:
    builder = StreamsBuilder()
    program(builder)
    return str(builder.build().describe())


def test_the_programs_are_those_of_the_java_oracle(kafka_texts: dict[str, str]) -> None:
    assert [name for name in kafka_texts if name != "split_keys"] == list(PROGRAMS)
    errors = {name: text for name, text in kafka_texts.items() if text.startswith("ERROR:")}
    assert errors == {}


@pytest.mark.parametrize("name", [name for name in PROGRAMS if name not in DIFFERENT])
def test_describe_is_kafkas(name: str, kafka_texts: dict[str, str]) -> None:
    assert describe(PROGRAMS[name]) == kafka_texts[name]


def test_split_differs_only_in_the_default_branchs_name(kafka_texts: dict[str, str]) -> None:
    # The branch map of the Java program, in the order its branches went to out-0, out-1,
    # out-2: the second predicate's branch, the default branch, the first predicate's.
    assert kafka_texts["split_keys"] == (
        "KSTREAM-BRANCH-00000000012,KSTREAM-BRANCH-00000000010,KSTREAM-BRANCH-00000000011"
    )
    # Kafka's default branch is `<splitter>0`, streamstate's catch-all branch `<splitter>3`;
    # every other name and number is the same. Nodes of equal sub-tree size are listed by name,
    # so the default branch's node moves from before the two others to after them.
    kafka = kafka_texts["split"]
    default = (
        "    Processor: KSTREAM-BRANCH-00000000010 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000006\n"
        "      <-- KSTREAM-BRANCH-0000000001\n"
    )
    assert default in kafka
    moved = kafka.replace(default, "").replace(
        "    Sink: KSTREAM-SINK-0000000005",
        default.replace("00000000010", "00000000013") + "    Sink: KSTREAM-SINK-0000000005",
    )
    expected = moved.replace(
        "--> KSTREAM-BRANCH-00000000010, KSTREAM-BRANCH-00000000011, KSTREAM-BRANCH-00000000012",
        "--> KSTREAM-BRANCH-00000000011, KSTREAM-BRANCH-00000000012, KSTREAM-BRANCH-00000000013",
    ).replace("<-- KSTREAM-BRANCH-00000000010", "<-- KSTREAM-BRANCH-00000000013")
    assert expected != kafka
    assert describe(split) == expected


def test_global_table_lists_the_global_store_after_the_stream_subtopology(
    kafka_texts: dict[str, str],
) -> None:
    kafka = kafka_texts["global_table"]
    head = "Topologies:\n   "
    global_store, stream = kafka.removeprefix(head).split("  Sub-topology: 1\n")
    assert global_store.startswith("Sub-topology: 0 for global store (will not generate tasks)\n")
    # The same two sub-topologies, the stream's first, numbered 0 (its tasks are 0_<partition>),
    # then the global store's, numbered 1.
    expected = (
        head
        + "Sub-topology: 0\n"
        + stream
        + "  "
        + global_store.replace("Sub-topology: 0 for", "Sub-topology: 1 for")
    )
    assert describe(global_table) == expected
