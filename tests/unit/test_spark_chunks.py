"""The Arrow chunks that carry records through Spark's stateful operators (no Spark needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamstate.spark._chunks import (
    batches_by_partition,
    in_offset_order,
    read_chunk,
    to_chunks,
    unpack_chunks,
)
from streamstate.spark._metrics import (
    DEFAULT,
    DROP_COLUMNS,
    counted,
    drop_counts,
    resolve_observation,
    with_drop_columns,
)


def _batch(rows: list[tuple[str, int, int]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([b"k%d" % o for _, _, o in rows], pa.binary()),
            "value": pa.array([b"v%d" % o for _, _, o in rows], pa.binary()),
            "topic": pa.array([t for t, _, _ in rows], pa.string()),
            "partition": pa.array([p for _, p, _ in rows], pa.int32()),
            "offset": pa.array([o for _, _, o in rows], pa.int64()),
        }
    )


def _offsets(batches: list[pa.RecordBatch]) -> list[int]:
    return [o for b in batches for o in b.column("offset").to_pylist()]


def test_chunks_hold_one_topic_partition_each_and_round_trip() -> None:
    batch = _batch([("a", 0, 5), ("b", 0, 1), ("a", 1, 2), ("a", 0, 6), ("b", 0, 2)])
    rows = pa.Table.from_batches(list(to_chunks([batch]))).to_pylist()
    assert sorted((r["topic"], r["partition"], r["first_offset"]) for r in rows) == [
        ("a", 0, 5),
        ("a", 1, 2),
        ("b", 0, 1),
    ]
    for r in rows:
        inner = read_chunk(r["chunk"])
        assert {
            (t, p) for t, p in zip(*(_col(inner, c) for c in ("topic", "partition")), strict=True)
        } == {(r["topic"], r["partition"])}
    back = pa.Table.from_batches(list(unpack_chunks(batch.schema)(to_chunks([batch]))))
    assert sorted(back.column("offset").to_pylist()) == [1, 2, 2, 5, 6]


def _col(batches: list[pa.RecordBatch], name: str) -> list[object]:
    return [v for b in batches for v in b.column(name).to_pylist()]


def test_a_single_partition_batch_is_one_chunk_and_empty_batches_none() -> None:
    batch = _batch([("a", 3, o) for o in range(10)])
    rows = list(to_chunks([batch.slice(0, 0), batch]))
    assert len(rows) == 1
    assert rows[0].column("first_offset").to_pylist() == [0]


def test_chunks_come_back_in_offset_order_per_partition() -> None:
    later = _batch([("a", 0, o) for o in (10, 11, 12)])
    earlier = _batch([("a", 0, o) for o in (3, 4)])
    other = _batch([("b", 0, 0)])
    frames = [
        {
            "topic": [r["topic"] for r in rows],
            "partition": [r["partition"] for r in rows],
            "chunk": [r["chunk"] for r in rows],
        }
        for rows in (
            pa.Table.from_batches(list(to_chunks([later, other]))).to_pylist(),
            pa.Table.from_batches(list(to_chunks([earlier]))).to_pylist(),
        )
    ]
    found = batches_by_partition(frames)
    assert list(found) == [("a", 0), ("b", 0)]
    assert _offsets(found[("a", 0)]) == [3, 4, 10, 11, 12]


def test_overlapping_or_unsorted_batches_become_one_sorted_batch() -> None:
    one = _batch([("a", 0, o) for o in (1, 5, 9)])
    two = _batch([("a", 0, o) for o in (2, 3)])
    assert _offsets(in_offset_order([one, two])) == [1, 2, 3, 5, 9]
    shuffled = _batch([("a", 0, o) for o in (4, 2, 3)])
    assert _offsets(in_offset_order([shuffled])) == [2, 3, 4]
    assert in_offset_order([]) == []


def test_nulls_in_topic_or_partition_are_refused() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"topic": pa.array([None], pa.string()), "partition": [0], "offset": [1]}
    )
    with pytest.raises(ValueError, match="topic and a partition"):
        list(to_chunks([batch]))


def test_counted_batches_carry_drops_on_summary_rows_only() -> None:
    data = pa.schema([("offset", pa.int64()), ("value", pa.struct([("x", pa.int64())]))])
    schema = with_drop_columns(data)
    full = pa.RecordBatch.from_pydict({"offset": [1, 2], "value": [{"x": 1}, {"x": 2}]}, data)
    empty = full.slice(0, 0)
    out = pa.Table.from_batches(list(counted([(full, (0, 0)), (empty, (2, 1))], schema)))
    rows = out.to_pylist()
    assert [r["offset"] for r in rows] == [1, 2, None]
    assert [r[DROP_COLUMNS[0]] for r in rows] == [None, None, 2]
    assert [r[DROP_COLUMNS[1]] for r in rows] == [None, None, 1]


def test_drop_counts_sum_every_partition() -> None:
    dropped = {
        ("t", 0): {"deserialization_error": 2, "negative_timestamp": 1},
        ("t", 1): {"deserialization_error": 0, "negative_timestamp": 4},
    }
    assert drop_counts(dropped) == (2, 5)
    assert drop_counts({}) == (0, 0)


def test_the_observation_default_depends_on_streaming() -> None:
    assert resolve_observation(DEFAULT, streaming=True) == "dropped_records"
    assert resolve_observation(DEFAULT, streaming=False) is None
    assert resolve_observation("mine", streaming=False) == "mine"
    assert resolve_observation(None, streaming=True) is None
    with pytest.raises(ValueError, match="non-empty"):
        resolve_observation("", streaming=True)
    with pytest.raises(TypeError, match="Observation"):
        resolve_observation(3, streaming=True)
