"""The task loop's batch hand-over (``app/task_runs.py``): a stream-table join writing to a sink
takes runs of records, and everything a run leaves behind is what the one-at-a-time loop
leaves: the sink's records (bytes, timestamps, headers, order), the joiner's calls, the
processing exception handler's calls and the state it sees then, stream time, the partition
times and offsets to commit, the dropped records and the table's store.

Records are written to the ``TopologyTestDriver``'s topics in bulk and the task is then asked
for many records at once (the driver's own loop asks for one at a time), over random
interleavings of the table and the stream with equal timestamps (ties across partitions),
null keys and values, table tombstones, headers and a joiner that raises. Each case runs with runs
on and off (the same ``process(n)`` calls, one record at a time inside); the driver's own
``process(1)`` loop too.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from tests.run_spy import spy_on_runs

from streamstate import ConsumerRecord, PartitionGroup, RecordQueue, TopicPartition
from streamstate.app import task as task_module
from streamstate.app import task_runs
from streamstate.dsl import StreamsBuilder
from streamstate.processor.graph import TaskId
from streamstate.serde import Serdes, StringSerializer
from streamstate.testing import TopologyTestDriver

TEXT = StringSerializer()
_INIT = task_module.StreamTask.__init__
JSON = Serdes.Json().serializer
STRINGS = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}


class Case:
    """One program and its inputs; :meth:`run` returns everything compared."""

    def __init__(
        self, left: bool, inputs: list[tuple[str, Any, Any, int, Any]], limits: Any = None
    ) -> None:
        self.left = left
        self.inputs = inputs
        self.limits = limits  # the sink's timestamp limits (a stream thread's check), if any
        self.calls: list[tuple[Any, ...]] = []
        self.runs: list[int] = []

    def joiner(self, value: str, row: dict[str, Any] | None) -> str:
        self.calls.append(("join", value, None if row is None else dict(row)))
        if value.startswith("boom"):
            raise ValueError(f"joiner refuses {value}")
        if row is not None:
            row["seen"] = True  # the row is the joiner's own: never seen again
        return f"{value}+{row}"

    def handler(self, context: Any) -> str:
        task = self.task
        queue = task.group.queue(task.partitions[1])
        self.calls.append(
            (
                "handler",
                context.topic,
                context.offset,
                str(context.exception),
                task.group.stream_time,
                queue.head_offset,
                task.context.offset,
            )
        )
        return "continue"

    def production_handler(self, context: Any) -> str:
        self.calls.append(("production", context.topic, str(context.exception)[:60]))
        return "continue"

    def run(
        self, mode: str, chunk: int, monkeypatch: pytest.MonkeyPatch, *, runs: bool
    ) -> dict[str, Any]:
        """``mode``: ``"bulk"`` (everything buffered, then ``process(chunk)`` until done) or
        ``"driver"`` (each record piped and processed as the driver does)."""
        monkeypatch.setattr(task_runs, "RUNS", runs)
        taken = spy_on_runs(monkeypatch)
        builder = StreamsBuilder()
        # JSON rows: a flushed row stays in the cache as bytes, read by the inlined lookup.
        table = builder.table("table", key_serde=Serdes.String(), value_serde=Serdes.Json())
        stream = builder.stream("stream", key_serde=Serdes.String(), value_serde=Serdes.String())
        joined = (
            stream.left_join(table, self.joiner) if self.left else stream.join(table, self.joiner)
        )
        joined.to("out")
        config = dict(
            STRINGS,
            **{
                "processing.exception.handler": self.handler,
                "production.exception.handler": self.production_handler,
            },
        )
        if self.limits is not None:
            # The sink checked as a stream thread checks it (app/sink_timestamps.py).
            limits = self.limits

            def checked_init(task: Any, *args: Any, **kwargs: Any) -> None:
                _INIT(task, *args, **kwargs, sink_limits=limits)

            monkeypatch.setattr(task_module.StreamTask, "__init__", checked_init)
        with TopologyTestDriver(builder.build(), config) as driver:
            self.task = driver._tasks[TaskId(0, 0)]
            if mode == "driver":
                for topic, key, value, timestamp, headers in self.inputs:
                    driver._pipe(
                        topic,
                        None if key is None else TEXT.serialize(topic, key),
                        _value_bytes(topic, value),
                        timestamp,
                        headers,
                    )
            else:
                # All of it buffered first: the task then orders it across partitions.
                for topic, key, value, timestamp, headers in self.inputs:
                    driver._producer.produce(
                        topic,
                        _value_bytes(topic, value),
                        None if key is None else TEXT.serialize(topic, key),
                        timestamp=timestamp,
                        headers=list(headers) or None,
                    )
                driver._feed()
                task = self.task
                task.update_lags(dict.fromkeys(task.partitions, 0))
                # Caches flushed between calls, as commits do: rows both dirty and flushed.
                while task.process(chunk):
                    task.flush_caches()
                driver._producer.poll()
            task = self.task
            outcome = {
                # The sink's records as written: bytes, timestamp, headers, in order.
                "out": [
                    (m.key(), m.value(), m.timestamp(), m.headers())
                    for m in driver._logs.get("out", [])
                ],
                "calls": list(self.calls),
                "stream_time": task.group.stream_time,
                "processed_time": sorted((q.topic, t) for q, t in task._processed_time.items()),
                "offsets": sorted(
                    (tp.topic, tp.offset, tp.metadata) for tp in task.committable_offsets()
                ),
                "dropped": task.dropped_records(),
                "store": sorted(driver.get_key_value_store(_store_name(driver)).all()),
            }
        self.runs = [t for t in taken if t]
        self.calls.clear()
        return outcome


def _value_bytes(topic: str, value: Any) -> bytes | None:
    if value is None:
        return None
    if topic == "table":
        return JSON.serialize(topic, {"row": value})
    return TEXT.serialize(topic, value)


def _store_name(driver: TopologyTestDriver) -> str:
    (name,) = [n for n in driver._topology.stores if "STATE-STORE" in n]
    return name


def _inputs(rng: random.Random, count: int) -> list[tuple[str, Any, Any, int, Any]]:
    keys = ["a", "b", "c", "d"]
    inputs: list[tuple[str, Any, Any, int, Any]] = []
    # Few distinct timestamps, often going back: many ties between the two partitions.
    for i in range(count):
        timestamp = rng.randrange(6) * 10 + (i // 10) * 10
        key = rng.choice(keys)
        if rng.random() < 0.3:
            value = None if rng.random() < 0.15 else f"t{i}"
            inputs.append(("table", key, value, timestamp, ()))
            continue
        roll = rng.random()
        if roll < 0.05:
            inputs.append(("stream", None, f"v{i}", timestamp, ()))
        elif roll < 0.1:
            inputs.append(("stream", key, None, timestamp, ()))
        elif roll < 0.15:
            inputs.append(("stream", key, f"v{i}", timestamp, (("h", b"x"),)))
        elif roll < 0.2:
            inputs.append(("stream", key, f"boom{i}", timestamp, ()))
        else:
            inputs.append(("stream", key, f"v{i}", timestamp, ()))
    return inputs


@pytest.mark.parametrize("left", [False, True], ids=["join", "left_join"])
@pytest.mark.parametrize("seed", range(6))
def test_runs_leave_what_the_loop_leaves(
    left: bool, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    inputs = _inputs(rng, 300)
    chunk = rng.choice([7, 50, 1000])
    case = Case(left, inputs)
    with_runs = case.run("bulk", chunk, monkeypatch, runs=True)
    runs = case.runs
    without = case.run("bulk", chunk, monkeypatch, runs=False)
    assert not case.runs  # the switch is off: no run taken
    assert with_runs == without
    # Runs of several records were taken, and the joiner raised inside some.
    assert max(runs) > 1
    assert any(c[0] == "handler" for c in with_runs["calls"])
    assert len(with_runs["out"]) > 50


@pytest.mark.parametrize("left", [False, True], ids=["join", "left_join"])
def test_runs_match_the_drivers_one_record_at_a_time(
    left: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver hands each record over as it is piped (runs of one): the same results as
    # with runs off, the inputs in timestamp order so that the buffered order is the piped one.
    rng = random.Random(99)
    inputs = sorted(_inputs(rng, 200), key=lambda r: r[3])
    case = Case(left, inputs)
    with_runs = case.run("driver", 1, monkeypatch, runs=True)
    assert case.runs  # the run path took them
    without = case.run("driver", 1, monkeypatch, runs=False)
    assert not case.runs
    assert with_runs == without


def test_a_stream_time_punctuation_keeps_the_one_at_a_time_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Stream-time punctuations are checked after every record: no run while one is scheduled.
    case = Case(False, _inputs(random.Random(5), 100))
    monkeypatch.setattr(
        "streamstate.processor.processor_topology.ProcessorTopology.has_stream_punctuations",
        lambda self: True,
    )
    case.run("bulk", 1000, monkeypatch, runs=True)
    assert not case.runs


class Limits:
    """A sink topic's ``(after, before)`` limits, as ``SinkTimestampLimits.of`` gives them."""

    def __init__(self, before_ms: int) -> None:
        self.before_ms = before_ms
        self.asked: list[str] = []

    def of(self, topic: str) -> tuple[int | None, int | None]:
        self.asked.append(topic)
        return 3_600_000, self.before_ms


