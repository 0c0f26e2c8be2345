"""Processor graphs without a broker: ``Record``, the punctuation queue (Kafka's
``PunctuationQueueTest`` scenarios), the builder's errors (``InternalTopologyBuilderTest``'s),
sub-topologies, repartition sizing and ``describe()``."""

from __future__ import annotations

from typing import Any

import pytest

from streamstate import (
    InMemoryKeyValueStore,
    Processor,
    PunctuationType,
    Record,
    StreamsApp,
    StreamsError,
    TaskId,
    Topology,
    TopologyError,
    serde,
)
from streamstate.app.topology import TopologyError as AppTopologyError
from streamstate.examples.word_count_graph import word_count_topology
from streamstate.processor.processor_topology import ProcessorTopology, _serialize_function
from streamstate.processor.punctuation import PunctuationQueue, PunctuationSchedule
from streamstate.processor.repartition import plan_internal_topics
from streamstate.state.caching import CachingKeyValueStore


class Noop(Processor):
    def process(self, record: Record) -> None:
        pass


# --- Record ---------------------------------------------------------------------------------


def test_a_record_is_immutable_and_with_methods_copy() -> None:
    record = Record("k", "v", 5, [("h", b"1")])
    assert record.headers == (("h", b"1"),)
    assert record.with_key("k2") == Record("k2", "v", 5, (("h", b"1"),))
    assert record.with_value(None).value is None
    assert record.with_timestamp(9).timestamp == 9
    assert record.with_headers([("a", None)]).headers == (("a", None),)
    assert record == Record("k", "v", 5, (("h", b"1"),))  # the original is unchanged
    with pytest.raises(AttributeError):
        record.key = "other"  # type: ignore[misc]
    with pytest.raises(ValueError, match="negative"):
        record.with_timestamp(-1)
    assert Record("k", "v", 1).headers == ()
    assert Record("k", "v", 1, None).headers == ()
    assert "key='k'" in repr(record)


# --- PunctuationQueue: Kafka's PunctuationQueueTest -------------------------------------------


def fire_times(queue: PunctuationQueue, times: list[int], fired: list[int]) -> list[int]:
    counts = []
    for now in times:
        queue.may_punctuate(now, lambda schedule, t: schedule.callback(t))
        counts.append(len(fired))
    return counts


def test_punctuation_interval() -> None:
    fired: list[int] = []
    queue = PunctuationQueue()
    queue.schedule(PunctuationSchedule("node", 0, 100, fired.append))
    now = -100
    offsets = [0, 99, 100, 199, 200, 1001, 1002, 1100]
    assert fire_times(queue, [now + o for o in offsets], fired) == [0, 0, 1, 1, 2, 3, 3, 4]
    # The callback gets the time it was called at; 300..1000 were missed and fired once.
    assert fired == [0, 100, 901, 1000]


def test_punctuation_interval_custom_alignment() -> None:
    fired: list[int] = []
    queue = PunctuationQueue()
    queue.schedule(PunctuationSchedule("node", 50, 100, fired.append))
    now = 0
    offsets = [0, 49, 50, 149, 150, 1051, 1052, 1150]
    assert fire_times(queue, [now + o for o in offsets], fired) == [0, 0, 1, 1, 2, 3, 3, 4]


def test_punctuation_cancelled_from_its_own_callback() -> None:
    fired: list[int] = []
    queue = PunctuationQueue()
    cancellable = queue.schedule(PunctuationSchedule("node", 0, 100, fired.append))

    def punctuate(schedule: PunctuationSchedule, now: int) -> None:
        schedule.callback(now)
        cancellable.cancel()

    for now in (-100, 0, 100, 901):
        queue.may_punctuate(now, punctuate)
    assert fired == [0]
    assert len(queue) == 0


