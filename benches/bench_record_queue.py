"""RecordQueue over confluent-kafka Messages: Rust vs the plain-Python oracle vs the floor.

(a) Long key, 100-byte bytes value, the record's own timestamp.
(b) JSON value (~100 bytes) and ``JsonFieldTimestampExtractor("meta.ts")``.

Every implementation is fed the same list of real ``confluent_kafka.Message`` objects and must
produce the same records. "floor" only reads each message's key, value, timestamp and offset:
no implementation can be faster than that. The plain-Python path is ``tests/oracle.py`` — the
same eager semantics in straightforward Python — reading each Message into a record tuple.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from benches._common import size
from confluent_kafka import Message
from tests import oracle

from streamstate import RecordQueue
from streamstate.serde import BytesDeserializer, JsonDeserializer, LongDeserializer
from streamstate.timestamps import FailOnInvalidTimestamp, JsonFieldTimestampExtractor

N = size(1_000_000)
BASE_TS = 1_700_000_000_000


def messages(values: list[bytes]) -> list[Message]:
    return [
        Message(
            topic="events",
            partition=0,
            offset=i,
            key=struct.pack(">q", i),
            value=v,
            timestamp=(1, BASE_TS + i),
        )
        for i, v in enumerate(values)
    ]


@pytest.fixture(scope="module")
def long_bytes_messages() -> list[Message]:
    return messages([bytes([i % 256]) * 100 for i in range(N)])


@pytest.fixture(scope="module")
def json_messages() -> list[Message]:
    values = []
    for i in range(N):
        doc = {"id": i, "user": f"user-{i % 1000}", "amount": i / 4, "meta": {"ts": BASE_TS + i}}
        values.append(json.dumps(doc).encode())
    return messages(values)


def drain(q: Any) -> tuple[int, Any]:
    count, last = 0, None
    while (r := q.poll()) is not None:
        count += 1
        last = r
    return count, last


def run_rust(msgs: list[Message], **config: Any) -> tuple[int, Any]:
    q = RecordQueue("events", 0, **config)
    q.add_raw_records(msgs)
    return drain(q)


def run_oracle(msgs: list[Message], **config: Any) -> tuple[int, Any]:
    q = oracle.OracleRecordQueue("events", 0, **config)
    q.add_raw_records(
        oracle.OracleRecord(
            m.topic(), m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value()
        )
        for m in msgs
    )
    return drain(q)


def run_floor(msgs: list[Message]) -> tuple[int, Any]:
    count, last = 0, None
    for m in msgs:
        last = (m.key(), m.value(), m.timestamp(), m.offset())
        count += 1
    return count, last


GROUP_A = "(a) RecordQueue: Long key, 100-byte value, record timestamp, 1M Messages"
GROUP_B = "(b) RecordQueue: JSON value, JsonFieldTimestampExtractor, 1M Messages"


@pytest.mark.benchmark(group=GROUP_A)
def bench_a_rust(benchmark: Any, long_bytes_messages: list[Message]) -> None:
    benchmark.extra_info.update(records=N, implementation="streamstate (Rust)")
    count, last = benchmark(
        run_rust,
        long_bytes_messages,
        key_deserializer=LongDeserializer(),
        value_deserializer=BytesDeserializer(),
        timestamp_extractor=FailOnInvalidTimestamp(),
    )
    assert count == N
    assert (last.key, last.timestamp) == (N - 1, BASE_TS + N - 1)
    assert last.value == bytes([(N - 1) % 256]) * 100


@pytest.mark.benchmark(group=GROUP_A)
def bench_a_plain_python(benchmark: Any, long_bytes_messages: list[Message]) -> None:
    benchmark.extra_info.update(records=N, implementation="plain Python (tests/oracle.py)")
    count, last = benchmark(
        run_oracle,
        long_bytes_messages,
        key_deserializer=oracle.deserialize_long,
        value_deserializer=oracle.deserialize_bytes,
    )
    assert count == N
    assert (last.key, last.timestamp) == (N - 1, BASE_TS + N - 1)


@pytest.mark.benchmark(group=GROUP_A)
def bench_a_floor(benchmark: Any, long_bytes_messages: list[Message]) -> None:
    benchmark.extra_info.update(records=N, implementation="floor: read key/value/timestamp/offset")
    count, _ = benchmark(run_floor, long_bytes_messages)
    assert count == N


@pytest.mark.benchmark(group=GROUP_B)
def bench_b_rust(benchmark: Any, json_messages: list[Message]) -> None:
    benchmark.extra_info.update(records=N, implementation="streamstate (Rust)")
    count, last = benchmark(
        run_rust,
        json_messages,
        key_deserializer=LongDeserializer(),
        value_deserializer=JsonDeserializer(),
        timestamp_extractor=JsonFieldTimestampExtractor("meta.ts"),
    )
    assert count == N
    assert last.timestamp == BASE_TS + N - 1 and last.value["id"] == N - 1


@pytest.mark.benchmark(group=GROUP_B)
def bench_b_plain_python(benchmark: Any, json_messages: list[Message]) -> None:
    benchmark.extra_info.update(records=N, implementation="plain Python (json.loads)")
    count, last = benchmark(
        run_oracle,
        json_messages,
        key_deserializer=oracle.deserialize_long,
        value_deserializer=oracle.deserialize_json,
        extractor=oracle.JsonFieldTimestamp("meta.ts"),
    )
    assert count == N
    assert last.timestamp == BASE_TS + N - 1 and last.value["id"] == N - 1


@pytest.mark.benchmark(group=GROUP_B)
def bench_b_floor(benchmark: Any, json_messages: list[Message]) -> None:
    benchmark.extra_info.update(records=N, implementation="floor: read key/value/timestamp/offset")
    count, _ = benchmark(run_floor, json_messages)
    assert count == N
