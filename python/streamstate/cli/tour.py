"""The tour (``streamstate demo``): a stateful app, a crash, a restore, queries, and Spark.

1. Produce sample events: user names to ``users`` and clicks to ``clicks``.
2. Run the example app (``streamstate/examples/click_counts.py``) in a child process with
   ``streamstate run`` until it has counted every click.
3. Kill it with SIGKILL and delete its state directory (a lost machine).
4. Start the same app again in this process: its stores restore from the changelog (a progress
   bar shows it), then it answers queries: the counts match the clicks produced.
5. Restore the app's changelog on Spark with ``restore_changelogs`` (one task per partition)
   and check that the stores Spark wrote hold the same counts.
"""

from __future__ import annotations

import collections
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app import State, StreamsApp
from streamstate.cli.restore import ProgressBar
from streamstate.spark import restore_changelogs
from streamstate.state.stores import PersistentKeyValueStore
from streamstate.state.topic_restore import store_directory
from streamstate.testing import KafkaTestCluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["TourResult", "run_tour"]

APP_FILE = Path(__file__).parent.parent / "examples" / "click_counts.py"
TOPICS = {"clicks": 2, "users": 2, "click-counts": 2}
USERS = 200


@dataclass
class TourResult:
    """What the tour saw; ``ok`` when every check held."""

    clicks: int = 0
    counted_by_app: int = 0
    keys_restored: int = 0
    spark_restored: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the restored app and the Spark restore both hold the exact counts."""
        return not self.mismatches and self.counted_by_app == self.clicks


def _say(message: str) -> None:
    print(message, flush=True)


def _fresh_topics(kafka: KafkaTestCluster) -> None:
    existing = kafka.admin.list_topics(timeout=30).topics
    doomed = [t for t in TOPICS if t in existing]
    if doomed:
        for future in kafka.admin.delete_topics(doomed, operation_timeout=30).values():
            future.result(timeout=30)
        deadline = time.monotonic() + 30
        while any(t in kafka.admin.list_topics(timeout=30).topics for t in doomed):
            if time.monotonic() > deadline:
                raise RuntimeError(f"topics {doomed} were not deleted in time")
            time.sleep(0.2)
    for topic, partitions in TOPICS.items():
        kafka.create_topic(topic, partitions=partitions)


def run_tour(
    kafka: KafkaTestCluster, spark: SparkSession | None, *, clicks: int = 50_000
) -> TourResult:
    """Runs the tour against ``kafka`` (and ``spark`` for step 5, skipped when ``None``)."""
    result = TourResult(clicks=clicks)
    work = Path(tempfile.mkdtemp(prefix="streamstate-tour-"))
    app_id = f"click-counts-{uuid.uuid4().hex[:6]}"
    env = {
        **os.environ,
        "STREAMSTATE_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "STREAMSTATE_STATE_DIR": str(work / "app"),
        "STREAMSTATE_APPLICATION_ID": app_id,
    }
    try:
        _say(f"1. producing {USERS} users and {clicks:,} clicks")
        _fresh_topics(kafka)
        kafka.produce("users", [(b"user-%d" % u, b"name-%d" % u) for u in range(USERS)])
        keys = [b"user-%d" % ((i * 7919) % USERS) for i in range(clicks)]
        kafka.produce("clicks", [(k, b"click") for k in keys])
        expected = collections.Counter(keys)

        _say(f"2. running {APP_FILE.name} with `streamstate run` (application.id {app_id})")
        child = subprocess.Popen(
            [sys.executable, "-m", "streamstate", "run", str(APP_FILE)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            _wait_for_sink(kafka, expected)
            _say("   every click counted; the app's last output per user matches")
            # At-least-once, as in Kafka Streams: records processed after the last commit are
            # processed again after a crash, so a count would double them. The tour kills the
            # app once its offsets are committed, to show the restore with exact counts.
            _wait_for_commit(kafka, app_id, "clicks")
            _say("3. kill -9 the app (its offsets are committed) and delete its state directory")
            child.send_signal(signal.SIGKILL)
            child.wait(30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            if child.stdout is not None:
                child.stdout.close()
        shutil.rmtree(work / "app", ignore_errors=True)

        _say("4. starting the app again: its store restores from the changelog")
        for name in ("STREAMSTATE_BOOTSTRAP_SERVERS", "STREAMSTATE_STATE_DIR"):
            os.environ[name] = env[name]
        os.environ["STREAMSTATE_APPLICATION_ID"] = app_id
        bar = ProgressBar(sys.stdout)
        app: StreamsApp = runpy.run_path(str(APP_FILE), run_name="__streamstate_app__")["app"]
        app.set_global_state_restore_listener(bar)
        app.start()
        if not app.wait_for_state(State.RUNNING, 120):
            raise RuntimeError(f"the restarted app did not reach RUNNING (state {app.state})")
        bar.finish()
        counts = {k: int(v) for k, v in app.store("counts").all()}
        result.counted_by_app = sum(counts.values())
        result.keys_restored = len(counts)
        sample = sorted(counts)[:3]
        for key in sample:
            value = app.store("counts").get(key)
            _say(f"   query counts[{key.decode()}] = {value.decode() if value else None}")
        if counts != dict(expected):
            result.mismatches.append("the restored app's counts differ from the clicks produced")
        app.close(60)

        if spark is not None:
            changelog = f"{app_id}-counts-changelog"
            _say(f"5. restoring {changelog} on Spark ({spark.sparkContext.master})")
            rows = restore_changelogs(
                spark,
                bootstrap_servers=kafka.bootstrap_servers,
                topic=changelog,
                state_dir=work / "spark",
            )
            result.spark_restored = sum(int(r["restored"]) for r in rows)
            spark_counts: dict[bytes, int] = {}
            for row in rows:
                directory = store_directory(work / "spark", changelog, int(row["partition"]))
                with PersistentKeyValueStore(changelog, directory) as store:
                    spark_counts.update({k: int(v) for k, v in store.all()})
                _say(
                    f"   partition {row['partition']}: {row['restored']:,} changelog records "
                    f"in {row['seconds']:.2f} s"
                )
            if spark_counts != dict(expected):
                result.mismatches.append("the stores restored on Spark differ from the clicks")
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _wait_for_commit(kafka: KafkaTestCluster, group: str, topic: str) -> None:
    ends = kafka.end_offsets(topic)
    probe = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    deadline = time.monotonic() + 60
    try:
        while True:
            committed = probe.committed([KafkaTopicPartition(topic, p) for p in ends], timeout=30)
            if all(c.offset == ends[c.partition] for c in committed):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the app did not commit every offset of {topic!r} in time")
            time.sleep(0.2)
    finally:
        probe.close()


def _wait_for_sink(kafka: KafkaTestCluster, expected: collections.Counter[bytes]) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"tour-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["click-counts"])
    latest: dict[bytes, int] = {}
    deadline = time.monotonic() + 180
    try:
        while latest != dict(expected):
            if time.monotonic() > deadline:
                raise RuntimeError("the app did not count every click within 180 s")
            for message in consumer.consume(5000, 0.5):
                key, value = message.key(), message.value()
                if message.error() is None and key is not None and value is not None:
                    count = int(value.rsplit(b"=", 1)[1])
                    latest[key] = max(latest.get(key, 0), count)
    finally:
        consumer.close()