def test_a_cancelled_schedule_never_fires_and_intervals_must_be_positive() -> None:
    fired: list[int] = []
    queue = PunctuationQueue()
    queue.schedule(PunctuationSchedule("a", 0, 10, fired.append)).cancel()
    assert not queue.may_punctuate(1_000, lambda s, t: s.callback(t))
    assert fired == []
    with pytest.raises(ValueError, match="at least 1 ms"):
        PunctuationSchedule("a", 0, 0, fired.append)


# --- the builder's errors (Kafka's InternalTopologyBuilderTest) -------------------------------


def test_topology_error_is_a_streams_error_and_a_value_error_at_its_old_path() -> None:
    assert AppTopologyError is TopologyError
    assert issubclass(TopologyError, StreamsError)
    assert issubclass(TopologyError, ValueError)


def test_a_node_naming_itself_as_parent_is_a_cycle() -> None:
    t = Topology().add_source("src", "in")
    with pytest.raises(TopologyError, match="a cycle: 'p' cannot be its own parent"):
        t.add_processor("p", Noop, "p")
    with pytest.raises(TopologyError, match="a cycle: 'snk' cannot be its own parent"):
        t.add_sink("snk", "out", "snk")


def test_an_unknown_parent_is_refused() -> None:
    t = Topology().add_source("src", "in")
    with pytest.raises(TopologyError, match="unknown parent 'nope' of 'p'"):
        t.add_processor("p", Noop, "src", "nope")
    with pytest.raises(TopologyError, match="unknown parent 'nope' of 'snk'"):
        t.add_sink("snk", "out", "nope")
    with pytest.raises(TopologyError, match="unknown parent 'nope'"):
        t.add_repartition("r", "nope")
    assert list(t.graph().nodes) == ["src"]  # a refused call adds nothing


def test_duplicate_names_missing_parents_and_sinks_as_parents_are_refused() -> None:
    t = Topology().add_source("src", "in")
    with pytest.raises(TopologyError, match="'src' is already added"):
        t.add_source("src", "other")
    with pytest.raises(TopologyError, match="already read by source 'src'"):
        t.add_source("src2", "in")
    with pytest.raises(TopologyError, match="at least one topic"):
        t.add_source("empty")
    with pytest.raises(TopologyError, match="at least one parent"):
        t.add_processor("p", Noop)
    with pytest.raises(TopologyError, match="factory must be"):
        t.add_processor("p", 42, "src")
    t.add_sink("snk", "out", "src")
    with pytest.raises(TopologyError, match="sink 'snk' cannot be a parent"):
        t.add_processor("p", Noop, "snk")
    with pytest.raises(TopologyError, match="partitions must be >= 1"):
        t.add_repartition("r", "src", partitions=0)


def test_a_store_connected_to_no_processor_is_refused_at_build() -> None:
    t = Topology().add_source("src", "in").add_processor("p", Noop, "src")
    t.add_store("lonely")
    with pytest.raises(TopologyError, match="store 'lonely' is connected to no processor"):
        t.validate()
    with pytest.raises(TopologyError, match="store 'lonely'"):
        StreamsApp(t, {"application.id": "a", "bootstrap.servers": "127.0.0.1:1"})


def test_stores_connect_to_existing_processors_only() -> None:
    t = Topology().add_source("src", "in").add_processor("p", Noop, "src")
    with pytest.raises(TopologyError, match="processor 'later' is not added yet"):
        t.add_store("s", "later")
    with pytest.raises(TopologyError, match="'src' is a SourceNode, only processors use stores"):
        t.add_store("s2", "src")


def test_one_function_and_a_graph_do_not_mix() -> None:
    t = Topology().add_source("src", "in").add_processor("p", Noop, "src")

    @t.processor(sources=["other"])
    def fn(ctx, record) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(TopologyError, match="not both"):
        t.validate()


def test_a_source_topic_that_is_also_a_global_store_topic_is_refused() -> None:
    t = Topology().add_source("src", "in").add_processor("p", Noop, "src")
    t.add_global_store("g", topic="in")
    with pytest.raises(TopologyError, match="both a source and a global store topic"):
        t.validate()


