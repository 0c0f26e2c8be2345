"""A built-in windowed count's batch paths (``dsl/count_flush.py``: the record-cache flush in one
Rust call; ``TimeWindowAggregateProcessor.run_handler``: runs of records from the task loop)
leave exactly what the general paths leave: every record produced (the sink's and the
changelog's: bytes, timestamps, headers, order), the store's contents, ``dropped-records-total``,
stream time and the offsets to commit.

``windowed_by(TimeWindows...).count().to_stream().to("out")`` over two source topics (two
partitions of one task, ties across them), random string keys, timestamps going back (out of
order, late, within grace or not), null keys and values, headers; written to the
``TopologyTestDriver``'s topics in bulk and processed in chunks with the caches flushed between
them (commits), or piped one record at a time as the driver does. Each case runs with each
batch path on and off; a small record cache makes the flush run mid-chunk (eviction).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from tests.run_spy import spy_on_runs

from streamstate._core import encode_window_counts
from streamstate.app import task_runs
from streamstate.dsl import Materialized, StreamsBuilder, TimeWindows, window_processors
from streamstate.dsl import count_flush as count_flush_module
from streamstate.dsl.object_cache import ObjectCache
from streamstate.processor.graph import TaskId
from streamstate.serde import Serdes, StringSerializer
from streamstate.testing import TopologyTestDriver

TEXT = StringSerializer()
STRINGS = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
SIZE = 60_000


class Case:
    """One program and its inputs; :meth:`run` returns everything compared."""

    def __init__(
        self,
        inputs: list[tuple[str, Any, Any, int, Any]],
        grace_ms: int | None = 30_000,
        max_entries: int | None = None,
    ) -> None:
        self.inputs = inputs
        self.grace_ms = grace_ms
        self.max_entries = max_entries
        self.runs: list[int] = []
        self.batched = 0

    def program(self, builder: StreamsBuilder) -> None:
        windows = (
            TimeWindows.of_size_with_no_grace(SIZE)
            if self.grace_ms is None
            else TimeWindows.of_size_and_grace(SIZE, self.grace_ms)
        )
        stream = builder.stream(["in1", "in2"], key_serde=Serdes.String())
        counts = (
            stream.group_by_key().windowed_by(windows).count(materialized=Materialized("counts"))
        )
        counts.to_stream().to("out", value_serde=Serdes.Long())

    def run(
        self,
        mode: str,
        chunk: int,
        monkeypatch: pytest.MonkeyPatch,
        *,
        runs: bool,
        batch_flush: bool,
    ) -> dict[str, Any]:
        """``mode``: ``"bulk"`` (everything buffered, then ``process(chunk)`` until done, the
        caches flushed between calls as commits flush them) or ``"driver"`` (each record piped
        and processed as the driver does)."""
        monkeypatch.setattr(task_runs, "RUNS", runs)
        monkeypatch.setattr(window_processors, "BATCH_FLUSH", batch_flush)
        if self.max_entries is not None:
            monkeypatch.setattr(ObjectCache.__init__, "__defaults__", (self.max_entries, None))
        taken = spy_on_runs(monkeypatch)
        flushes: list[count_flush_module.CountFlush] = []
        real_init = count_flush_module.CountFlush.__init__

        def kept(flush: Any, processor: Any) -> None:
            real_init(flush, processor)
            flushes.append(flush)

        monkeypatch.setattr(count_flush_module.CountFlush, "__init__", kept)
        builder = StreamsBuilder()
        self.program(builder)
        with TopologyTestDriver(builder.build(), STRINGS) as driver:
            task = driver._tasks[TaskId(0, 0)]
            if mode == "driver":
                for topic, key, value, timestamp, headers in self.inputs:
                    driver._pipe(
                        topic, _bytes(topic, key), _bytes(topic, value), timestamp, headers
                    )
            else:
                for topic, key, value, timestamp, headers in self.inputs:
                    driver._producer.produce(
                        topic,
                        _bytes(topic, value),
                        _bytes(topic, key),
                        timestamp=timestamp,
                        headers=list(headers) or None,
                    )
                driver._feed()
                task.update_lags(dict.fromkeys(task.partitions, 0))
                while task.process(chunk):
                    task.flush_caches()
                task.flush_caches()
                driver._producer.poll()
            outcome = {
                # Every topic written (the sink and the changelog): bytes, timestamp, headers.
                "logs": {
                    topic: [(m.key(), m.value(), m.timestamp(), m.headers()) for m in log]
                    for topic, log in sorted(driver._logs.items())
                    if topic not in {"in1", "in2"}
                },
                "store": self.contents(driver),
                "stream_time": task.group.stream_time,
                "offsets": sorted(
                    (tp.topic, tp.offset, tp.metadata) for tp in task.committable_offsets()
                ),
                "dropped": task.dropped_records(),
            }
        self.runs = [t for t in taken if t]
        self.batched = sum(f.flushed for f in flushes)
        return outcome

    def contents(self, driver: TopologyTestDriver) -> list[Any]:
        """The store's windows and counts, as queries read them."""
        store = driver.get_window_store("counts")
        return sorted((w.key, w.window.start, w.window.end, value) for w, value in store.all())


class PlainCount(Case):
    """The count per key, ``group_by_key().count().to_stream().to("out")``."""

    def program(self, builder: StreamsBuilder) -> None:
        stream = builder.stream(["in1", "in2"], key_serde=Serdes.String())
        counts = stream.group_by_key().count(materialized=Materialized("counts"))
        counts.to_stream().to("out", value_serde=Serdes.Long())

    def contents(self, driver: TopologyTestDriver) -> list[Any]:
        """The store's keys and counts."""
        return sorted(driver.get_key_value_store("counts").all())