def test_a_run_refuses_the_sink_timestamps_the_sink_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Timestamps 10 s apart over about 400 s before now, the limit in the middle: the records
    # older than it are refused (the production handler continues), the others written, the
    # same with runs on and off. No record is within 5 s of the limit (+ the 5 s skew), so the
    # clock moving during the test changes nothing.
    now = int(time.time() * 1000)
    base = now - 400_000
    inputs = [
        (topic, key, value, base + timestamp * 1000, headers)
        for topic, key, value, timestamp, headers in _inputs(random.Random(7), 300)
    ]
    outcomes = []
    asked = []
    for runs in (True, False):
        # Refused: older than 190 s + the 5 s skew, i.e. the records of 200 s ago and before.
        limits = Limits(before_ms=190_000)
        case = Case(False, inputs, limits)
        outcomes.append(case.run("bulk", 50, monkeypatch, runs=runs))
        asked.append(limits.asked)
        if runs:
            assert max(case.runs) > 1
    with_runs, without = outcomes
    assert with_runs == without
    assert asked[0] == asked[1]  # the limits read as often (once, then per refusal)
    assert asked[0]
    refused = [c for c in with_runs["calls"] if c[0] == "production"]
    assert refused and len(with_runs["out"]) > 20
    assert all(m[2][1] >= now - 195_000 for m in with_runs["out"])