# --- sub-topologies, task ids, internal topics -------------------------------------------------


def test_a_repartition_splits_the_graph_and_shared_stores_join_it() -> None:
    t = word_count_topology("text", "out")
    graph = t.graph()
    assert [s.nodes for s in graph.subtopologies] == [
        ("lines", "split", "words-repartition-sink"),
        ("words", "count", "counts-sink"),
    ]
    assert graph.subtopologies[1].stores == ("counts",)
    bound = t.bind("wc")
    assert bound.source_topics == ("text", "wc-words-repartition")
    assert t.source_topics == ("text", "words-repartition")
    assert bound.task_id("wc-words-repartition", 3) == TaskId(1, 3)
    assert str(bound.task_id("text", 2)) == "0_2"
    assert bound.repartition_topics == frozenset({"wc-words-repartition"})

    # Two branches that share a store are one sub-topology.
    shared = Topology().add_source("a", "ta").add_source("b", "tb")
    shared.add_processor("pa", Noop, "a").add_processor("pb", Noop, "b")
    assert len(shared.graph().subtopologies) == 2
    shared.add_store("s", "pa", "pb")
    assert [s.source_topics for s in shared.graph().subtopologies] == [("ta", "tb")]


def test_repartition_partitions_follow_the_writers_sources_unless_given() -> None:
    graph = word_count_topology("text", "out").graph()
    plan = plan_internal_topics(graph, "wc", {"text": 6, "out": 1})
    assert plan.repartitions == {"wc-words-repartition": 6}
    assert plan.changelogs == {"counts": 6}
    # An existing repartition topic with the right count is kept; a wrong one is an error.
    assert (
        plan_internal_topics(graph, "wc", {"text": 6, "wc-words-repartition": 6}).repartitions == {}
    )
    with pytest.raises(TopologyError, match="exists with 2 partitions, but the topology needs 6"):
        plan_internal_topics(graph, "wc", {"text": 6, "wc-words-repartition": 2})

    given = Topology().add_source("s", "text").add_processor("p", Noop, "s")
    given.add_repartition("r", "p", partitions=3).add_processor("q", Noop, "r")
    given.add_store("st", "q")
    plan = plan_internal_topics(given.graph(), "x", {"text": 8})
    assert plan.repartitions == {"x-r-repartition": 3}
    assert plan.changelogs == {"st": 3}


def test_sources_of_one_subtopology_must_be_co_partitioned() -> None:
    t = Topology().add_source("a", "left").add_source("b", "right")
    t.add_processor("join", Noop, "a", "b")
    with pytest.raises(TopologyError, match=r"sub-topology 0 are not co-partitioned \(left: 2, "):
        plan_internal_topics(t.graph(), "x", {"left": 2, "right": 3})
    assert plan_internal_topics(t.graph(), "x", {"left": 3, "right": 3}).changelogs == {}


# --- describe() --------------------------------------------------------------------------------

TWO_SUBTOPOLOGIES = """\
Topologies:
   Sub-topology: 0
    Source: lines (topics: [text])
      --> split
    Processor: split (stores: [])
      --> words-repartition-sink
      <-- lines
    Sink: words-repartition-sink (topic: words-repartition)
      <-- split

  Sub-topology: 1
    Source: words (topics: [words-repartition])
      --> count
    Processor: count (stores: [counts])
      --> counts-sink
      <-- words
    Sink: counts-sink (topic: out)
      <-- count

"""


def test_describe_prints_two_subtopologies_like_kafka() -> None:
    description = word_count_topology("text", "out").describe()
    assert str(description) == TWO_SUBTOPOLOGIES
    assert [s.id for s in description.subtopologies] == [0, 1]
    count = description.subtopologies[1].nodes[1]
    assert (count.kind, count.stores, count.predecessors) == ("Processor", ("counts",), ("words",))


