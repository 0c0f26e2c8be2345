"""The runtime's pure parts: state machine, config, topology, commit metadata, query checks."""

from __future__ import annotations

import itertools

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
from streamstate.app.state import StateMachine
from streamstate.app.task import decode_partition_time, encode_partition_time
from streamstate.app.topology import TopologyError
from streamstate.records import NOT_KNOWN
from streamstate.stores import InMemoryKeyValueStore

# Kafka 3.x's legal transitions, with RESTORING among the working states.
LEGAL = {
    (State.CREATED, State.REBALANCING),
    (State.CREATED, State.PENDING_SHUTDOWN),
    (State.CREATED, State.PENDING_ERROR),
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
    State.PENDING_ERROR: [State.PENDING_ERROR],
    State.ERROR: [State.PENDING_ERROR, State.ERROR],
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
                "processing.guarantee": "exactly_once_v2",
            },
            "not implemented",
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


@pytest.mark.parametrize("junk", [None, "", "not base64!", "AAAA", "AgAAAAAAAAAB"])
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


def facade(state: State, stores: list[object], partition: int | None = None, name: str = "s"):  # type: ignore[no-untyped-def]
    return ReadOnlyKeyValueStore(
        name,
        partition,
        state=lambda: state,
        known=lambda n: n in ("s", "g"),
        is_global=lambda n: n == "g",
        lookup=lambda n, p: stores,
    )


@pytest.mark.parametrize(
    ("state", "error"),
    [
        (State.CREATED, StreamsNotStartedError),
        (State.REBALANCING, StreamsRebalancingError),
        (State.RESTORING, StreamsRebalancingError),
        (State.PENDING_SHUTDOWN, StateStoreNotAvailableError),
        (State.NOT_RUNNING, StateStoreNotAvailableError),
        (State.PENDING_ERROR, StateStoreNotAvailableError),
        (State.ERROR, StateStoreNotAvailableError),
    ],
)
def test_the_client_state_decides_first(state: State, error: type[Exception]) -> None:
    store = InMemoryKeyValueStore("s")
    for call in (
        lambda f: f.get(b"k"),
        lambda f: list(f.all()),
        lambda f: list(f.range(b"a", b"z")),
        lambda f: f.approximate_num_entries(),
    ):
        with pytest.raises(error) as info:
            call(facade(state, [store], name="nope"))
        assert info.value.store_name == "nope"


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
