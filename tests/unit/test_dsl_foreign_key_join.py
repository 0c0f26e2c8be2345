"""The foreign-key table-table join (KIP-213) on the ``TopologyTestDriver``: the scenarios of
Kafka's ``KTableKTableForeignKeyJoinIntegrationTest`` (inner and left, with and without a
materialized result), ``KTableKTableForeignKeyJoinScenarioTest`` and the wire formats of
``SubscriptionWrapperSerdeTest`` / ``SubscriptionResponseWrapperSerdeTest``, with the outputs
Kafka asserts (checked against Java's TopologyTestDriver 4.4 by
``tests/integration/test_dsl_fk_join_app.py``).

The program is Kafka's test topology: String tables ``left_table`` (values ``<text>|<fk>``)
and ``right_table``, the foreign key ``value.split("|")[1]``, the joiner ``(a, b) -> "(" + a +
"," + b + ")"``, the result's cache disabled (Kafka's test disables it too: the cache would
hide some of the tombstones asserted) and written to ``output-topic``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from streamstate.dsl import Materialized, StreamsBuilder
from streamstate.dsl.subscription import (
    DELETE_KEY_AND_PROPAGATE,
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE,
    ResponseDeserializer,
    ResponseSerializer,
    SubscriptionDeserializer,
    SubscriptionResponseWrapper,
    SubscriptionSerializer,
    SubscriptionWrapper,
    combined_key,
    murmur3_128,
    split_combined_key,
)
from streamstate.errors import TopologyError
from streamstate.serde import Serdes, StringDeserializer, StringSerializer
from streamstate.testing import TopologyTestDriver

S = Serdes.String()


def fk(value: str) -> str:
    return value.split("|")[1]


def joiner(left: Any, right: Any) -> str:
    """Kafka's test joiner; Java prints ``None`` as ``null``."""
    return f"({_java(left)},{_java(right)})"


def _java(value: Any) -> str:
    return "null" if value is None else str(value)


def program(*, left: bool, store: bool, extractor: Any = fk) -> StreamsBuilder:
    """Kafka's ``getTopology`` (no rejoin, no versioning)."""
    builder = StreamsBuilder()
    lhs = builder.table("left_table", key_serde=S, value_serde=S)
    rhs = builder.table("right_table", key_serde=S, value_serde=S)
    mat = Materialized("store" if store else None, value_serde=S, caching=False)
    join = lhs.left_join if left else lhs.join
    join(rhs, extractor, joiner, materialized=mat).to_stream().to(
        "output-topic", key_serde=S, value_serde=S
    )
    return builder


class Run:
    """A driver over :func:`program` with its topics."""

    def __init__(self, driver: TopologyTestDriver, store: bool) -> None:
        self.driver = driver
        self.left = driver.create_input_topic("left_table", StringSerializer(), StringSerializer())
        self.right = driver.create_input_topic(
            "right_table", StringSerializer(), StringSerializer()
        )
        self.output = driver.create_output_topic(
            "output-topic", StringDeserializer(), StringDeserializer()
        )
        self.has_store = store

    def read(self) -> dict[str, Any]:
        """Java's ``readKeyValuesToMap``: the latest value per key, a tombstone kept as
        ``None``."""
        return self.output.read_key_values_to_map()

    def store(self) -> dict[str, Any] | None:
        """The materialized result (``None`` when the program keeps none)."""
        if not self.has_store:
            return None
        return dict(self.driver.get_key_value_store("store").all())

    def check(self, expected_output: dict[str, Any], expected_store: dict[str, Any]) -> None:
        assert self.read() == expected_output
        if self.has_store:
            assert self.store() == expected_store


@pytest.fixture(params=[(lj, st) for lj in (True, False) for st in (True, False)], ids=str)
def run(request: pytest.FixtureRequest) -> Iterator[tuple[Run, bool]]:
    left_join, store = request.param
    with TopologyTestDriver(program(left=left_join, store=store).build()) as driver:
        yield Run(driver, store), left_join


T = 1_000