def test_describe_orders_nodes_by_subtree_size_then_name_and_lists_global_stores() -> None:
    t = Topology().add_source("src", "in")
    t.add_processor("router", Noop, "src")
    t.add_sink("z-odd", "odd", "router").add_sink("a-even", "even", "router")
    t.add_global_store("users", topic="users")
    assert str(t.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: src (topics: [in])\n"
        "      --> router\n"
        "    Processor: router (stores: [])\n"
        "      --> a-even, z-odd\n"
        "      <-- src\n"
        "    Sink: a-even (topic: even)\n"
        "      <-- router\n"
        "    Sink: z-odd (topic: odd)\n"
        "      <-- router\n"
        "\n"
        "  Sub-topology: 1 for global store (will not generate tasks)\n"
        "    Source: users-source (topics: [users])\n"
        "      --> users-processor\n"
        "    Processor: users-processor (stores: [users])\n"
        "      --> none\n"
        "      <-- users-source\n"
    )


def test_describe_shows_the_one_function_form_as_one_node() -> None:
    t = Topology().add_store("counts")

    @t.processor(sources=["clicks"], stores=["counts"])
    def count(ctx, record) -> None:  # type: ignore[no-untyped-def]
        pass

    assert str(t.describe()).splitlines()[1:6] == [
        "   Sub-topology: 0",
        "    Source: count-source (topics: [clicks])",
        "      --> count",
        "    Processor: count (stores: [counts])",
        "      --> none",
    ]


def test_punctuation_type_names() -> None:
    assert [t.name for t in PunctuationType] == ["STREAM_TIME", "WALL_CLOCK_TIME"]


def test_the_sink_fast_path_serializes_as_the_serializer_does() -> None:
    cases: list[tuple[Any, Any]] = [
        (serde.BytesSerializer(), b"\x00b"),
        (serde.StringSerializer(), "héllo"),
        (serde.StringSerializer("latin-1"), "héllo"),
        (serde.LongSerializer(), -(2**40)),
        (serde.IntegerSerializer(), 7),
        (serde.DoubleSerializer(), 1.5),
        (serde.JsonSerializer(), {"a": [1, 2]}),
    ]
    for serializer, value in cases:
        assert _serialize_function(serializer)("t", value) == serializer.serialize("t", value)
        assert _serialize_function(serializer)("t", None) == serializer.serialize("t", None)
    assert (
        _serialize_function(serde.StringSerializer("latin-1"))
        != serde.StringSerializer("latin-1")._native.serialize
    )

    class Shouting(serde.StringSerializer):
        def serialize(self, topic: str | None, obj: Any) -> bytes | None:
            return super().serialize(topic, obj.upper())

    class Doubled(serde.LongSerializer):
        def serialize(self, topic: str | None, obj: Any) -> bytes | None:
            return super().serialize(topic, obj * 2)

    # A subclass's override is called, not bypassed for the Rust object underneath.
    assert _serialize_function(Shouting())("t", "hi") == b"HI"
    assert _serialize_function(Doubled())("t", 2) == serde.LongSerializer().serialize("t", 4)


# --- punctuation in a task: Kafka's StreamTaskTest wall-clock cases ---------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now

    def sleep(self, ms: int) -> None:
        self.now += ms


class WallClockPunctuated(Processor):
    fired: list[int]

    def init(self, context: Any) -> None:
        self.context = context
        self.fired = []
        context.schedule(10, PunctuationType.WALL_CLOCK_TIME, self.on_time)

    def on_time(self, timestamp: int) -> None:
        assert self.context.record_metadata is None
        self.fired.append(timestamp)

    def process(self, record: Record) -> None:
        pass


def task_topology(clock: Clock, factory: Any = WallClockPunctuated) -> ProcessorTopology:
    topology = Topology().add_source("src", "in").add_processor("p", factory, "src")
    graph = topology.graph()
    return ProcessorTopology(
        graph,
        graph.subtopologies[0],
        TaskId(0, 0),
        "app",
        {},
        {},
        None,  # type: ignore[arg-type]
        lambda: -1,
        lambda err, msg: None,
        clock,
    )


