"""The query endpoint's request parsing, key conversion and configuration (no broker); the
endpoint itself runs against the real broker in ``tests/integration/test_query_server.py``."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import pytest

from streamstate import Serdes, TaskId, TaskMetadata
from streamstate.app.config import StreamsConfig
from streamstate.app.queries import ReadOnlyKeyValueStore
from streamstate.app.query_server import (
    QueryServer,
    _Answer,
    _json_value,
    convert_key,
    parse_request,
)
from streamstate.app.thread_metadata import ThreadMetadata, task_id_of
from streamstate.dsl.stores import StoreSerdes
from streamstate.errors import StreamsError
from streamstate.records import TopicPartition

BASE = {"application.id": "a", "bootstrap.servers": "localhost:1"}


class _Typed:
    """A typed store facade: what convert_key reads of one (its name and serdes)."""

    def __init__(self, key_serde: Any) -> None:
        self.name = "s"
        self.serdes = StoreSerdes("s", key_serde, Serdes.String())


def _bytes_store() -> ReadOnlyKeyValueStore:
    return ReadOnlyKeyValueStore(
        "s",
        None,
        state=lambda: None,  # type: ignore[arg-type,return-value]
        known=lambda _: True,
        is_global=lambda _: False,
        lookup=lambda _n, _p: [],
    )


def test_keys_convert_by_the_store_key_serde() -> None:
    assert convert_key(_Typed(Serdes.String()), "a/b é", from_path=True) == "a/b é"
    assert convert_key(_Typed(Serdes.Long()), "42", from_path=True) == 42
    assert convert_key(_Typed(Serdes.Integer()), 7, from_path=False) == 7
    assert convert_key(_Typed(Serdes.Double()), "1.5", from_path=True) == 1.5
    u = uuid.uuid4()
    assert convert_key(_Typed(Serdes.UUID()), str(u), from_path=True) == u
    assert convert_key(_Typed(Serdes.Bytes()), "k", from_path=True) == b"k"
    assert convert_key(_bytes_store(), "k é", from_path=True) == "k é".encode()
    # Any other serde: the path text is the key's serialized form; a body's value as it is.
    assert convert_key(_Typed(Serdes.Json()), '{"id": 7}', from_path=True) == {"id": 7}
    assert convert_key(_Typed(Serdes.Json()), {"id": 7}, from_path=False) == {"id": 7}
    for serde, bad in (
        (Serdes.Long(), "x"),
        (Serdes.Long(), True),
        (Serdes.String(), 42),
        (Serdes.UUID(), "nope"),
    ):
        with pytest.raises(ValueError):
            convert_key(_Typed(serde), bad, from_path=False)
    with pytest.raises(ValueError):
        convert_key(_bytes_store(), 1, from_path=False)


def test_requests_parse_or_answer_400_and_404() -> None:
    got = parse_request("GET", "/stores/counts/keys/a%2Fb%20%C3%A9?stale=true", b"")
    assert (got.store, got.key, got.from_path, got.stale, got.window) == (
        "counts",
        "a/b é",
        True,
        True,
        None,
    )
    got = parse_request("GET", "/stores/w/keys/k?from=10&to=20", b"")
    assert got.window == (10, 20) and not got.stale
    got = parse_request("POST", "/stores/w/keys", b'{"key": 5, "from": 1, "to": 2, "stale": true}')
    assert (got.key, got.from_path, got.window, got.stale) == (5, False, (1, 2), True)
    for method, path, body in (
        ("GET", "/stores/w/keys/k?from=1", b""),
        ("GET", "/stores/w/keys/k?from=a&to=2", b""),
        ("GET", "/stores/w/keys/k?stale=perhaps", b""),
        ("GET", "/stores//keys/k", b""),
        ("POST", "/stores/w/keys", b"{"),
        ("POST", "/stores/w/keys", b"[1]"),
        ("POST", "/stores/w/keys", b'{"key": 1, "from": true, "to": 2}'),
    ):
        with pytest.raises(_Answer) as caught:
            parse_request(method, path, body)
        assert caught.value.status == 400, (method, path, body)
    with pytest.raises(_Answer) as caught:
        parse_request("GET", "/elsewhere", b"")
    assert caught.value.status == 404


def test_values_answer_as_json() -> None:
    assert _json_value(b"text") == "text"
    assert _json_value(b"\xff\x00") == {"base64": "/wA="}
    assert _json_value({"a": (1, b"x")}) == {"a": [1, "x"]}
    u = uuid.uuid4()
    assert _json_value(u) == str(u)


def test_the_config_turns_it_on_and_needs_application_server() -> None:
    assert not StreamsConfig.from_mapping(BASE).query_server_enabled
    on = StreamsConfig.from_mapping(
        {**BASE, "application.server": "localhost:9", "query.server.enabled": "true"}
    )
    assert on.query_server_enabled and on.query_server_forward_timeout_ms == 5_000
    with pytest.raises(ValueError, match=r"needs application\.server"):
        StreamsConfig.from_mapping({**BASE, "query.server.enabled": True})
    with pytest.raises(ValueError, match=r"query\.server\.forward\.timeout\.ms"):
        StreamsConfig.from_mapping({**BASE, "query.server.forward.timeout.ms": 0})
    with pytest.raises(ValueError, match=r"query\.server\.enabled"):
        StreamsConfig.from_mapping({**BASE, "query.server.enabled": "yes"})


def test_a_taken_port_fails_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("localhost", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = QueryServer(None, f"localhost:{port}", streams_protocol=False)
        with pytest.raises(StreamsError, match=f"application.server=localhost:{port}"):
            server.start()
        server.close()  # nothing to stop: no error


def test_metadata_values_are_frozen_hashable_and_printable() -> None:
    tp = TopicPartition("in", 1)
    task = TaskMetadata(task_id_of(1), frozenset({tp}), {tp: 5}, {tp: 4}, 123)
    same = TaskMetadata(TaskId(0, 1), frozenset({tp}), {tp: 5}, {tp: 4}, 123)
    assert task == same and hash(task) == hash(same)
    assert task != TaskMetadata(TaskId(0, 1), frozenset({tp}), {tp: 6}, {tp: 4}, 123)
    with pytest.raises(TypeError):
        task.committed_offsets[tp] = 9  # type: ignore[index]
    with pytest.raises(AttributeError):
        task.task_id = TaskId(0, 2)  # type: ignore[misc]
    thread = ThreadMetadata(
        "c-StreamThread-1",
        "RUNNING",
        frozenset({task}),
        frozenset(),
        "c-StreamThread-1-consumer",
        "c-StreamThread-1-restore-consumer",
        frozenset({"c-StreamThread-1-producer"}),
        "c-admin",
    )
    assert {thread, thread} == {thread}
    assert "task_id=0_1" in repr(thread) and "time_current_idling_started=123" in repr(thread)