def test_do_join_from_left_then_delete_left_entity(run: tuple[Run, bool]) -> None:
    r, _left = run
    r.right.pipe_input("rhs1", "rhsValue1", T)
    r.right.pipe_input("rhs2", "rhsValue2", T + 1)
    r.right.pipe_input("rhs3", "rhsValue3", T + 2)  # never referenced
    r.check({}, {})
    r.left.pipe_input("lhs1", "lhsValue1|rhs1", T + 3)
    r.left.pipe_input("lhs2", "lhsValue2|rhs2", T + 4)
    both = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
    r.check(both, both)
    r.left.pipe_input("lhs3", "lhsValue3|rhs1", T + 5)
    r.check({"lhs3": "(lhsValue3|rhs1,rhsValue1)"}, {**both, "lhs3": "(lhsValue3|rhs1,rhsValue1)"})
    r.left.pipe_input("lhs1", None, T + 6)
    r.check(
        {"lhs1": None},
        {"lhs2": "(lhsValue2|rhs2,rhsValue2)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"},
    )


def test_do_join_from_right_then_delete_right_entity(run: tuple[Run, bool]) -> None:
    r, left = run
    r.left.pipe_input("lhs1", "lhsValue1|rhs1", T)
    r.left.pipe_input("lhs2", "lhsValue2|rhs2", T + 1)
    r.left.pipe_input("lhs3", "lhsValue3|rhs1", T + 2)
    half = {
        "lhs1": "(lhsValue1|rhs1,null)",
        "lhs2": "(lhsValue2|rhs2,null)",
        "lhs3": "(lhsValue3|rhs1,null)",
    }
    r.check(half if left else {}, half if left else {})
    r.right.pipe_input("rhs1", "rhsValue1", T + 3)
    one = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"}
    r.check(one, {**one, "lhs2": "(lhsValue2|rhs2,null)"} if left else one)
    r.right.pipe_input("rhs2", "rhsValue2", T + 4)
    full = {**one, "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
    r.check({"lhs2": "(lhsValue2|rhs2,rhsValue2)"}, full)
    r.right.pipe_input("rhs3", "rhsValue3", T + 5)  # never referenced
    r.check({}, full)
    r.right.pipe_input("rhs1", None, T + 6)
    if left:
        deleted = {"lhs1": "(lhsValue1|rhs1,null)", "lhs3": "(lhsValue3|rhs1,null)"}
        r.check(deleted, {**deleted, "lhs2": "(lhsValue2|rhs2,rhsValue2)"})
    else:
        r.check({"lhs1": None, "lhs3": None}, {"lhs2": "(lhsValue2|rhs2,rhsValue2)"})


def test_should_emit_tombstone_when_deleting_non_joining_records(run: tuple[Run, bool]) -> None:
    r, left = run
    r.left.pipe_input("lhs1", "lhsValue1|rhs1", T)
    expected = {"lhs1": "(lhsValue1|rhs1,null)"} if left else {}
    r.check(expected, expected)
    # An unnecessary tombstone for the inner join: whether a result was emitted is unknown.
    r.left.pipe_input("lhs1", None, T + 1)
    r.check({"lhs1": None}, {})
    r.left.pipe_input("lhs1", None, T + 2)  # deleting again is idempotent
    r.check({}, {})


def test_should_not_emit_tombstones_when_deleting_non_existing_records(
    run: tuple[Run, bool],
) -> None:
    r, _left = run
    r.left.pipe_input("lhs1", None, T)
    r.check({}, {})


def test_join_should_produce_nulls_when_value_has_non_matching_foreign_key(
    run: tuple[Run, bool],
) -> None:
    r, left = run
    r.left.pipe_input("lhs1", "lhsValue1|rhs1", T)
    r.check(
        {"lhs1": "(lhsValue1|rhs1,null)"} if left else {},
        {"lhs1": "(lhsValue1|rhs1,null)"} if left else {},
    )
    for ts, target in ((T + 1, "rhs2"), (T + 2, "rhs3")):
        r.left.pipe_input("lhs1", f"lhsValue1|{target}", ts)
        value = f"(lhsValue1|{target},null)"
        r.check({"lhs1": value if left else None}, {"lhs1": value} if left else {})
    r.right.pipe_input("rhs1", "rhsValue1", T + 3)  # no longer referenced
    r.check({}, {"lhs1": "(lhsValue1|rhs3,null)"} if left else {})
    r.left.pipe_input("lhs1", "lhsValue1|rhs1", T + 4)
    joined = {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
    r.check(joined, joined)
    r.left.pipe_input("lhs1", "lhsValue1|rhs2", T + 5)
    r.check(
        {"lhs1": "(lhsValue1|rhs2,null)" if left else None},
        {"lhs1": "(lhsValue1|rhs2,null)"} if left else {},
    )


def test_should_unsubscribe_old_foreign_key_if_left_side_is_updated(
    run: tuple[Run, bool],
) -> None:
    r, _left = run
    r.right.pipe_input("rhs1", "rhsValue1", T)
    r.right.pipe_input("rhs2", "rhsValue2", T + 1)
    r.check({}, {})
    r.left.pipe_input("lhs1", "lhsValue1|rhs1", T + 2)
    r.check({"lhs1": "(lhsValue1|rhs1,rhsValue1)"}, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"})
    r.left.pipe_input("lhs1", "lhsValue1|rhs2", T + 3)
    r.check({"lhs1": "(lhsValue1|rhs2,rhsValue2)"}, {"lhs1": "(lhsValue1|rhs2,rhsValue2)"})
    r.right.pipe_input("rhs1", "rhsValue1Delta", T + 4)  # the old foreign key: no output
    r.check({}, {"lhs1": "(lhsValue1|rhs2,rhsValue2)"})


@pytest.mark.parametrize("store", [True, False])
def test_should_emit_record_on_null_foreign_key_for_left_joins(store: bool) -> None:
    builder = program(left=True, store=store, extractor=lambda _value: None)
    with TopologyTestDriver(builder.build()) as driver:
        r = Run(driver, store)
        r.left.pipe_input("lhs1", "lhsValue1|rhs1", T)
        r.check({"lhs1": "(lhsValue1|rhs1,null)"}, {"lhs1": "(lhsValue1|rhs1,null)"})


def _returning_null(value: str) -> str | None:
    key = value.split("|")[1]
    return None if key == "returnNull" else key


@pytest.mark.parametrize("store", [True, False])
def test_should_emit_record_when_old_and_new_fk_differ(store: bool) -> None:
    builder = program(left=True, store=store, extractor=_returning_null)
    with TopologyTestDriver(builder.build()) as driver:
        r = Run(driver, store)
        subscriptions = driver.get_key_value_store(
            "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010"
        )
        key = combined_key(b"rhs1", b"lhs1")
        r.left.pipe_input("lhs1", "lhsValue1|rhs1", T)
        r.check({"lhs1": "(lhsValue1|rhs1,null)"}, {"lhs1": "(lhsValue1|rhs1,null)"})
        found = subscriptions.get(key)
        assert found is not None
        assert found.primary_key == "lhs1"
        assert found.instruction == PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE
        r.left.pipe_input("lhs1", "lhsValue1|returnNull", T)
        r.check({"lhs1": "(lhsValue1|returnNull,null)"}, {"lhs1": "(lhsValue1|returnNull,null)"})
        assert subscriptions.get(key) is None


def test_inner_join_drops_and_counts_a_null_foreign_key() -> None:
    builder = program(left=False, store=True, extractor=lambda _value: None)
    with TopologyTestDriver(builder.build()) as driver:
        r = Run(driver, True)
        r.left.pipe_input("lhs1", "lhsValue1|rhs1", T)
        r.check({}, {})
        assert driver.metrics()["dropped-records-total"] == 1


def test_result_timestamps_are_the_later_of_both_sides() -> None:
    """Kafka's SubscriptionJoinProcessor: max of the subscription's and the right row's
    timestamps; a right update answers with its own timestamp."""
    with TopologyTestDriver(program(left=False, store=False).build()) as driver:
        r = Run(driver, False)
        r.right.pipe_input("rhs1", "a", 50)
        r.left.pipe_input("lhs1", "x|rhs1", 10)
        r.left.pipe_input("lhs2", "y|rhs1", 70)
        r.right.pipe_input("rhs1", "b", 60)
        assert [(rec.key, rec.value, rec.timestamp) for rec in r.output.read_records_to_list()] == [
            ("lhs1", "(x|rhs1,a)", 50),
            ("lhs2", "(y|rhs1,a)", 70),
            ("lhs1", "(x|rhs1,b)", 60),
            ("lhs2", "(y|rhs1,b)", 60),
        ]


def test_stale_responses_are_dropped() -> None:
    """A response to a row that changed before it came back is dropped (the hash differs):
    with a foreign key changed twice while the first subscription is answered, only the
    latest value's result is emitted. The driver answers each subscription before the next
    input, so the staleness is made here by changing the row behind the join's back: the
    response to ``lhs1``'s first subscription is checked against its current value."""
    builder = StreamsBuilder()
    lhs = builder.table("left_table", key_serde=S, value_serde=S, materialized="left-store")
    rhs = builder.table("right_table", key_serde=S, value_serde=S)
    lhs.join(rhs, fk, joiner).to_stream().to("output-topic", key_serde=S, value_serde=S)
    with TopologyTestDriver(builder.build()) as driver:
        r = Run(driver, False)
        r.right.pipe_input("rhs1", "rhsValue1", T)
        r.left.pipe_input("lhs1", "lhsValue1|rhs1", T + 1)
        assert r.read() == {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
        logs = driver._producer._logs  # the response topic as the join wrote it
        response_topic = next(t for t in logs if "SUBSCRIPTION-RESPONSE" in t)
        answered = logs[response_topic][-1]
        # The same response again, after the row changed to a foreign key without a match.
        r.left.pipe_input("lhs1", "lhsValue2|rhs9", T + 2)
        assert r.read() == {"lhs1": None}
        dropped = driver.metrics()["dropped-records-total"]
        responses = driver.create_input_topic(
            response_topic, Serdes.Bytes().serializer, Serdes.Bytes().serializer
        )
        responses.pipe_input(answered.key(), answered.value(), T + 3)
        assert r.read() == {}
        assert driver.metrics()["dropped-records-total"] == dropped + 1


def test_extractor_with_key() -> None:
    builder = StreamsBuilder()
    lhs = builder.table("left_table", key_serde=S, value_serde=S)
    rhs = builder.table("right_table", key_serde=S, value_serde=S)
    lhs.join(rhs, lambda k, v: f"{k}-{v}", joiner, extractor_with_key=True).to_stream().to(
        "output-topic", key_serde=S, value_serde=S
    )
    with TopologyTestDriver(builder.build()) as driver:
        r = Run(driver, False)
        r.right.pipe_input("a-1", "one", T)
        r.left.pipe_input("a", "1", T)
        r.left.pipe_input("b", "1", T)
        assert r.read() == {"a": "(1,one)"}


def test_derived_tables_are_read_through_their_parents() -> None:
    """A filtered left table and a mapped right table have no stores: the join reads their
    parents' and computes (Kafka's value getters)."""
    builder = StreamsBuilder()
    lhs = builder.table("left_table", key_serde=S, value_serde=S).filter(
        lambda _k, v: not v.startswith("skip")
    )
    rhs = builder.table("right_table", key_serde=S, value_serde=S).map_values(str.upper)
    lhs.left_join(rhs, fk, joiner).to_stream().to("output-topic", key_serde=S, value_serde=S)
    # map_values's store serde (its table keeps none here, but asks for one) is the default.
    with TopologyTestDriver(builder.build(), {"default.value.serde": S}) as driver:
        r = Run(driver, False)
        r.right.pipe_input("rhs1", "value", T)
        r.left.pipe_input("lhs1", "a|rhs1", T)
        r.left.pipe_input("lhs2", "skip|rhs1", T)
        assert r.read() == {"lhs1": "(a|rhs1,VALUE)"}
        r.left.pipe_input("lhs1", "skip|rhs1", T)  # leaves the filter: its result goes
        assert r.read() == {"lhs1": None}
        r.right.pipe_input("rhs1", "other", T)
        assert r.read() == {}


def test_a_chained_join_materializes_the_first_result() -> None:
    """A second foreign-key join reads the first one's result: its store
    ``KTABLE-FK-JOIN-OUTPUT-STATE-STORE-...`` is then kept, as Kafka keeps it."""
    builder = StreamsBuilder()
    lhs = builder.table("left_table", key_serde=S, value_serde=S)
    rhs = builder.table("right_table", key_serde=S, value_serde=S)
    first = lhs.join(rhs, fk, lambda a, b: f"{a}|{b}", materialized=Materialized(value_serde=S))
    third = builder.table("third", key_serde=S, value_serde=S)
    first.join(third, lambda v: v.split("|")[2], joiner).to_stream().to(
        "output-topic", key_serde=S, value_serde=S
    )
    topology = builder.build()
    assert "KTABLE-FK-JOIN-OUTPUT-STATE-STORE-0000000019" in topology.stores
    with TopologyTestDriver(topology) as driver:
        r = Run(driver, False)
        thirds = driver.create_input_topic("third", StringSerializer(), StringSerializer())
        thirds.pipe_input("t1", "T", T)
        r.right.pipe_input("rhs1", "t1", T)
        r.left.pipe_input("lhs1", "x|rhs1", T)
        assert r.read() == {"lhs1": "(x|rhs1|t1,T)"}


def test_errors_name_the_operation() -> None:
    builder = StreamsBuilder()
    lhs = builder.table("left_table", key_serde=S, value_serde=S)
    rhs = builder.table("right_table", key_serde=S, value_serde=S)
    with pytest.raises(TopologyError, match=r"KTable\.outer_join"):
        lhs.outer_join(rhs, fk, joiner)
    with pytest.raises(TopologyError, match=r"KTable\.join"):
        lhs.join(rhs, fk, joiner, name="a/b")
    with pytest.raises(TopologyError, match="not partitioner"):
        lhs.join(rhs, fk, joiner, partitioner=None)


# -- the wire formats (Kafka's SubscriptionWrapperSerdeTest, ...) ------------------------------


def test_murmur3_128_is_kafkas() -> None:
    """Values of Kafka's ``Murmur3.hash128`` (org.apache.kafka.streams.state.internals), run
    in Java 4.4 on the same bytes."""
    assert murmur3_128(b"") == (-7122613646888064702, -8341524471658347240)
    assert murmur3_128(b"lhsValue1|rhs1") == (8349360643402949907, 2926358176406646415)
    assert murmur3_128(bytes(range(40))) == (1428028051331091381, -2327490960292095604)
    # 26 bytes: a tail of 10 (both tail words), the last byte >= 0x80 (no sign extension).
    assert murmur3_128(b"abcdefghijklmnopqrstuvwxy\xff") == (
        6187066326987959619,
        5485419640724138521,
    )


def test_subscription_wrapper_round_trip_and_layout() -> None:
    ser = SubscriptionSerializer(StringSerializer(), "t-pk")
    de = SubscriptionDeserializer(StringDeserializer(), "t-pk")
    wrapper = SubscriptionWrapper((1, -2), DELETE_KEY_AND_PROPAGATE, "pk", 7)
    raw = ser.serialize("t", wrapper)
    assert raw == (
        b"\x01\x01" + (1).to_bytes(8, "big") + (-2).to_bytes(8, "big", signed=True) + b"pk"
        b"\x00\x00\x00\x07"
    )
    assert de.deserialize("t", raw) == wrapper
    no_hash = SubscriptionWrapper(None, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, "pk", 0)
    raw = ser.serialize("t", no_hash)
    assert raw is not None
    assert raw[0] == 0x81
    assert de.deserialize("t", raw) == no_hash
    # Version 0 (Kafka before 3.5): no partition.
    assert de.deserialize("t", b"\x80\x02pk") == SubscriptionWrapper(
        None, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, "pk", None, 0
    )


def test_response_wrapper_round_trip() -> None:
    ser = ResponseSerializer(StringSerializer())
    de = ResponseDeserializer(StringDeserializer())
    with_value = SubscriptionResponseWrapper((3, 4), "value", 2)
    raw = ser.serialize("t", with_value)
    assert raw == b"\x00" + (3).to_bytes(8, "big") + (4).to_bytes(8, "big") + b"value"
    assert de.deserialize("t", raw) == SubscriptionResponseWrapper((3, 4), "value", None)
    assert de.deserialize("t", ser.serialize("t", SubscriptionResponseWrapper(None, None))) == (
        SubscriptionResponseWrapper(None, None)
    )


def test_combined_key() -> None:
    key = combined_key(b"fk", b"pk")
    assert key == b"\x00\x00\x00\x02fkpk"
    assert split_combined_key(key) == (b"fk", b"pk")
    assert key.startswith(combined_key(b"fk"))
    assert not combined_key(b"fkp").startswith(combined_key(b"fk"))


# -- Kafka's KTableKTableForeignKeyJoinScenarioTest ----------------------------------------------


class _Recording:
    """A serializer or deserializer that records the topic names it is called with (Kafka's
    ``UniqueTopicSerdeScope``)."""

    def __init__(self, inner: Any, topics: set[str], role: str) -> None:
        self.inner = inner
        self.topics = topics
        self.role = role

    def serialize(self, topic: str | None, obj: Any) -> Any:
        self.topics.add(f"{topic}--{self.role}")
        return self.inner.serialize(topic, obj)

    def deserialize(self, topic: str | None, data: Any) -> Any:
        self.topics.add(f"{topic}--{self.role}")
        return self.inner.deserialize(topic, data)


def _recording(serde: Any, topics: set[str], role: str) -> Any:
    return type(serde)(
        _Recording(serde.serializer, topics, role), _Recording(serde.deserializer, topics, role)
    )


def test_should_use_expected_topics_with_serde() -> None:
    """The pseudo topics the join's serdes see are Kafka's: ``<app>-<subscription topic>-fk``
    (foreign keys), ``-pk`` (primary keys), ``-vh`` (the hashed left values), and the two
    internal topics themselves (the subscription topic's value is the wrapper, whose primary
    key is serialized for ``-pk``)."""
    topics: set[str] = set()
    builder = StreamsBuilder()
    key, value = _recording(Serdes.Integer(), topics, "key"), _recording(S, topics, "value")
    lhs = builder.table("left_table", key_serde=key, value_serde=value)
    rhs = builder.table("right_table", key_serde=key, value_serde=value)
    lhs.join(
        rhs,
        lambda v: int(v.split("|")[1]),
        joiner,
        materialized=Materialized(value_serde=value),
    ).to_stream().to("output-topic")
    app = "ktable-ktable-joinOnForeignKey"
    config = {"application.id": app, "default.key.serde": key, "default.value.serde": value}
    with TopologyTestDriver(builder.build(), config) as driver:
        ints = Serdes.Integer().serializer
        driver.create_input_topic("left_table", ints, StringSerializer()).pipe_input(
            2, "lhsValue1|1"
        )
        driver.create_input_topic("right_table", ints, StringSerializer()).pipe_input(
            1, "rhsValue1"
        )
    registration = f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic"
    response = f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic"
    assert {t for t in topics if "FK-JOIN" in t} == {
        f"{registration}-fk--key",
        f"{registration}-pk--key",
        f"{registration}-vh--value",
        f"{registration}--key",
        f"{response}--key",
        f"{response}--value",
    }


def test_should_work_with_default_serdes() -> None:
    """An FK join of tables with the default serdes, materialized, then joined again on the
    primary key with the left table."""
    builder = StreamsBuilder()
    a = builder.table("A")
    b = builder.table("B")
    fk_result = a.join(
        b, lambda v: int(v.split("-")[0]), lambda x, y: f"({x},{y})", materialized="asdf"
    )
    a.join(fk_result, lambda x, y: f"({x},{y})").to_stream().to("output")
    config = {"default.key.serde": Serdes.Integer(), "default.value.serde": S}
    with TopologyTestDriver(builder.build(), config) as driver:
        ints = Serdes.Integer()
        driver.create_input_topic("A", ints.serializer, StringSerializer()).pipe_input(
            1, "999-alpha"
        )
        driver.create_input_topic("B", ints.serializer, StringSerializer()).pipe_input(999, "beta")
        output = driver.create_output_topic("output", ints.deserializer, StringDeserializer())
        assert output.read_key_values_to_map() == {1: "(999-alpha,(999-alpha,beta))"}


def test_a_suppressed_result_emits_each_rows_latest_once_the_time_limit_passed() -> None:
    """A suppression after the join (``until_time_limit``) holds each row's results back and
    emits its latest once stream time is ``wait`` past its first one."""
    from streamstate.dsl import BufferConfig, Suppressed  # noqa: PLC0415

    builder = StreamsBuilder()
    lhs = builder.table("left_table", key_serde=S, value_serde=S)
    rhs = builder.table("right_table", key_serde=S, value_serde=S)
    joined = lhs.join(rhs, fk, joiner, materialized=Materialized(value_serde=S))
    joined.suppress(Suppressed.until_time_limit(100, BufferConfig.unbounded())).to_stream().to(
        "output-topic", key_serde=S, value_serde=S
    )
    with TopologyTestDriver(builder.build()) as driver:
        r = Run(driver, False)
        r.right.pipe_input("rhs1", "a", 0)
        r.left.pipe_input("lhs1", "x|rhs1", 10)
        r.right.pipe_input("rhs1", "b", 20)
        assert r.read() == {}
        # A right record without subscribers does not move the left task's stream time;
        # a result at 200 does: lhs1's 100 ms have passed (lhs2's have not).
        r.right.pipe_input("rhs9", "z", 300)
        assert r.read() == {}
        r.left.pipe_input("lhs2", "y|rhs1", 200)
        assert r.read() == {"lhs1": "(x|rhs1,b)"}


# -- versioned tables (KIP-914): Kafka's shouldIgnoreOutOfOrderRecordsIffVersioned ----------------


@pytest.mark.parametrize("left_join", [True, False])
@pytest.mark.parametrize("store", [True, False])
@pytest.mark.parametrize("left_versioned", [True, False])
@pytest.mark.parametrize("right_versioned", [True, False])
def test_should_ignore_out_of_order_records_iff_versioned(
    left_join: bool, store: bool, left_versioned: bool, right_versioned: bool
) -> None:
    def versioned(name: str, on: bool) -> Materialized | None:
        return Materialized(name, versioned_retention=300_000) if on else None

    builder = StreamsBuilder()
    lhs = builder.table(
        "left_table", key_serde=S, value_serde=S, materialized=versioned("left", left_versioned)
    )
    rhs = builder.table(
        "right_table", key_serde=S, value_serde=S, materialized=versioned("right", right_versioned)
    )
    mat = Materialized("store" if store else None, value_serde=S, caching=False)
    join = lhs.left_join if left_join else lhs.join
    join(rhs, fk, joiner, materialized=mat).to_stream().to(
        "output-topic", key_serde=S, value_serde=S
    )
    with TopologyTestDriver(builder.build()) as driver:
        r = Run(driver, store)
        r.right.pipe_input("rhs1", "rhsValue1", T + 4)
        r.check({}, {})
        r.left.pipe_input("lhs1", "lhsValue1|rhs1", T + 3)
        r.left.pipe_input("lhs2", "lhsValue2|rhs1", T + 5)
        both = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs1,rhsValue1)"}
        r.check(both, both)
        r.left.pipe_input("lhs2", None, T + 6)
        r.check({"lhs2": None}, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"})
        # Out-of-order left updates change nothing iff the left table is versioned.
        r.left.pipe_input("lhs1", "lhsValue1_ooo|rhs1", T + 2)
        r.left.pipe_input("lhs2", "lhsValue2_ooo|rhs1", T + 2)
        if left_versioned:
            r.check({}, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"})
        else:
            ooo = {
                "lhs1": "(lhsValue1_ooo|rhs1,rhsValue1)",
                "lhs2": "(lhsValue2_ooo|rhs1,rhsValue1)",
            }
            r.check(ooo, ooo)
        r.left.pipe_input("lhs1", None, T + 2)
        if left_versioned:
            r.check({}, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"})
        else:
            r.check({"lhs1": None}, {"lhs2": "(lhsValue2_ooo|rhs1,rhsValue1)"})
        r.left.pipe_input("lhs1", "lhsValue1_new|rhs1", T + 8)
        r.left.pipe_input("lhs2", "lhsValue2_new|rhs1", T + 8)
        new = {"lhs1": "(lhsValue1_new|rhs1,rhsValue1)", "lhs2": "(lhsValue2_new|rhs1,rhsValue1)"}
        r.check(new, new)
        # Out-of-order right updates change nothing iff the right table is versioned.
        r.right.pipe_input("rhs1", "rhsValue1_ooo", T + 1)
        if right_versioned:
            r.check({}, new)
        else:
            ooo = {
                "lhs1": "(lhsValue1_new|rhs1,rhsValue1_ooo)",
                "lhs2": "(lhsValue2_new|rhs1,rhsValue1_ooo)",
            }
            r.check(ooo, ooo)
        r.right.pipe_input("rhs1", None, T + 1)
        if right_versioned:
            r.check({}, new)
        elif left_join:
            nulls = {"lhs1": "(lhsValue1_new|rhs1,null)", "lhs2": "(lhsValue2_new|rhs1,null)"}
            r.check(nulls, nulls)
        else:
            r.check({"lhs1": None, "lhs2": None}, {})
        r.right.pipe_input("rhs1", "rhsValue1_new", T + 6)
        latest = {
            "lhs1": "(lhsValue1_new|rhs1,rhsValue1_new)",
            "lhs2": "(lhsValue2_new|rhs1,rhsValue1_new)",
        }
        r.check(latest, latest)
