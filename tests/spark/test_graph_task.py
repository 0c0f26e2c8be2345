"""The graph runner of ``streamstate.spark.process`` (``spark/_graph.py``) without Spark: the
``applyInPandasWithState`` body called directly, micro-batch after micro-batch, with a
stand-in for Spark's ``GroupState``, against the ``TopologyTestDriver`` on the same records.

A record late by more than the grace must be dropped even when it is the first record of a
micro-batch: the window aggregation's own stream time is carried between micro-batches (a
task that restarts each micro-batch would otherwise start it again from the record itself)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from tests.spark._group_state import GroupState

from streamstate import (
    Materialized,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    Topology,
    TopologyError,
)
from streamstate.serde import BytesDeserializer
from streamstate.spark._chunks import read_chunk, to_chunks
from streamstate.spark._graph import graph_task
from streamstate.testing import TopologyTestDriver

S = Serdes.String()
CONFIG = {"application.id": "graph-task", "bootstrap.servers": "dummy:1234"}


def _windowed_count() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", key_serde=S, value_serde=S)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(60_000, 10_000))
        .count(materialized=Materialized("per-minute", caching=False))
        .to_stream()
        .to("out", value_serde=Serdes.Long())
    )
    return builder.build()


def _frames(records: list[tuple[str, int, int]]) -> list[Any]:
    """Spark's Kafka source rows of partition 0 of "clicks" (key, offset, timestamp ms), packed
    as ``process`` packs them for the grouped operator."""
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array([k.encode() for k, _, _ in records], pa.binary()),
            "value": pa.array([b"p"] * len(records), pa.binary()),
            "topic": pa.array(["clicks"] * len(records), pa.string()),
            "partition": pa.array([0] * len(records), pa.int32()),
            "offset": pa.array([o for _, o, _ in records], pa.int64()),
            "timestamp": pa.array([t * 1000 for _, _, t in records], pa.timestamp("us", tz="UTC")),
        }
    )
    return [pa.Table.from_batches(list(to_chunks([batch]))).to_pandas()]


def _driver_run(
    batches: list[list[tuple[str, int, int]]], *topics: str
) -> dict[str, list[tuple[str, bytes, bytes, int]]]:
    """The windowed count in the ``TopologyTestDriver`` over the micro-batches' records (key,
    offset, timestamp ms): per output topic, its records as ``_rows`` gives Spark's."""
    with TopologyTestDriver(_windowed_count(), CONFIG) as driver:
        clicks = driver.create_input_topic("clicks", S.serializer, S.serializer)
        for batch in batches:
            for key, _, ts in batch:
                clicks.pipe_input(key, "p", ts)
        out = {}
        for topic in topics:
            read = driver.create_output_topic(topic, BytesDeserializer(), BytesDeserializer())
            out[topic] = [(topic, r.key, r.value, r.timestamp) for r in read.read_records_to_list()]
        return out


def _rows(frames: list[Any]) -> list[tuple[str, bytes, bytes, int]]:
    out = []
    for frame in frames:
        for chunk in frame["chunk"]:
            if chunk is None:
                continue
            for batch in read_chunk(chunk):
                for row in batch.to_pylist():
                    millis = int(row["timestamp"].timestamp() * 1000)
                    out.append((row["topic"], row["key"], row["value"], millis))
    return out


def test_a_late_record_first_in_a_micro_batch_is_dropped_as_the_driver_drops_it() -> None:
    batches = [[("a", 0, 0), ("a", 1, 70_000)], [("a", 2, 5_000), ("a", 3, 71_000)]]
    task = graph_task(_windowed_count(), CONFIG, changelog=False)
    state = GroupState()
    got = []
    for records in batches:
        got += _rows(list(task.run((0,), _frames(records), state)))

    expected = _driver_run(batches, "out")["out"]
    # The premise: the record at 5 s was dropped (window [0, 60 s) counted once).
    assert [int.from_bytes(v, "big") for _, _, v, _ in expected] == [1, 1, 2]
    assert got == expected


def test_two_sub_topologies_are_refused_naming_their_sources() -> None:
    builder = StreamsBuilder()
    builder.stream("a", key_serde=S, value_serde=S).to("out-a", key_serde=S, value_serde=S)
    builder.stream("b", key_serde=S, value_serde=S).to("out-b", key_serde=S, value_serde=S)
    with pytest.raises(TopologyError, match=r"2 sub-topologies \(reading \[\['a'\], \['b'\]\]\)"):
        graph_task(builder.build(), CONFIG, changelog=False)
