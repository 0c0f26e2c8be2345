"""Crash safety of ``restore_topic``: SIGKILL the restoring process at random moments.

Each round appends puts and deletes to a two-partition changelog, starts a restore of it into
the same state directory in a child process, kills that process with SIGKILL at a random moment
(while it wipes, restores, flushes or writes a checkpoint), then runs the restore to completion
and compares every store with a plain-Python replay of the whole changelog. The child restores
in small fetches and checkpoints every few milliseconds, so kills land between and inside many
batch writes and checkpoint writes. Some rounds also delete records past the checkpoints, which
forces a wipe and a restore from the new log start in the killed run.

A second test kills the restore inside the bulk path's ingestion of a sorted run (see its
docstring and ``INGEST_CHILD``).

Kills are placed by progress, not by time: the child reports each restored batch, and the parent
kills it after a random number of them (plus a random sub-millisecond delay), so a kill lands in a
running restore however fast the machine or the fetch path is.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from streamstate import PersistentKeyValueStore
from streamstate.kafka_local import KafkaTestCluster
from streamstate.topic_restore import restore_topic, store_directory

KILLS = 20
PARTITIONS = 2

CHILD = """
import sys
from streamstate import StateRestoreListener
from streamstate.topic_restore import restore_topic
bootstrap, topic, state_dir = sys.argv[1:4]

class Progress(StateRestoreListener):
    def on_batch_restored(self, tp, store_name, batch_end_offset, num_restored):
        print("batch", flush=True)

print("ready", flush=True)
restore_topic(
    bootstrap,
    topic,
    state_dir,
    checkpoint_interval_s=0.005,
    consumer_config={"max.partition.fetch.bytes": 4096},
    restore_listener=Progress(),
    max_poll_records=1000,
)
print("done", flush=True)
"""
# Records per produced batch (~4 KB, one fetch of the child's). Every round appends at least
# 1,000 records per partition, and the child polls at most 1,000 records at a time (the Rust
# fetch would otherwise read a whole round in one 100 ms poll), so a round's restore reports
# several batches: a kill after a few of them lands in a running restore.
RECORDS_PER_BATCH = 100
MAX_BATCHES_BEFORE_KILL = 6

Entry = tuple[bytes, bytes | None]


def contents(state_dir: Path, topic: str, partition: int) -> dict[bytes, bytes]:
    directory = store_directory(state_dir, topic, partition)
    with PersistentKeyValueStore(topic, directory) as store:
        return dict(store.all())


def test_sigkill_at_random_moments_never_leaves_wrong_state(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    rng = random.Random(20261122)
    topic = kafka.create_topic(partitions=PARTITIONS)
    state_dir = tmp_path / "state"
    # The replayed changelog: the state every completed restore must end with.
    expected: list[dict[bytes, bytes]] = [{} for _ in range(PARTITIONS)]
    log_start = [0] * PARTITIONS
    killed_while_running = 0
    rounds = 0
    while killed_while_running < KILLS:
        rounds += 1
        assert rounds <= KILLS + KILLS // 4, (
            f"only {killed_while_running} kills hit a running restore"
        )
        for p in range(PARTITIONS):
            entries: list[Entry] = []
            for _ in range(rng.randrange(1_000, 6_000)):
                key = b"k%04d" % rng.randrange(400)
                value = None if rng.random() < 0.15 else rng.randbytes(rng.randrange(1, 60))
                entries.append((key, value))
            # Produced in chunks of one small record batch each: the child restores them in
            # many fetches, so it reports many batches and a kill after a few lands mid-restore.
            offsets = [
                o
                for i in range(0, len(entries), RECORDS_PER_BATCH)
                for o in kafka.produce(topic, entries[i : i + RECORDS_PER_BATCH], partition=p)
            ]
            for key, value in entries:
                if value is None:
                    expected[p].pop(key, None)
                else:
                    expected[p][key] = value
            if rounds % 5 == 0 and p == 0:
                # Cut the log past what the last round checkpointed: the next restore has to
                # wipe the store and rebuild it from the new log start, and is killed doing so.
                cut = offsets[len(offsets) // 2][1]
                log_start[p] = kafka.delete_records(topic, p, cut)
                expected[p] = {}
                for key, value in entries[len(entries) // 2 :]:
                    if value is None:
                        expected[p].pop(key, None)
                    else:
                        expected[p][key] = value

        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, kafka.bootstrap_servers, topic, str(state_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            # 0 batches: the kill lands in the start-up (a wipe, the first fetch).
            line = ""
            for _ in range(rng.randrange(MAX_BATCHES_BEFORE_KILL + 1)):
                line = child.stdout.readline().strip()
                if line != "batch":
                    break
            if line in ("", "batch"):
                time.sleep(rng.uniform(0.0, 0.001))
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
                killed_while_running += 1
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            if child.stdout is not None:
                child.stdout.close()

        results = restore_topic(kafka.bootstrap_servers, topic, state_dir)
        for p in range(PARTITIONS):
            got = contents(state_dir, topic, p)
            differing = sorted(
                k for k in set(got) | set(expected[p]) if got.get(k) != expected[p].get(k)
            )
            assert not differing, (
                f"round {rounds}: partition {p} holds {len(got)} keys, expected "
                f"{len(expected[p])}; {len(differing)} differ, first {differing[0]!r}"
            )
            assert results[p].end_offset == kafka.end_offsets(topic)[p]
            assert results[p].start_offset >= log_start[p]


# The bulk path (docs/restoration.md, "The bulk path"): a restore gathers its records and
# writes them as sorted runs straight into the store's tables. The child below slows each
# record written into a run (a test-only hook of the Rust store) and appends a line to a marker
# file as each run starts, so the parent kills it inside an ingestion by construction.
INGEST_PAUSE_US = 400
INGEST_KILLS = 6
INGEST_CHILD = """
import sys
from streamstate.topic_restore import restore_topic
bootstrap, topic, state_dir = sys.argv[1:4]
restore_topic(bootstrap, topic, state_dir, checkpoint_interval_s=600)
print("done", flush=True)
"""


def _wait_for_run(marker: Path, child: subprocess.Popen[str], timeout: float) -> None:
    """Waits until the child has started writing a run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.exists() and "run" in marker.read_text():
            return
        assert child.poll() is None, "the child ended without writing a run"
        time.sleep(0.002)
    raise AssertionError(f"the child wrote no run within {timeout} s")


