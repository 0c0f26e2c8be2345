"""Chaos: a large backlog behind a slow processor. Back-pressure
(``buffered.records.per.partition``) keeps the app's memory bounded while it works through the
backlog; every record is processed.

``make test`` runs the quick form (100k records of 1 kB); ``make chaos-full`` sets
``STREAMSTATE_CHAOS_FULL=1`` for the full one (1M records of 1 kB, a 1 GB backlog). The peak RSS
of the app's process is printed (run with ``-s`` to see it)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from confluent_kafka import Producer
from tests.chaos._helpers import start_app_process

from streamstate.kafka_local import KafkaTestCluster

FULL = os.environ.get("STREAMSTATE_CHAOS_FULL") == "1"
RECORDS = 1_000_000 if FULL else 100_000
# The interpreter, the extension and librdkafka's prefetch (64 MiB per consumer by default)
# come to ~150 MB; holding a 1 GB backlog would need far more.
PEAK_RSS_LIMIT_MB = 400


def test_a_backlog_behind_a_slow_processor_keeps_memory_bounded(
    kafka: KafkaTestCluster, tmp_path: Path
) -> None:
    source, sink = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    producer = Producer(
        # Idempotent: the test counts every record processed, and a plain producer resends a
        # whole batch when a request times out on a loaded machine.
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "enable.idempotence": True,
        }
    )
    value = b"x" * 1_000
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(source, value, b"k%d" % (i % 1_000))
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    app = start_app_process(
        kafka.bootstrap_servers,
        source,
        sink,
        f"backlog-{uuid.uuid4().hex[:8]}",
        tmp_path,
        "--slow-every",
        "50",
        "--expect",
        str(RECORDS),
    )
    try:
        out, _ = app.communicate(timeout=1_800 if FULL else 600)
    finally:
        if app.poll() is None:
            app.kill()
    report = json.loads(out.strip().splitlines()[-1])
    print(f"\nbacklog of {RECORDS} records: peak RSS {report.get('peak_rss_mb')} MB")
    assert app.returncode == 0, report
    assert report["processed"] == RECORDS
    assert report["peak_rss_mb"] < PEAK_RSS_LIMIT_MB, report