class _RecordTime:
    def extract(self, record: Any, partition_time: int) -> int:
        return int(record.timestamp)


def _groups(seed: int, count: int) -> list[tuple[Any, list[Any], list[Any]]]:
    """Two identical groups of ``count`` partitions (and their partitions, and the batches
    to add in rounds), timestamps drawn from 0-3: ties everywhere."""
    rng = random.Random(seed)
    tps = [TopicPartition(f"t{i}", i) for i in range(count)]
    batches = []
    offsets = dict.fromkeys(range(count), 0)
    for _ in range(3):
        round_batches = []
        for i, tp in enumerate(tps):
            size = rng.randrange(8)
            start = offsets[i]
            offsets[i] += size
            round_batches.append(
                [
                    ConsumerRecord(tp.topic, tp.partition, o, rng.randrange(4), b"k", b"v")
                    for o in range(start, start + size)
                ]
            )
        batches.append(round_batches)
    made = []
    for _ in range(2):
        queues = {
            tp: RecordQueue(tp.topic, tp.partition, timestamp_extractor=_RecordTime()) for tp in tps
        }
        made.append((PartitionGroup(queues), tps, batches))
    return made


@pytest.mark.parametrize("seed", range(200))
def test_next_run_is_the_one_at_a_time_order(seed: int) -> None:
    # Through the binding, records added between rounds: next_run + peek + advance hand out
    # exactly what next_record does, in the same order, with the same stream time after each.
    (loop, tps, batches), (runs, _, _) = _groups(seed, 1 + seed % 4)
    max_records = 1 + seed % 5
    for round_batches in batches:
        for tp, batch in zip(tps, round_batches, strict=True):
            if batch:
                loop.add_raw_records(tp, batch)
                runs.add_raw_records(tp, batch)
        expected = []
        while (picked := loop.next_record()) is not None:
            expected.append((picked[0].topic, picked[0].offset, loop.stream_time))
        got = []
        while (run := runs.next_run(max_records)) is not None:
            index, n = run
            assert 1 <= n <= max_records
            records = runs.peek(index, n)
            assert len(records) == n
            for record in records:
                assert runs.advance(index, 1) == 1
                got.append((record.topic, record.offset, runs.stream_time))
        assert got == expected
        assert runs.num_buffered() == 0


def test_advance_takes_a_whole_run_at_once() -> None:
    (group, tps, batches), _ = _groups(3, 3)
    for tp, batch in zip(tps, batches[0], strict=True):
        if batch:
            group.add_raw_records(tp, batch)
    total = group.num_buffered()
    assert total > 0
    while (run := group.next_run(100)) is not None:
        index, n = run
        highest = max(r.timestamp for r in group.peek(index, n))
        before = group.stream_time
        assert group.advance(index, n) == n
        assert group.stream_time == max(before, highest)
        total -= n
        assert group.num_buffered() == total
    assert group.peek(0, 5) == []
    assert group.advance(0, 5) == 0
    with pytest.raises(IndexError):
        group.peek(3, 1)
