"""``process(..., stores="local")`` (``spark/_local_stores.py``): a task's stores on the
executor's disk, Spark's state store holding only each task's last micro-batch of writes.

The task's ``applyInPandasWithState`` body is called directly, micro-batch after micro-batch,
with a stand-in for Spark's ``GroupState`` (a retried micro-batch is the same body called again
with the cell Spark committed before it), against the default layout and the
``TopologyTestDriver`` on the same records; the changelog's restore runs on the real broker.
Queries on the real Spark: ``hand_over`` in ``test_process.py``, a DSL program three ways in
``test_process_dsl.py``, both layouts.
"""

from __future__ import annotations

import collections
import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.spark._group_state import GroupState
from tests.spark._queues import read_all
from tests.spark.test_graph_task import CONFIG as GRAPH_CONFIG
from tests.spark.test_graph_task import _driver_run, _windowed_count
from tests.spark.test_graph_task import _frames as _graph_frames
from tests.spark.test_graph_task import _rows as _graph_rows

from streamstate import Topology
from streamstate.app.config import StreamsConfig
from streamstate.errors import ProcessorStateError, StreamsError
from streamstate.kafka_local import KafkaTestCluster
from streamstate.spark import process
from streamstate.spark._chunks import ipc_bytes, read_chunk, to_chunks
from streamstate.spark._graph import graph_task
from streamstate.spark._hand_over import _send_deltas
from streamstate.spark._local_stores import DELTA_SCHEMA, LocalStores, LocalStoresConfig, local_root
from streamstate.spark._process import _Task
from streamstate.stores import PersistentKeyValueStore

SOURCE = "clicks"
CHANGELOG = "graph-task-per-minute-changelog"


def _topology() -> Topology:
    topology = Topology()
    topology.add_store("counts")

    @topology.processor(sources=[SOURCE], stores=["counts"], sinks=["counts-out"])
    def count_click(ctx: Any, record: Any) -> None:
        """Counts a key's clicks in threes: the third deletes its count (a delete in the
        micro-batch's writes)."""
        counts = ctx.store("counts")
        n = int(counts.get(record.key) or b"0") + 1
        counts.put(record.key, None if n == 3 else b"%d" % n)
        ctx.send("counts-out", record.key, b"%d" % n)

    return topology


def _task(
    tmp_path: Path, *, local: bool, changelog: bool = False, servers: str = "dummy:1"
) -> _Task:
    topology = _topology()
    cfg = StreamsConfig.from_mapping(
        {
            "application.id": "local-stores",
            "bootstrap.servers": servers,
            "state.dir": str(tmp_path / "state"),
        }
    )
    stores = LocalStoresConfig.of(topology.stores, cfg, changelog, {}) if local else None
    return _Task(topology, cfg, changelog, {}, stores)