def test_sigkill_inside_an_ingestion_never_leaves_wrong_state(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    """Each round appends 3-5 MB to the changelog; the child restores it (from its checkpoint,
    or from scratch after a wipe) and, checkpointing only at the end, writes what it read as
    one run when it catches up (>= 1 MiB: the bulk path); it is killed inside that run. The
    next restore must end with exactly the changelog's last writes. Round 1 ingests into an
    empty store (deletes left out of the run); later rounds onto a store that holds data
    (deletes written as tombstones); round 3 deletes records past the checkpoint, so the killed
    run wipes the store first and ingests onto the wiped one."""
    rng = random.Random(20261126)
    topic = kafka.create_topic(partitions=1)
    state_dir = tmp_path / "state"
    expected: dict[bytes, bytes] = {}
    for rounds in range(1, INGEST_KILLS + 1):
        # 1 kB values over 5,000 keys: a round's run holds >= 1,300 distinct keys, so it takes
        # >= 1,300 * 0.4 ms = 0.52 s in the child.
        entries: list[Entry] = []
        for _ in range(rng.randrange(3_000, 5_000)):
            key = b"k%05d" % rng.randrange(5_000)
            value = None if rng.random() < 0.15 else rng.randbytes(1000)
            entries.append((key, value))
        offsets = [
            o
            for i in range(0, len(entries), RECORDS_PER_BATCH)
            for o in kafka.produce(topic, entries[i : i + RECORDS_PER_BATCH], partition=0)
        ]
        replayed = entries
        if rounds == 3:
            cut = offsets[len(offsets) // 2][1]
            kafka.delete_records(topic, 0, cut)
            expected = {}
            replayed = entries[len(entries) // 2 :]
        for key, value in replayed:
            if value is None:
                expected.pop(key, None)
            else:
                expected[key] = value
        marker = tmp_path / f"ingest-{rounds}.txt"
        child = subprocess.Popen(
            [sys.executable, "-c", INGEST_CHILD, kafka.bootstrap_servers, topic, str(state_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={
                **os.environ,
                "STREAMSTATE_TEST_INGEST_PAUSE_US": str(INGEST_PAUSE_US),
                "STREAMSTATE_TEST_INGEST_MARKER": str(marker),
            },
        )
        try:
            _wait_for_run(marker, child, timeout=120)
            time.sleep(rng.uniform(0.0, 0.3))
            assert child.poll() is None, "the child finished a run it had just started"
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=60)
            assert child.stdout is not None
            assert "done" not in child.stdout.read()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            if child.stdout is not None:
                child.stdout.close()

        restore_topic(kafka.bootstrap_servers, topic, state_dir)
        got = contents(state_dir, topic, 0)
        differing = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
        assert not differing, (
            f"round {rounds}: the store holds {len(got)} keys, expected {len(expected)}; "
            f"{len(differing)} differ, first {differing[0]!r}"
        )