def _bytes(topic: str, text: Any) -> bytes | None:
    return None if text is None else TEXT.serialize(topic, text)


def _inputs(
    rng: random.Random, count: int, *, headers: bool = True
) -> list[tuple[str, Any, Any, int, Any]]:
    keys = [f"k{i}" for i in range(12)] + ["é-ключ"]
    inputs: list[tuple[str, Any, Any, int, Any]] = []
    now = 0
    for i in range(count):
        # Forward by up to 20 s, sometimes back by up to 2.5 minutes (late for no grace, or
        # beyond a 30 s grace), ties across the two topics.
        now += rng.randrange(0, 20_000, 5_000)
        timestamp = max(0, now - rng.randrange(150_000)) if rng.random() < 0.15 else now
        topic = rng.choice(["in1", "in2"])
        roll = rng.random()
        if roll < 0.03:
            inputs.append((topic, None, f"v{i}", timestamp, ()))
        elif roll < 0.06:
            inputs.append((topic, rng.choice(keys), None, timestamp, ()))
        elif roll < 0.09 and headers:
            inputs.append((topic, rng.choice(keys), f"v{i}", timestamp, (("h", b"x"),)))
        else:
            inputs.append((topic, rng.choice(keys), f"v{i}", timestamp, ()))
    return inputs


SWITCHES = [(True, True), (True, False), (False, True)]


@pytest.mark.parametrize("grace_ms", [None, 30_000], ids=["no-grace", "grace"])
@pytest.mark.parametrize("seed", range(6))
def test_batch_paths_leave_what_the_general_paths_leave(
    grace_ms: int | None, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    # Half the cases with headers: a flush holding a record's headers goes the general way.
    headers = seed % 2 == 1
    inputs = _inputs(rng, 400, headers=headers)
    chunk = rng.choice([7, 50, 1000])
    max_entries = rng.choice([None, 5])
    case = Case(inputs, grace_ms, max_entries)
    general = case.run("bulk", chunk, monkeypatch, runs=False, batch_flush=False)
    assert not case.runs
    assert case.batched == 0
    for runs, batch_flush in SWITCHES:
        outcome = case.run("bulk", chunk, monkeypatch, runs=runs, batch_flush=batch_flush)
        assert outcome == general, (runs, batch_flush)
        if runs:
            assert max(case.runs) > 1  # runs of several records were taken
        if batch_flush and not headers:
            assert case.batched == len(outcome["logs"]["out"])  # it wrote every window
    # The case holds what it is about: late records dropped, output written.
    assert general["dropped"] > 0
    assert len(general["logs"]["out"]) > 50


@pytest.mark.parametrize("seed", range(4))
def test_the_plain_counts_runs_leave_what_the_loop_leaves(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    inputs = _inputs(rng, 400)
    chunk = rng.choice([7, 50, 1000])
    case = PlainCount(inputs, max_entries=rng.choice([None, 3]))
    general = case.run("bulk", chunk, monkeypatch, runs=False, batch_flush=False)
    assert not case.runs
    outcome = case.run("bulk", chunk, monkeypatch, runs=True, batch_flush=True)
    assert max(case.runs) > 1
    assert outcome == general
    # Null keys and values dropped and counted; every key written.
    assert general["dropped"] > 0
    assert len(general["logs"]["out"]) > 12


def test_the_drivers_one_record_at_a_time_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    # The driver flushes the cache after each record: a batch flush of one window each time.
    inputs = _inputs(random.Random(42), 300)
    case = Case(inputs)  # (a record with headers: its flush of one window goes the general way)
    general = case.run("driver", 1, monkeypatch, runs=False, batch_flush=False)
    outcome = case.run("driver", 1, monkeypatch, runs=True, batch_flush=True)
    assert case.batched > 50
    assert outcome == general
    assert general["dropped"] > 0


def test_a_program_off_the_batch_shape_keeps_the_general_flush(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A windowed count whose sink writes its values as strings: not the Long bytes the batch
    # encodes, so the batch flush must not apply (and the output is the strings).
    class StringOut(Case):
        def program(self, builder: StreamsBuilder) -> None:
            stream = builder.stream(["in1", "in2"], key_serde=Serdes.String())
            counts = (
                stream.group_by_key()
                .windowed_by(TimeWindows.of_size_with_no_grace(SIZE))
                .count(materialized=Materialized("counts"))
            )
            counts.to_stream().map_values(str).to("out", value_serde=Serdes.String())

    case = StringOut(_inputs(random.Random(3), 100))
    outcome = case.run("bulk", 50, monkeypatch, runs=True, batch_flush=True)
    assert case.batched == 0
    assert outcome["logs"]["out"]
    assert all(value.isdigit() for _, value, _, _ in outcome["logs"]["out"])


def test_encode_window_counts_refuses_what_it_cannot_encode() -> None:
    ok = [(("k", 0), (("k", 0), (1, 5), ()))]
    encoded = encode_window_counts(ok, 60_000, 0)
    assert encoded is not None
    pairs, stamps, records, expired = encoded
    assert pairs == [(bytes(8) + b"k" + bytes(8), (5).to_bytes(8, "big") + (1).to_bytes(8, "big"))]
    assert stamps == [5]
    assert records == [(b"k" + bytes(8), (1).to_bytes(8, "big"), 5)]
    assert expired == []
    # Headers, a deleted window, a key that is not a string, a count that is not an integer.
    for item in (
        (("k", 0), (("k", 0), (1, 5), (("h", b"x"),))),
        (("k", 0), (("k", 0), None, ())),
        ((b"k", 0), ((b"k", 0), (1, 5), ())),
        (("k", 0), (("k", 0), (1.5, 5), ())),
    ):
        assert encode_window_counts([*ok, item], 60_000, 0) is None
