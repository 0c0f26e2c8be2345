"""The SIGKILL loop: a counting app (``count_app.py``, a child process) killed at random moments,
restarted each time, then left to finish.

Each round adds input (50 keys over two partitions), starts the child and kills it with SIGKILL
once a condition holds, never after a duration (the machine's speed decides nothing):

* ``process``: once the child reports a randomly chosen number of records processed in this run
  (its transaction, or its at-least-once interval, is open with records in it);
* ``before``: inside its K-th commit with offsets, the records written and the offsets handed
  over but not committed (the child stops itself there and says so; see ``count_app.py``);
* ``after``: inside its K-th commit, once the broker has committed and before the runtime applies
  the commit to the store and the checkpoint.

While the test waits for the condition it keeps adding a few records, so a commit with offsets
always comes. After each kill the checkpoint left on disk is read, and the restart's restore
listener must start right past it, once (no wipe), restoring the changelog's tail only. At the
end the sink is read ``read_committed``:

* under ``exactly_once_v2`` every key's counts are exactly 1..N, each once, in order, and the
  store (opened after a clean close) holds N;
* under ``at_least_once`` the same loop must find duplicates (the records processed between the
  last commit and a kill are counted again): proof that the harness detects them.

``make test`` runs a quick form (a few kills); ``make chaos-full`` (``STREAMSTATE_CHAOS_FULL=1``)
the full one, the same code with 24 kills.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.chaos._counting import PARTITIONS, Child, CommittedSink, Input, exact, reached
from tests.chaos._helpers import app_args

from streamstate import PersistentKeyValueStore
from streamstate.kafka_local import KafkaTestCluster
from streamstate.records import TopicPartition
from streamstate.state.checkpoint import OffsetCheckpoint

FULL = os.environ.get("STREAMSTATE_CHAOS_FULL") == "1"
KILLS = 24 if FULL else 4
SEED = 20261123


def _checkpoints(app_dir: Path) -> dict[int, int]:
    """The changelog offset in each task's ``.checkpoint`` now (tasks without one left out)."""
    found: dict[int, int] = {}
    for p in range(PARTITIONS):
        offsets = OffsetCheckpoint(app_dir / str(p) / ".checkpoint").read()
        for tp, offset in offsets.items():
            assert isinstance(tp, TopicPartition)
            found[tp.partition] = offset
    return found


def _plan(rng: random.Random) -> list[str]:
    kinds = ["process", "before", "after"] * (KILLS // 3 + 1)
    plan = kinds[:KILLS]
    rng.shuffle(plan)
    return plan


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_sigkill_loop_counts_each_record_once(
    kafka: KafkaTestCluster, tmp_path: Path, guarantee: str
) -> None:
    rng = random.Random(SEED)
    source = kafka.create_topic(partitions=PARTITIONS)
    sink = kafka.create_topic(partitions=PARTITIONS)
    app_id = f"kill-loop-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    app_dir = state_dir / app_id
    base = app_args(kafka.bootstrap_servers, source, sink, app_id, state_dir)
    base += ["--guarantee", guarantee]
    data = Input(kafka, source, rng)
    trickle = lambda: data.add(10)  # noqa: E731 (keeps commits with offsets coming)
    reader = CommittedSink(kafka.bootstrap_servers, sink)
    restores: list[dict[str, Any]] = []  # per restart: what the listener reported
    kinds_done: list[str] = []
    previous_checkpoints: dict[int, int] = {}
    try:
        for kind in _plan(rng):
            data.add(rng.randrange(100, 400))
            args = list(base)
            if kind != "process":
                args += ["--stall", kind, "--stall-at", str(rng.randint(1, 3))]
            child = Child(*args)
            try:
                if kind == "process":
                    target = rng.randrange(1, 6) * 50
                    child.wait_for(
                        lambda e, t=target: e["event"] == "progress" and e["processed"] >= t,
                        f"{target} records processed",
                        trickle,
                    )
                else:
                    child.wait_for(lambda e: e["event"] == "stalled", f"a {kind} stall", trickle)
            finally:
                child.kill()
            kinds_done.append(kind)
            restores.append(_restore_report(child.seen, previous_checkpoints, kinds_done[-2:-1]))
            previous_checkpoints = _checkpoints(app_dir)

        # The last run: no kill; it finishes every key and closes cleanly (SIGTERM).
        final = Child(*base)
        try:
            final.until(
                lambda: reached(reader.poll(), data.per_key), "every key's last count in the sink"
            )
        finally:
            assert final.stop() == 0, final.seen[-3:]
        restores.append(_restore_report(final.seen, previous_checkpoints, kinds_done[-1:]))
    finally:
        reader.close()

    reader = CommittedSink(kafka.bootstrap_servers, sink)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not reached(reader.poll(), data.per_key):
            pass
        counts = {k: list(v) for k, v in reader.poll().items()}
    finally:
        reader.close()
    stored = _store_contents(app_dir)
    wrong = exact(counts, data.per_key)
    print(
        f"\n{guarantee}: seed {SEED}, {len(kinds_done)} kills {kinds_done}, "
        f"{sum(data.per_key.values())} records, {len(wrong)} of {len(data.per_key)} keys "
        f"not exactly 1..N; restores per restart: {restores}"
    )

    # Every restart restored only the changelog past the checkpoint the kill left: it started
    # once (no wipe) right after it, and applied no more than the records between it and the end.
    for i, report in enumerate(restores):
        for p, (start, end, restored, starts) in report["partitions"].items():
            assert starts == 1, f"restart {i}: partition {p} restore started {starts} times"
            assert restored <= end - start, f"restart {i}: partition {p}: {report}"
            if p in report["checkpoints"]:
                assert start == report["checkpoints"][p] + 1, f"restart {i}: {report}"
        if guarantee == "exactly_once_v2" and report["after"] == ["after"]:
            # Killed between the broker's commit and the store's: the restart must restore
            # that transaction's changelog records (the tail), and no more.
            assert any(r[2] > 0 for r in report["partitions"].values()), (
                f"restart {i}: nothing restored after a kill past the broker's commit: {report}"
            )

    if guarantee == "at_least_once":
        # The bug the loop exists to catch: counts repeated after a kill.
        assert wrong, "no duplicates under at_least_once: the kills caught no open interval"
        return
    assert not wrong, f"keys whose committed counts are not exactly 1..N: {wrong}"
    assert stored == {k: n for k, n in data.per_key.items()}, "the store does not hold N"


def _store_contents(app_dir: Path) -> dict[bytes, int]:
    contents: dict[bytes, int] = {}
    for p in range(PARTITIONS):
        directory = app_dir / str(p) / "counts"
        if directory.exists():
            with PersistentKeyValueStore("counts", directory) as store:
                contents.update((k, int(v)) for k, v in store.all())
    return contents


def _restore_report(
    events: list[dict[str, Any]], checkpoints: dict[int, int], after_kill: list[str]
) -> dict[str, Any]:
    """A run's restore events per changelog partition, the checkpoints it started from, and
    the kind of kill before it."""
    partitions: dict[int, list[int]] = {}
    for e in events:
        if e["event"] != "restore":
            continue
        entry = partitions.setdefault(e["partition"], [0, 0, 0, 0])
        if e["phase"] == "start":
            entry[0], entry[1] = e["start"], e["end"]
            entry[3] += 1
        else:
            entry[2] = e["restored"]
    return {"partitions": partitions, "checkpoints": dict(checkpoints), "after": after_kill}
