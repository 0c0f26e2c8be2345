"""Recovery after a SIGKILL under exactly-once: restart to RUNNING with the store kept (the tail
of the changelog past the checkpoint restored) against a full restore of the changelog (what
Kafka Streams does after an unclean shutdown under EOS: it wipes the task's state and restores
it from scratch).

Once per module, a child process runs a table app (each key's latest value) under
``exactly_once_v2`` over 1M records of 100-byte values with distinct keys (quick mode: 50k) on
one partition, so its persistent, logged store ``table`` holds 1M keys (~110 MB) and its
changelog 1M records; when every offset is committed the child is killed
with SIGKILL and its state directory kept as it was left. Each round starts from a copy of that
directory and times a :class:`~streamstate.StreamsApp` (same application id, in this process)
from ``start()`` until it is ``RUNNING`` (joining the group, restoring, nothing to process):

* ``eos-restart-tail-only``: the directory as the kill left it (store and checkpoint);
* ``eos-restart-full-restore``: the same with the task's store and ``.checkpoint`` removed, the
  wipe Kafka Streams makes; the app restores the whole changelog (read_committed).

A restore listener counts what each round restored; both stores are checked after the rounds.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from benches._common import size
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app import State, StreamsApp, Topology
from streamstate.checkpoint import OffsetCheckpoint
from streamstate.errors import CorruptCheckpointError
from streamstate.kafka_local import KafkaTestCluster
from streamstate.state.restorer import StateRestoreListener

N = size(1_000_000)
ROUNDS = 3
# A value of the size issue 12's restore benchmarks use: the state is ~110 MB at full size.
VALUE_BYTES = 100


def _value(i: int) -> bytes:
    return (b"%07d" % i) * (VALUE_BYTES // 7) + b"." * (VALUE_BYTES % 7)


_CHILD = """
import sys, time
from streamstate.app import StreamsApp, Topology
bootstrap, source, sink, app_id, state_dir = sys.argv[1:6]
topology = Topology().add_store("table")

@topology.processor(sources=[source], stores=["table"], sinks=[sink])
def latest(ctx, record):
    ctx.store("table").put(record.key, record.value)
    ctx.send(sink, record.key, record.value[:8])

app = StreamsApp(topology, {
    "application.id": app_id, "bootstrap.servers": bootstrap, "state.dir": state_dir,
    "processing.guarantee": "exactly_once_v2",
})
app.start()
print("started", flush=True)
while True:
    time.sleep(1)
"""


class Built:
    """The killed child's application id, topics and state directory."""

    def __init__(self, app_id: str, source: str, sink: str, state_dir: Path) -> None:
        self.app_id, self.source, self.sink, self.state_dir = app_id, source, sink, state_dir


def _committed(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offset in partition 0 of ``topic`` (-1: none, or not known now)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        (tp,) = consumer.committed([KafkaTopicPartition(topic, 0)], timeout=30)
        return int(tp.offset)
    except KafkaException:
        return -1  # the coordinator is moving or loading: asked again
    finally:
        consumer.close()


def _checkpointed(task_dir: Path) -> int:
    """The changelog offset the task's checkpoint holds (-1: none yet, or being replaced)."""
    try:
        offsets = OffsetCheckpoint(task_dir / ".checkpoint").read()
    except (OSError, CorruptCheckpointError):
        return -1
    return max(offsets.values(), default=-1)


def _group_empty(kafka: KafkaTestCluster, group: str) -> bool:
    (future,) = kafka.admin.describe_consumer_groups([group]).values()
    try:
        return not future.result(timeout=30).members
    except Exception:
        return False


def _wait(condition: Any, what: str, timeout: float = 1800.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def built(kafka: KafkaTestCluster) -> Iterator[Built]:
    app_id = f"bench-eos-recovery-{uuid.uuid4().hex[:8]}"
    source = kafka.create_topic(f"{app_id}-in", partitions=1)
    sink = kafka.create_topic(f"{app_id}-out", partitions=1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 50})
    for i in range(N):
        while True:
            try:
                producer.produce(source, _value(i), b"key-%07d" % i)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    with tempfile.TemporaryDirectory(prefix="bench-eos-recovery-") as d:
        state_dir = Path(d) / "killed"
        argv = [str(state_dir)]
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, kafka.bootstrap_servers, source, sink, app_id, *argv],
            stdout=subprocess.DEVNULL,
        )
        try:
            _wait(
                lambda: _committed(kafka.bootstrap_servers, app_id, source) >= N,
                "the child committing every record",
            )
            # The tail-only rounds measure a restore from a checkpoint near the end: the kill
            # waits for the child to have written one past 90% of the changelog (a busy
            # machine otherwise let the kill land before the first checkpoint, and every
            # round restored everything).
            _wait(
                lambda: _checkpointed(state_dir / app_id / "0") >= N * 9 // 10,
                "the child checkpointing most of its changelog",
            )
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(60)
        # The dead member leaves the group when its session times out; the rounds must not
        # wait for that.
        _wait(lambda: _group_empty(kafka, app_id), "the killed member's session to end", 120)
        yield Built(app_id, source, sink, state_dir)


class _Restored(StateRestoreListener):
    def __init__(self) -> None:
        self.records = 0

    def on_restore_end(self, tp: Any, store_name: str, total_restored: int) -> None:
        self.records += total_restored


def _bench_restart(benchmark: Any, kafka: KafkaTestCluster, built: Built, wipe: bool) -> None:
    topology = Topology().add_store("table")

    @topology.processor(sources=[built.source], stores=["table"], sinks=[built.sink])
    def never(ctx: object, record: object) -> None:
        raise AssertionError("every record was committed before the kill")

    apps: list[StreamsApp] = []
    listeners: list[_Restored] = []
    work = Path(tempfile.mkdtemp(prefix="bench-eos-restart-"))

    def setup() -> None:
        for app in apps:
            app.close(60)
        shutil.rmtree(work / "state", ignore_errors=True)
        shutil.copytree(built.state_dir, work / "state")
        if wipe:
            task = work / "state" / built.app_id / "0"
            shutil.rmtree(task / "table")
            (task / ".checkpoint").unlink()
        listeners.append(_Restored())
        config = {
            "application.id": built.app_id,
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": str(work / "state"),
            "processing.guarantee": "exactly_once_v2",
        }
        apps.append(StreamsApp(topology, config, restore_listener=listeners[-1]))

    def run() -> None:
        app = apps[-1]
        app.start()
        assert app.wait_for_state(State.RUNNING, 1800), app.state

    try:
        benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1)
        store = apps[-1].store("table")
        assert store.get(b"key-%07d" % (N - 1)) == _value(N - 1)
        assert store.get(b"key-%07d" % 0) == _value(0)
        restored = [r.records for r in listeners]
        benchmark.extra_info["restored_per_round"] = restored
        if wipe:
            assert all(r == N for r in restored), restored
        else:
            assert all(r < N // 10 for r in restored), restored
    finally:
        for app in apps:
            app.close(60)
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.benchmark(group="eos-recovery")
def bench_eos_restart_tail_only(benchmark: Any, kafka: KafkaTestCluster, built: Built) -> None:
    _bench_restart(benchmark, kafka, built, wipe=False)


@pytest.mark.benchmark(group="eos-recovery")
def bench_eos_restart_full_restore(benchmark: Any, kafka: KafkaTestCluster, built: Built) -> None:
    _bench_restart(benchmark, kafka, built, wipe=True)
