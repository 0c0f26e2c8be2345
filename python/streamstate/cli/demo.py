"""The end-to-end thread through every part: Kafka broker → Spark's Kafka source → Rust.

It produces records into a real broker, reads them back with Spark's Kafka source, decodes keys
and values with the Rust extension inside ``mapInArrow`` (Arrow in, Arrow out) and checks every
record against what was produced. ``make demo`` runs it with a readable summary; the test suite
runs it as its end-to-end test.
"""

from __future__ import annotations

import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamstate.spark import decode_kafka_columns
from streamstate.testing import KafkaTestCluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["EndToEndResult", "expected_records", "run_end_to_end"]

_BASE_TIMESTAMP_MS = 1_700_000_000_000


@dataclass
class EndToEndResult:
    """What the end-to-end thread saw, and how long each leg took."""

    topic: str
    partitions: int
    produced: int
    read_by_spark: int
    mismatches: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Every produced record came back through Spark and Rust exactly as produced."""
        return not self.mismatches and self.produced == self.read_by_spark

    def summary(self) -> str:
        """A few human-readable lines for the demo."""
        lines = [
            f"topic {self.topic!r} ({self.partitions} partitions)",
            f"  produced to Kafka ............ {self.produced} records"
            f" in {self.seconds.get('produce', 0):.2f} s",
            f"  read by Spark, decoded in Rust {self.read_by_spark} records"
            f" in {self.seconds.get('spark', 0):.2f} s",
        ]
        if self.ok:
            lines.append("  every key, value, offset and timestamp matches: OK")
        else:
            lines.append(f"  MISMATCH ({len(self.mismatches)}):")
            lines.extend(f"    {m}" for m in self.mismatches[:10])
        return "\n".join(lines)


def expected_records(count: int) -> list[tuple[bytes, bytes, int]]:
    """The demo's records: a Long key, a UTF-8 string value and a timestamp each."""
    return [
        (
            struct.pack(">q", i),
            f"event-{i}".encode(),
            _BASE_TIMESTAMP_MS + i,
        )
        for i in range(count)
    ]


def run_end_to_end(
    cluster: KafkaTestCluster,
    spark: SparkSession,
    *,
    count: int = 10_000,
    partitions: int = 2,
) -> EndToEndResult:
    """Produces ``count`` records, reads them with Spark's Kafka source, decodes them in Rust
    and compares. Raises nothing on a mismatch; the result says what differed."""
    topic = cluster.create_topic(f"streamstate-e2e-{uuid.uuid4().hex[:8]}", partitions=partitions)
    records = expected_records(count)
    started = time.monotonic()
    positions = cluster.produce(topic, records)
    produce_seconds = time.monotonic() - started

    started = time.monotonic()
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    rows = decode_kafka_columns(raw, key="long", value="string").collect()
    spark_seconds = time.monotonic() - started

    expected: dict[tuple[int, int], tuple[int, str, int]] = {}
    for (key, value, ts), (partition, offset) in zip(records, positions, strict=True):
        expected[(partition, offset)] = (struct.unpack(">q", key)[0], value.decode(), ts)
    mismatches = _compare(expected, rows, topic)
    return EndToEndResult(
        topic=topic,
        partitions=partitions,
        produced=len(records),
        read_by_spark=len(rows),
        mismatches=mismatches,
        seconds={"produce": produce_seconds, "spark": spark_seconds},
    )


def _compare(
    expected: dict[tuple[int, int], tuple[int, str, int]], rows: list[Any], topic: str
) -> list[str]:
    mismatches = []
    seen = set()
    for row in rows:
        position = (row["partition"], row["offset"])
        seen.add(position)
        want = expected.get(position)
        got = (row["key"], row["value"], row["timestamp"])
        if row["topic"] != topic:
            mismatches.append(f"{position}: topic {row['topic']!r}, expected {topic!r}")
        elif want is None:
            mismatches.append(f"{position}: not produced, but read {got}")
        elif got != want:
            mismatches.append(f"{position}: read {got}, produced {want}")
    missing = sorted(set(expected) - seen)
    mismatches.extend(f"{p}: produced but not read" for p in missing[:10])
    return mismatches
