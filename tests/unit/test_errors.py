"""The exception hierarchy of docs/api.md, its attributes, pickling, and Rust's use of it."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

import streamstate
from streamstate import _core, errors

# (class, parent) exactly as docs/api.md draws the tree.
HIERARCHY = [
    ("StreamsError", None),
    ("DeserializationError", "StreamsError"),
    ("InvalidTimestampError", "StreamsError"),
    ("CorruptCheckpointError", "StreamsError"),
    ("ProcessorStateError", "StreamsError"),
    ("TaskCorruptedError", "StreamsError"),
    ("TaskMigratedError", "StreamsError"),
    ("TopologyError", "StreamsError"),
    ("NoSuchElementError", "StreamsError"),
    ("AuthenticationError", "StreamsError"),
    ("SaslAuthenticationError", "AuthenticationError"),
    ("SslAuthenticationError", "AuthenticationError"),
    ("InvalidStateStoreError", "StreamsError"),
    ("StateStoreRetryableError", "InvalidStateStoreError"),
    ("StreamsNotStartedError", "StateStoreRetryableError"),
    ("StreamsRebalancingError", "StateStoreRetryableError"),
    ("StateStoreMigratedError", "InvalidStateStoreError"),
    ("InvalidStateStorePartitionError", "StateStoreMigratedError"),
    ("StateStoreFailError", "InvalidStateStoreError"),
    ("StateStoreNotAvailableError", "StateStoreFailError"),
    ("UnknownStateStoreError", "StateStoreFailError"),
]


@pytest.mark.parametrize(("name", "parent"), HIERARCHY)
def test_hierarchy_matches_the_contract(name: str, parent: str | None) -> None:
    cls = getattr(errors, name)
    assert getattr(streamstate, name) is cls, "exported at top level"
    if parent is None:
        assert cls.__bases__ == (Exception,)
    else:
        assert cls.__bases__[0] is getattr(errors, parent)


def test_every_error_class_is_in_the_contract() -> None:
    defined = {
        name
        for name, obj in vars(errors).items()
        if isinstance(obj, type) and issubclass(obj, errors.StreamsError)
    }
    assert defined == {name for name, _ in HIERARCHY}


@pytest.mark.parametrize("name", ["DeserializationError", "InvalidTimestampError", "TopologyError"])
def test_record_errors_are_value_errors(name: str) -> None:
    assert issubclass(getattr(errors, name), ValueError)


def test_an_empty_test_topic_is_a_lookup_error() -> None:
    assert issubclass(errors.NoSuchElementError, LookupError)


@pytest.mark.parametrize(("name", "_parent"), HIERARCHY)
def test_location_attributes_message_and_pickling(name: str, _parent: str | None) -> None:
    cls = getattr(errors, name)
    err = cls("it broke", topic="orders", partition=3, offset=42, store_name="counts")
    assert (err.topic, err.partition, err.offset, err.store_name) == ("orders", 3, 42, "counts")
    text = str(err)
    for part in ("it broke", "'orders'", "partition 3", "offset 42", "'counts'"):
        assert part in text
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is cls
    assert str(clone) == text
    assert (clone.topic, clone.partition, clone.offset, clone.store_name) == (
        "orders",
        3,
        42,
        "counts",
    )


def test_unknown_location_is_left_out_of_the_message() -> None:
    err = errors.StreamsError("plain")
    assert str(err) == "plain"
    assert err.topic is None and err.offset is None


def test_a_rust_panic_becomes_a_streams_error() -> None:
    with pytest.raises(errors.StreamsError, match=r"internal error.*deliberate"):
        _core._panic_for_test("deliberate")


def test_a_panic_is_catchable_as_exception_and_the_interpreter_survives() -> None:
    caught = None
    try:
        _core._panic_for_test("again")
    except Exception as exc:  # what users write; PyO3's PanicException would escape this
        caught = exc
    assert isinstance(caught, errors.StreamsError)
    assert _core.build_profile() in {"debug", "release"}


def test_rust_raises_the_python_classes_with_the_record_location() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array([b"\x00" * 8, b"\x00" * 8], pa.binary()),
            "value": pa.array([b"\x00" * 8, b"\x01\x02\x03"], pa.binary()),
            "topic": ["orders", "orders"],
            "partition": pa.array([5, 5], pa.int32()),
            "offset": pa.array([100, 101], pa.int64()),
            "timestamp": pa.array([0, 0], pa.int64()),
        }
    )
    with pytest.raises(errors.DeserializationError) as info:
        _core.decode_kafka_batch(batch, "long", "long")
    err = info.value
    assert (err.topic, err.partition, err.offset) == ("orders", 5, 101)
    assert "8 bytes" in str(err)
    assert pickle.loads(pickle.dumps(err)).offset == 101


def test_bad_arguments_raise_value_errors_not_streams_errors() -> None:
    with pytest.raises(ValueError, match="unknown deserializer"):
        _core.decode_column(pa.array([b"x"]), "nope")