def _frames(keys: list[str], first_offset: int) -> list[Any]:
    """Spark's Kafka source rows of partition 0 of the source, packed as ``process`` packs
    them for the grouped operator."""
    n = len(keys)
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array([k.encode() for k in keys], pa.binary()),
            "value": pa.array([b"click"] * n, pa.binary()),
            "topic": pa.array([SOURCE] * n, pa.string()),
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(first_offset, first_offset + n), pa.int64()),
            "timestamp": pa.array(
                [1000 * (first_offset + i) for i in range(n)], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    return [pa.Table.from_batches(list(to_chunks([batch]))).to_pandas()]


def _run(
    task: _Task, state: GroupState, keys: list[str], first: int
) -> list[tuple[str, bytes, bytes]]:
    """One micro-batch of task 0_0: the rows it returns (topic, key, value)."""
    out = []
    for frame in task.run((0,), _frames(keys, first), state):
        for chunk in frame["chunk"]:
            for batch in read_chunk(chunk) if chunk is not None else []:
                out += [(r["topic"], r["key"], r["value"]) for r in batch.to_pylist()]
    return out


BATCHES = [
    ["a", "b", "a", "c"],
    ["a", "d", "b", "a"],
    ["e", "a", "c", "c", "b"],
]


def _offsets() -> list[int]:
    return [sum(len(b) for b in BATCHES[:i]) for i in range(len(BATCHES))]


def _sent(rows: list[tuple[str, bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for t, k, v in rows if t == "counts-out"]


def test_local_stores_give_the_output_of_the_default_layout_with_a_cell_of_one_batch(
    tmp_path: Path,
) -> None:
    default, local = _task(tmp_path / "d", local=False), _task(tmp_path / "l", local=True)
    in_cell, on_disk = GroupState(), GroupState()
    for keys, first in zip(BATCHES, _offsets(), strict=True):
        expected = _sent(_run(default, in_cell, keys, first))
        assert _sent(_run(local, on_disk, keys, first)) == expected
        version, delta, _, _ = on_disk.get
        # The cell holds this micro-batch's writes only: one row per key it wrote.
        written = pa.Table.from_batches(read_chunk(delta))
        assert sorted(written.column("key").to_pylist()) == sorted({k.encode() for k in keys})
    assert version == len(BATCHES)
    root = local_root(tmp_path / "l" / "state", "local-stores")
    marker = root / "tasks" / "0_0.json"
    disk = root / "counts" / "0"

    def on_disk_counts() -> dict[str, int]:
        with PersistentKeyValueStore("counts", disk) as store:
            return {k.decode(): int(v) for k, v in store.all()}

    def counts(batches: list[list[str]]) -> dict[str, int]:
        clicks = collections.Counter(k for b in batches for k in b)
        return {k: n % 3 for k, n in clicks.items() if n % 3}

    # The disk is one micro-batch behind the cell: it holds the counts before the last one.
    assert json.loads(marker.read_text()) == {"version": len(BATCHES) - 1}
    assert on_disk_counts() == counts(BATCHES[:-1])
    # One more micro-batch applies the last one's writes, the delete of "c" (its third click)
    # among them.
    _run(local, on_disk, ["z"], sum(map(len, BATCHES)))
    final = counts(BATCHES)
    assert "c" not in final and collections.Counter(BATCHES[0])["c"] == 1  # the premise
    assert on_disk_counts() == final


def test_a_retried_micro_batch_runs_again_over_the_state_spark_committed(tmp_path: Path) -> None:
    straight, retried = _task(tmp_path / "s", local=True), _task(tmp_path / "r", local=True)
    s_state, r_state = GroupState(), GroupState()
    expected = [
        _sent(_run(straight, s_state, k, o)) for k, o in zip(BATCHES, _offsets(), strict=True)
    ]

    got = [_sent(_run(retried, r_state, BATCHES[0], 0))]
    committed = copy.deepcopy(r_state.value)
    # The second micro-batch's first attempt: it writes, then Spark does not commit its cell
    # (another task failed, say). Spark runs it again from the cell it committed before.
    _run(retried, r_state, BATCHES[1], _offsets()[1])
    r_state.value = committed
    got.append(_sent(_run(retried, r_state, BATCHES[1], _offsets()[1])))
    got.append(_sent(_run(retried, r_state, BATCHES[2], _offsets()[2])))
    assert got == expected


def test_a_micro_batch_that_fails_in_the_processor_leaves_the_stores_to_its_retry(
    tmp_path: Path,
) -> None:
    """The processor raises on the second micro-batch's last record, after writing: the
    failed attempt must release the stores (their directory lock) and leave the disk as the
    cell says, so that its retry, in the same Python worker, runs as if it had not failed."""
    straight, failing = _task(tmp_path / "s", local=True), _task(tmp_path / "f", local=True)
    s_state, f_state = GroupState(), GroupState()
    expected = [
        _sent(_run(straight, s_state, k, o)) for k, o in zip(BATCHES, _offsets(), strict=True)
    ]
    got = [_sent(_run(failing, f_state, BATCHES[0], 0))]
    fail = failing.topology.node().function
    offsets = _offsets()
    bad_offset = offsets[1] + len(BATCHES[1]) - 1

    def failing_once(ctx: Any, record: Any) -> None:
        fail(ctx, record)
        if record.offset == bad_offset:
            raise RuntimeError("the processor fails")

    failing.topology.node().function = failing_once
    with pytest.raises(StreamsError, match="the processor fails") as failure:
        _run(failing, f_state, BATCHES[1], offsets[1])
    failing.topology.node().function = fail
    # The failure's traceback (and the failed attempt's frames) still alive, as a worker that
    # reports it may keep them: the stores must have been closed explicitly.
    assert failure.traceback
    got.append(_sent(_run(failing, f_state, BATCHES[1], offsets[1])))
    got.append(_sent(_run(failing, f_state, BATCHES[2], offsets[2])))
    assert got == expected
    assert failure.value.partition == 0  # (keeps the failure referenced to here)


def test_a_lost_disk_without_a_changelog_is_an_error_not_an_empty_store(tmp_path: Path) -> None:
    task, state = _task(tmp_path, local=True), GroupState()
    _run(task, state, BATCHES[0], 0)
    _run(task, state, BATCHES[1], _offsets()[1])
    shutil.rmtree(tmp_path / "state")
    with pytest.raises(ProcessorStateError, match=r"stores \['counts'\] have no changelog"):
        _run(task, state, BATCHES[2], _offsets()[2])


def test_a_checkpoint_older_than_the_disk_is_refused(tmp_path: Path) -> None:
    task, state = _task(tmp_path, local=True), GroupState()
    _run(task, state, BATCHES[0], 0)
    old = copy.deepcopy(state.value)
    _run(task, state, BATCHES[1], _offsets()[1])
    _run(task, state, BATCHES[2], _offsets()[2])  # the disk now holds micro-batch 2
    state.value = old
    with pytest.raises(ProcessorStateError, match="older copy of its checkpoint"):
        _run(task, state, BATCHES[1], _offsets()[1])


def test_a_lost_disk_is_restored_from_the_changelog_and_the_cell(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    """The changelog rows a micro-batch returns are what Spark's sink would produce: produced
    here to the real broker, they are what the task restores from when its disk is gone."""
    changelog = "local-stores-counts-changelog"
    if changelog not in kafka.admin.list_topics(timeout=30).topics:
        kafka.create_topic(changelog, partitions=1)
    task = _task(tmp_path, local=True, changelog=True, servers=kafka.bootstrap_servers)
    straight = _task(tmp_path / "s", local=True)
    state, s_state = GroupState(), GroupState()
    offsets = _offsets()
    for i in range(2):
        rows = _run(task, state, BATCHES[i], offsets[i])
        kafka.produce(changelog, [(k, v) for t, k, v in rows if t == changelog])
        _run(straight, s_state, BATCHES[i], offsets[i])
    # The changelog holds the first micro-batch's writes: each is sent once Spark committed it.
    assert {m.key(): m.value() for m in read_all(kafka, changelog)} == {
        b"a": b"2",
        b"b": b"1",
        b"c": b"1",
    }
    shutil.rmtree(tmp_path / "state")
    got = _sent(_run(task, state, BATCHES[2], offsets[2]))
    assert got == _sent(_run(straight, s_state, BATCHES[2], offsets[2]))


def test_an_unknown_store_layout_is_refused(spark: Any) -> None:
    df = spark.createDataFrame(
        [],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp",
    )
    config = {"application.id": "x", "bootstrap.servers": "dummy:1"}
    with pytest.raises(ValueError, match="stores must be 'spark' or 'local', not 'disk'"):
        process(df, _topology(), config, stores="disk")


def test_a_dsl_graph_on_local_stores_gives_the_driver_output_across_a_retried_micro_batch(
    tmp_path: Path,
) -> None:
    """A windowed count (a timestamped window store, its changelog rows stamped): on the
    local layout, with its second micro-batch run twice (Spark committed the first attempt's
    cell never), its output is the ``TopologyTestDriver``'s."""
    batches = [
        [("a", 0, 0), ("b", 1, 20_000), ("a", 2, 61_000)],
        [("b", 3, 75_000), ("a", 4, 5_000), ("a", 5, 125_000)],
        [("b", 6, 62_000), ("a", 7, 130_000)],
    ]
    config = {**GRAPH_CONFIG, "state.dir": str(tmp_path / "state")}
    task = graph_task(_windowed_count(), config, changelog=True, stores="local")
    state = GroupState()
    got = _graph_rows(list(task.run((0,), _graph_frames(batches[0]), state)))
    committed = copy.deepcopy(state.value)
    list(task.run((0,), _graph_frames(batches[1]), state))
    state.value = committed
    for records in batches[1:]:
        got += _graph_rows(list(task.run((0,), _graph_frames(records), state)))

    driver = _driver_run(batches, "out", CHANGELOG)
    expected = driver["out"]
    driver_store = {k: (v, ts) for _, k, v, ts in driver[CHANGELOG]}
    # The premise: the record at 5 s, past its window's grace, was dropped (8 records, 7
    # updates); two windows were counted twice.
    assert [int.from_bytes(v, "big") for _, _, v, _ in expected] == [1, 1, 1, 1, 1, 2, 2]
    assert [r for r in got if r[0] == "out"] == expected
    # The store's final contents: its changelog rows, sent one micro-batch late, then the last
    # micro-batch's writes (in the cell; hand_over sends them): the driver's changelog's.
    store = {k: (v, ts) for t, k, v, ts in got if t == CHANGELOG}
    pending = LocalStores.changelog_rows_of(state.get[1])
    assert pending  # the premise: the last micro-batch wrote
    store.update({k: (v, ts) for _, k, v, ts in pending})
    assert store == driver_store


def _delta_bytes(topic: str, n: int) -> bytes:
    """A cell's delta of ``n`` writes to store ``counts``, logged to ``topic``."""
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(["counts"] * n, pa.string()),
            pa.array([topic] * n, pa.string()),
            pa.array([b"k%d" % i for i in range(n)], pa.binary()),
            pa.array([b"%d" % i for i in range(n)], pa.binary()),
            pa.array([None] * n, pa.binary()),
            pa.array([None] * n, pa.int64()),
        ],
        schema=DELTA_SCHEMA,
    )
    return ipc_bytes([batch], DELTA_SCHEMA).to_pybytes()


def test_hand_over_sends_a_delta_bigger_than_the_producer_queue(
    kafka: KafkaTestCluster,
) -> None:
    topic = kafka.create_topic(partitions=2)
    cfg = StreamsConfig.from_mapping(
        {
            "application.id": "deltas",
            "bootstrap.servers": kafka.bootstrap_servers,
            # The premise: a queue of 10 records for 50 of each task.
            "producer.queue.buffering.max.messages": 10,
        }
    )
    _send_deltas(cfg, [(0, _delta_bytes(topic, 50)), (1, _delta_bytes(topic, 50))])
    got = collections.Counter(m.partition() for m in read_all(kafka, topic))
    assert got == {0: 50, 1: 50}


def test_hand_over_fails_naming_the_changelog_partition_the_brokers_refuse(
    kafka: KafkaTestCluster,
) -> None:
    topic = kafka.create_topic(partitions=1)
    cfg = StreamsConfig.from_mapping(
        {"application.id": "deltas", "bootstrap.servers": kafka.bootstrap_servers}
    )
    with pytest.raises(StreamsError, match=rf"refused: \['{topic}\[3\]: "):
        _send_deltas(cfg, [(3, _delta_bytes(topic, 2))])


def test_hand_over_fails_naming_a_partition_refused_at_once(kafka: KafkaTestCluster) -> None:
    # A producer that knows the topic refuses a missing partition in produce() itself, not in
    # a delivery report (CI met it once with the test above). The premise made to hold: a
    # queue of 10 records for the 50 of partition 0 drains only once the producer has the
    # topic's metadata, so partition 3's record comes after it.
    topic = kafka.create_topic(partitions=1)
    cfg = StreamsConfig.from_mapping(
        {
            "application.id": "deltas",
            "bootstrap.servers": kafka.bootstrap_servers,
            "producer.queue.buffering.max.messages": 10,
        }
    )
    with pytest.raises(StreamsError, match=rf"refused: \['{topic}\[3\]: .*Unknown partition"):
        _send_deltas(cfg, [(0, _delta_bytes(topic, 50)), (3, _delta_bytes(topic, 2))])
    # Partition 0's records were sent: a refused one does not stop the others.
    assert len(read_all(kafka, topic)) == 50
