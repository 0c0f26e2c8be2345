"""Splitting one consumer poll by partition: in Rust (``streamstate.clients.poll.split_poll``)
vs the same split written in Python over the Message methods, side by side.

The input: 1M ``confluent_kafka.Message`` objects (quick mode: 50k) of 4 partitions of one
topic, in runs of 500 per partition as a consumer hands them out, with an end-of-partition event
after every 20 runs. Both contenders must return the same runs and end-of-partition positions.
The Python split is what the stream threads and the changelog reader did before the split moved
to Rust: ``error()``, ``topic()`` and ``partition()`` of every message, read in Python.
"""

from __future__ import annotations

from typing import Any

import pytest
from benches._common import size
from confluent_kafka import KafkaError, Message

from streamstate.clients.poll import split_poll

N = size(1_000_000)
PARTITIONS = 4
RUN = 500


def polled() -> list[Message]:
    messages: list[Message] = []
    offsets = [0] * PARTITIONS
    run = 0
    while sum(offsets) < N:
        partition = run % PARTITIONS
        for _ in range(min(RUN, N - sum(offsets))):
            offset = offsets[partition]
            offsets[partition] += 1
            messages.append(
                Message(topic="events", partition=partition, offset=offset, value=b"v" * 100)
            )
        run += 1
        if run % 20 == 0:
            eof = KafkaError(KafkaError._PARTITION_EOF)
            messages.append(
                Message(topic="events", partition=partition, offset=offsets[partition], error=eof)
            )
    return messages


def python_split(messages: list[Message]) -> tuple[dict[Any, list[Message]], dict[Any, int]]:
    """The split in Python: each message's methods called from Python."""
    runs: dict[Any, list[Message]] = {}
    ends: dict[Any, int] = {}
    for message in messages:
        error = message.error()
        topic, partition = message.topic(), message.partition()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF and topic is not None:
                offset = message.offset()
                if partition is not None and offset is not None:
                    ends[(topic, partition)] = max(ends.get((topic, partition), -1), offset)
            continue
        if topic is not None and partition is not None:
            runs.setdefault((topic, partition), []).append(message)
    return runs, ends


def rust_split(messages: list[Message]) -> tuple[dict[Any, list[Message]], dict[Any, int]]:
    result = split_poll(messages)
    return result.runs, result.end_positions


@pytest.fixture(scope="module")
def messages() -> list[Message]:
    return polled()


@pytest.mark.parametrize("split", [rust_split, python_split], ids=["rust", "python"])
@pytest.mark.benchmark(group="poll-split-1M")
def bench_split(benchmark: Any, messages: list[Message], split: Any) -> None:
    runs, ends = benchmark(split, messages)
    expected_runs, expected_ends = python_split(messages)
    assert runs == expected_runs and ends == expected_ends
    assert sum(len(r) for r in runs.values()) == N
    benchmark.extra_info["records"] = N