def fired(task: ProcessorTopology) -> list[int]:
    processor = task.processors["p"]
    assert isinstance(processor, WallClockPunctuated)
    return processor.fired


def test_should_punctuate_system_time_when_interval_elapsed() -> None:
    clock = Clock()
    task, now = task_topology(clock), clock.now
    steps = [(10, True), (10, True), (9, False), (1, True), (20, True), (0, False)]
    for sleep, expected in steps:
        clock.sleep(sleep)
        assert task.punctuate_wall_clock() is expected
    assert fired(task) == [now + 10, now + 20, now + 30, now + 50]


def test_should_not_punctuate_system_time_when_interval_not_elapsed() -> None:
    clock = Clock()
    task = task_topology(clock)
    assert not task.punctuate_wall_clock()
    clock.sleep(9)
    assert not task.punctuate_wall_clock()
    assert fired(task) == []


def test_should_punctuate_once_system_time_after_gap() -> None:
    clock = Clock()
    task, now = task_topology(clock), clock.now
    steps = [(100, True), (0, False), (10, True), (12, True), (7, False), (1, True),
             (105, True), (0, False), (5, True), (0, False)]  # fmt: skip
    for sleep, expected in steps:
        clock.sleep(sleep)
        assert task.punctuate_wall_clock() is expected
    # still aligned on the first punctuation: 235, then 240
    assert fired(task) == [now + 100, now + 110, now + 122, now + 130, now + 235, now + 240]


class Exploding(WallClockPunctuated):
    def on_time(self, timestamp: int) -> None:
        raise RuntimeError("KABOOM!")


def test_an_error_in_a_punctuation_names_the_processor_and_the_task() -> None:
    clock = Clock()
    task = task_topology(clock, Exploding)
    clock.sleep(10)
    with pytest.raises(
        StreamsError, match="task 0_0: punctuation of processor 'p' failed: RuntimeError: KABOOM!"
    ):
        task.punctuate_wall_clock()
    assert task.current is None


# --- the record cache ---------------------------------------------------------------------------


def test_a_caching_store_reads_its_writes_and_writes_through_the_latest_value_once() -> None:
    inner = InMemoryKeyValueStore("s")
    written: list[list[tuple[bytes, bytes | None]]] = []

    class Recording:
        name = "s"

        def get(self, key: bytes) -> bytes | None:
            return inner.get(key)

        def put_all(self, pairs: list[tuple[bytes, bytes | None]]) -> None:
            written.append(list(pairs))
            inner.put_all(pairs)

        def all(self) -> Any:
            return inner.all()

        def range(self, a: bytes, b: bytes) -> Any:
            return inner.range(a, b)

        def approximate_num_entries(self) -> int:
            return int(inner.approximate_num_entries())

    inner.put(b"old", b"0")
    cache = CachingKeyValueStore(Recording(), max_entries=3)
    for n in range(1, 6):
        cache.put(b"a", b"%d" % n)
    assert cache.get(b"a") == b"5" and inner.get(b"a") is None  # not written through yet
    assert cache.delete(b"old") == b"0" and cache.get(b"old") is None
    assert inner.get(b"old") == b"0"
    cache.flush_cache()
    assert written == [[(b"a", b"5"), (b"old", None)]]  # the latest value, once per key
    assert inner.get(b"old") is None and inner.get(b"a") == b"5"
    cache.flush_cache()
    assert len(written) == 1  # nothing dirty, nothing written
    # More dirty keys than max_entries write through; scans flush first.
    for key in (b"k1", b"k2", b"k3", b"k4"):
        cache.put(key, b"v")
    assert len(written) == 2
    cache.put(b"k5", b"v")
    assert [k for k, _ in cache.range(b"k1", b"k9")] == [b"k1", b"k2", b"k3", b"k4", b"k5"]
    assert cache.approximate_num_entries() == 6
    with pytest.raises(TypeError, match="keys and values are bytes"):
        cache.put("text", b"v")  # type: ignore[arg-type]
