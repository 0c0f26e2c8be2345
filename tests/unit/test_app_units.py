"""The runtime's pure parts: state machine, config, topology, commit metadata, query checks."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from streamstate import (
    InvalidStateStorePartitionError,
    StateStoreMigratedError,
    StateStoreNotAvailableError,
    StreamsNotStartedError,
    StreamsRebalancingError,
    UnknownStateStoreError,
)
from streamstate.app import IllegalStateTransitionError, ReadOnlyKeyValueStore, State, Topology
from streamstate.app.config import StreamsConfig
from streamstate.app.context import ProcessorContext, call_processor
from streamstate.app.state import StateMachine
from streamstate.app.task import decode_partition_time, encode_partition_time
from streamstate.app.topology import TopologyError
from streamstate.clients.config import (
    global_consumer_config,
    main_consumer_config,
    producer_config,
    thread_restore_consumer_config,
)
from streamstate.errors import ProcessorStateError, StreamsError
from streamstate.records import NOT_KNOWN
from streamstate.stores import InMemoryKeyValueStore

# Kafka 3.x's legal transitions, with RESTORING among the working states.
LEGAL = {
    (State.CREATED, State.REBALANCING),
    (State.CREATED, State.PENDING_SHUTDOWN),
    (State.REBALANCING, State.RUNNING),
    (State.REBALANCING, State.RESTORING),
    (State.REBALANCING, State.PENDING_SHUTDOWN),
    (State.REBALANCING, State.PENDING_ERROR),
    (State.RUNNING, State.REBALANCING),
    (State.RUNNING, State.RESTORING),
    (State.RUNNING, State.PENDING_SHUTDOWN),
    (State.RUNNING, State.PENDING_ERROR),
    (State.RESTORING, State.RUNNING),
    (State.RESTORING, State.REBALANCING),
    (State.RESTORING, State.PENDING_SHUTDOWN),
    (State.RESTORING, State.PENDING_ERROR),
    (State.PENDING_SHUTDOWN, State.NOT_RUNNING),
    (State.PENDING_ERROR, State.ERROR),
}
PATH_TO = {
    State.CREATED: [],
    State.REBALANCING: [State.REBALANCING],
    State.RUNNING: [State.REBALANCING, State.RUNNING],
    State.RESTORING: [State.REBALANCING, State.RESTORING],
    State.PENDING_SHUTDOWN: [State.PENDING_SHUTDOWN],
    State.NOT_RUNNING: [State.PENDING_SHUTDOWN, State.NOT_RUNNING],
    State.PENDING_ERROR: [State.REBALANCING, State.PENDING_ERROR],
    State.ERROR: [State.REBALANCING, State.PENDING_ERROR, State.ERROR],
}


def machine_in(state: State) -> StateMachine:
    m = StateMachine("test")
    for step in PATH_TO[state]:
        m.transition(step)
    assert m.state is state
    return m


@pytest.mark.parametrize(
    ("old", "new"), [(a, b) for a, b in itertools.product(State, State) if a is not b]
)
def test_every_transition_is_legal_or_raises_exactly_as_kafka(old: State, new: State) -> None:
    m = machine_in(old)
    seen: list[tuple[State, State]] = []
    m.set_listener(lambda n, o: seen.append((o, n)))
    if (old, new) in LEGAL:
        assert m.transition(new) is True
        assert m.state is new
        assert seen == [(old, new)]
    else:
        with pytest.raises(IllegalStateTransitionError, match=f"from {old.value} to {new.value}"):
            m.transition(new)
        assert m.state is old
        assert seen == []


def test_same_state_and_guarded_transitions_change_nothing() -> None:
    m = machine_in(State.RUNNING)
    assert m.transition(State.RUNNING) is False
    assert m.transition(State.ERROR, only_from=frozenset({State.PENDING_ERROR})) is False
    assert m.state is State.RUNNING


def test_a_failing_listener_does_not_stop_the_transition() -> None:
    m = StateMachine("test")
    m.set_listener(lambda n, o: 1 / 0)
    assert m.transition(State.REBALANCING)
    assert m.state is State.REBALANCING


def test_config_reads_kafka_streams_names_and_client_prefixes() -> None:
    c = StreamsConfig.from_mapping(
        {
            "application.id": "app",
            "bootstrap.servers": "h:1",
            "num.stream.threads": 2,
            "commit.interval.ms": 100,
            "max.task.idle.ms": 50,
            "consumer.fetch.min.bytes": 10,
            "global.consumer.fetch.max.bytes": 20,
            "restore.consumer.fetch.max.bytes": 30,
        }
    )
    assert (c.num_stream_threads, c.commit_interval_ms, c.max_task_idle_ms) == (2, 100, 50)
    assert c.overrides["consumer."] == {"fetch.min.bytes": 10}
    assert c.overrides["global.consumer."] == {"fetch.max.bytes": 20}
    assert c.overrides["restore.consumer."] == {"fetch.max.bytes": 30}
    assert c.app_dir().name == "app"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"application.id": "a"}, "bootstrap.servers"),
        ({"application.id": "a", "bootstrap.servers": "h", "comit.interval.ms": 1}, "unknown"),
        ({"application.id": "a", "bootstrap.servers": "h", "processing.guarantee": "x"}, "one of"),
        (
            {
                "application.id": "a",
                "bootstrap.servers": "h",
                "processing.guarantee": "exactly_once",
            },
            "removed in Kafka 4: use exactly_once_v2",
        ),
        (
            {
                "application.id": "a",
                "bootstrap.servers": "h",
                "statestore.uncommitted.max.bytes": -1,
            },
            ">= 0",
        ),
        ({"application.id": "a", "bootstrap.servers": "h", "num.stream.threads": 0}, ">= 1"),
    ],
)
def test_bad_configs_are_refused(bad: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StreamsConfig.from_mapping(bad)


@pytest.mark.parametrize("t", [0, 1, 1_700_000_000_000, 2**62])
def test_partition_time_round_trips_through_commit_metadata(t: int) -> None:
    assert decode_partition_time(encode_partition_time(t)) == t


@pytest.mark.parametrize(
    ("metadata", "partition_time"),
    [
        ("AQAAAAAAAAAB", 1),  # version 1 (Kafka 2.x): the time alone
        ("AgAAAAAAAAAB", 1),  # version 2 (Kafka 3.x), no processor metadata
        ("AgAAAAAAAAAHAAAAAA==", 7),  # version 2 with processor metadata after the time
        # confluent-kafka's committed() may hand back bytes past the end of metadata another
        # client wrote (seen in CI: "AgAAAYvP5WgA.V" for 1,700,000,000,000).
        ("AgAAAYvP5WgA.V", 1_700_000_000_000),
    ],
)
def test_commit_metadata_of_kafka_2_and_3_is_read(metadata: str, partition_time: int) -> None:
    assert decode_partition_time(metadata) == partition_time


def test_commit_metadata_is_written_as_kafka_3_does() -> None:
    assert encode_partition_time(1) == "AgAAAAAAAAAB"


@pytest.mark.parametrize("junk", [None, "", "not base64!", "AAAA", "AwAAAAAAAAAB"])
def test_unreadable_commit_metadata_is_not_known(junk: str | None) -> None:
    assert decode_partition_time(junk) == NOT_KNOWN


def test_topology_refuses_what_cannot_run() -> None:
    t = Topology().add_store("s")
    with pytest.raises(TopologyError, match="already exists"):
        t.add_store("s")
    with pytest.raises(TopologyError, match="plain directory name"):
        t.add_store("a/b")
    with pytest.raises(TopologyError, match="no processor"):
        t.node()
    with pytest.raises(TopologyError, match="not a string"):
        t.processor(sources="topic")  # type: ignore[arg-type]

    @t.processor(sources=["in"], stores=["s", "missing"])
    def p(ctx, record) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(TopologyError, match="'missing', which was never added"):
        t.node()
    with pytest.raises(TopologyError, match="already has a processor"):
        t.processor(sources=["in"])(p)


# --- the KIP-216 mapping, row by row, on the facade alone ------------------------------------


def facade(  # type: ignore[no-untyped-def]
    state: State,
    stores: list[object],
    partition: int | None = None,
    name: str = "s",
    restoring: bool = False,
):
    return ReadOnlyKeyValueStore(
        name,
        partition,
        state=lambda: state,
        known=lambda n: n in ("s", "g"),
        is_global=lambda n: n == "g",
        lookup=lambda n, p: stores,
        restoring=lambda n, p: restoring,
    )


CALLS = (
    lambda f: f.get(b"k"),
    lambda f: list(f.all()),
    lambda f: list(f.range(b"a", b"z")),
    lambda f: f.approximate_num_entries(),
)


@pytest.mark.parametrize("state", list(State))
def test_an_unknown_store_name_is_unknown_in_every_state(state: State) -> None:
    for call in CALLS:
        with pytest.raises(UnknownStateStoreError) as info:
            call(facade(state, [InMemoryKeyValueStore("s")], name="nope"))
        assert info.value.store_name == "nope"


@pytest.mark.parametrize(
    ("state", "error"),
    [
        (State.CREATED, StreamsNotStartedError),
        (State.PENDING_SHUTDOWN, StateStoreNotAvailableError),
        (State.NOT_RUNNING, StateStoreNotAvailableError),
        (State.PENDING_ERROR, StateStoreNotAvailableError),
        (State.ERROR, StateStoreNotAvailableError),
    ],
)
def test_the_client_state_decides_next(state: State, error: type[Exception]) -> None:
    store = InMemoryKeyValueStore("s")
    for call in CALLS:
        with pytest.raises(error) as info:
            call(facade(state, [store]))
        assert info.value.store_name == "s"


@pytest.mark.parametrize("state", [State.REBALANCING, State.RESTORING, State.RUNNING])
def test_running_stores_answer_during_a_rebalance_and_restoring_ones_raise(state: State) -> None:
    store = InMemoryKeyValueStore("s")
    store.put(b"k", b"v")
    assert facade(state, [store]).get(b"k") == b"v"
    assert facade(state, [store], partition=0).approximate_num_entries() == 1
    for call in CALLS:
        with pytest.raises(StreamsRebalancingError, match="being restored"):
            call(facade(state, [store], partition=1, restoring=True))


@pytest.mark.parametrize("state", [State.REBALANCING, State.RESTORING])
def test_a_store_not_here_during_a_rebalance_may_be_moving_here(state: State) -> None:
    with pytest.raises(StreamsRebalancingError, match="may be moving here"):
        facade(state, [], partition=3).get(b"k")
    with pytest.raises(StreamsRebalancingError):
        facade(state, []).get(b"k")


def test_running_rows_unknown_partition_migrated_and_closed() -> None:
    with pytest.raises(UnknownStateStoreError, match="no such store"):
        facade(State.RUNNING, [], name="nope").get(b"k")
    with pytest.raises(InvalidStateStorePartitionError, match="partition 3") as info:
        facade(State.RUNNING, [], partition=3).get(b"k")
    assert info.value.partition == 3
    with pytest.raises(StateStoreMigratedError, match="migrated"):
        facade(State.RUNNING, []).get(b"k")
    with pytest.raises(StateStoreMigratedError):
        facade(State.RUNNING, [], name="g", partition=3).get(b"k")
    closed = InMemoryKeyValueStore("s")
    closed.close()
    with pytest.raises(StateStoreMigratedError, match="migrated"):
        facade(State.RUNNING, [closed]).get(b"k")


def test_reads_merge_every_local_partition_in_key_order() -> None:
    a, b = InMemoryKeyValueStore("s"), InMemoryKeyValueStore("s")
    a.put_all([(b"a", b"1"), (b"c", b"3")])
    b.put_all([(b"b", b"2"), (b"d", b"4")])
    f = facade(State.RUNNING, [a, b])
    assert f.get(b"d") == b"4"
    assert f.get(b"x") is None
    assert list(f.all()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"d", b"4")]
    assert list(f.range(b"b", b"c")) == [(b"b", b"2"), (b"c", b"3")]
    assert f.approximate_num_entries() == 4


def test_a_processor_error_names_the_record_and_a_streams_error_passes_through() -> None:
    record = SimpleNamespace(topic="clicks", partition=2, offset=41, timestamp=7, key=b"k")
    ctx = ProcessorContext(2, {}, frozenset(), None)  # type: ignore[arg-type]
    seen: list[tuple[Any, ...]] = []

    def fails(c: ProcessorContext, r: Any) -> None:
        seen.append((c.topic, c.partition, c.offset, c.timestamp))
        raise ValueError("bad click")

    with pytest.raises(StreamsError) as info:
        call_processor(fails, ctx, record)
    assert seen == [("clicks", 2, 41, 7)]
    assert "ValueError: bad click" in str(info.value)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("clicks", 2, 41)
    assert isinstance(info.value.__cause__, ValueError)

    own = ProcessorStateError("no such store", store_name="x")

    def raises_own(c: ProcessorContext, r: Any) -> None:
        raise own

    with pytest.raises(ProcessorStateError) as passed:
        call_processor(raises_own, ctx, record)
    assert passed.value is own


def test_exactly_once_v2_defaults_and_client_settings() -> None:
    base = {"application.id": "a", "bootstrap.servers": "h"}
    eos = StreamsConfig.from_mapping({**base, "processing.guarantee": "exactly_once_v2"})
    assert eos.exactly_once and eos.commit_interval_ms == 100
    assert eos.statestore_uncommitted_max_bytes == 64 * 1024 * 1024
    explicit = StreamsConfig.from_mapping(
        {**base, "processing.guarantee": "exactly_once_v2", "commit.interval.ms": 2_000}
    )
    assert explicit.commit_interval_ms == 2_000
    alos = StreamsConfig.from_mapping(base)
    assert not alos.exactly_once and alos.commit_interval_ms == 30_000
    for beta in ("exactly_once", "exactly_once_beta"):
        with pytest.raises(ValueError, match="exactly_once_v2"):
            StreamsConfig.from_mapping({**base, "processing.guarantee": beta})

    def consumer(eos: bool, overrides: Any = None) -> dict[str, Any]:
        return main_consumer_config(
            "h",
            group_id="g",
            client_id="c",
            partition_assignment_strategy="range",
            session_timeout_ms=1,
            eos=eos,
            overrides=overrides,
        )

    assert consumer(True)["isolation.level"] == "read_committed"
    assert consumer(False)["isolation.level"] == "read_uncommitted"
    # Rebalances heard of within half a second, never past a third of the session timeout.
    assert consumer(False)["heartbeat.interval.ms"] == 1  # session_timeout_ms=1
    assert (
        main_consumer_config(
            "h",
            group_id="g",
            client_id="c",
            partition_assignment_strategy="range",
            session_timeout_ms=10_000,
        )["heartbeat.interval.ms"]
        == 500
    )
    heartbeat = {"consumer.": {"heartbeat.interval.ms": 3000}}
    assert consumer(False, heartbeat)["heartbeat.interval.ms"] == 3000
    # A user override still wins (one place).
    user = {"consumer.": {"isolation.level": "read_uncommitted"}}
    assert consumer(True, user)["isolation.level"] == "read_uncommitted"
    producer = producer_config("h", client_id="p", transactional_id="a-pid-1")
    assert producer["transactional.id"] == "a-pid-1" and producer["enable.idempotence"]
    assert "transactional.id" not in producer_config("h", client_id="p")
    for make in (thread_restore_consumer_config, global_consumer_config):
        assert make("h", client_id="r", eos=True)["isolation.level"] == "read_committed"
        assert make("h", client_id="r")["isolation.level"] == "read_uncommitted"
