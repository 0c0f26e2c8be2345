"""Restoring every partition of a changelog topic in parallel on Spark, one task per partition.

Both feeds write what ``streamstate restore`` writes (``state_dir/NAME/<partition>/``: a
persistent store and its ``.checkpoint``) with the same Rust ``process_next``:

* ``feed="consumer"`` (the default): each Spark task restores its partition with
  :func:`streamstate.topic_restore.restore_topic`, i.e. the full ``StoreChangelogReader``
  (its own restore consumer — the changelog fetch in Rust unless ``fetch="confluent"`` —,
  checkpoint handling, invalid-offset wipes, stall timeout): the same path as ``streamstate
  restore``, with Spark's tasks in place of the fetcher's threads. A retried task resumes from
  the checkpoint its failed attempt left.
* ``feed="kafka_source"``: the driver reads the checkpoints and the offsets, Spark's Kafka
  source reads each partition's range, and each task hands the Arrow batches it receives
  straight to ``process_next``.

``docs/restoration.md`` has the measurements that made ``consumer`` the default: the Kafka
source adds a JVM-to-Python Arrow hop per batch and a Spark job plan to the same Kafka reads.

The state directory must be reachable at the same path from the driver and every executor (a
local session, or a shared filesystem on a cluster).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from streamstate.spark._pyspark_compat import quiet_pandas3_warning

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["restore_changelogs"]

_FEEDS = ("consumer", "kafka_source")
_RESULT_SCHEMA = (
    "partition int, start_offset bigint, end_offset bigint, restored bigint, seconds double"
)
_ARROW_RESULT = pa.schema(
    [
        ("partition", pa.int32()),
        ("start_offset", pa.int64()),
        ("end_offset", pa.int64()),
        ("restored", pa.int64()),
        ("seconds", pa.float64()),
    ]
)


@dataclass(frozen=True)
class _Job:
    """What every task needs to know (pickled into the tasks' closures)."""

    bootstrap_servers: str
    topic: str
    state_dir: str
    name: str
    eos: bool
    fetch: str | None = None
    # The connection settings (security.protocol, sasl.*, ssl.*) of every client.
    connection: tuple[tuple[str, Any], ...] = ()


def restore_changelogs(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    topic: str,
    state_dir: str | Path,
    store_name: str | None = None,
    partitions: Iterable[int] | None = None,
    eos: bool = False,
    feed: str = "consumer",
    fetch: str | None = None,
    client_config: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Restores the partitions of changelog ``topic`` (default: all) into
    ``state_dir/NAME/<partition>/`` in parallel, one Spark task per partition.

    ``NAME`` is ``store_name``, by default the topic; ``eos`` reads committed records only. Returns
    ``streamstate restore --json``'s per-partition dicts (``partition``, ``start_offset``,
    ``end_offset``, ``restored``, ``seconds``), in partition order. A task's failure fails the
    job with the task's error (a ``ProcessorStateError`` naming the partition, for instance).
    ``fetch`` chooses the read path of ``feed="consumer"`` (``"rust"``, the default, or
    ``"confluent"``; see :func:`~streamstate.clients.restore_consumer.open_restore_consumer`).
    ``client_config`` (e.g. the app's config) gives the connection settings of a secured
    cluster (``security.protocol``, ``sasl.*``, ``ssl.*``) to every client the restore opens:
    the metadata lookup, the restore consumers, and with ``feed="kafka_source"`` Spark's Kafka
    source (SASL PLAIN/SCRAM and ``ssl.ca.location`` are translated to its options).
    """
    from streamstate.clients.config import connection_settings
    from streamstate.state.topic_restore import select_partitions

    if feed not in _FEEDS:
        raise ValueError(f"feed must be one of {_FEEDS}, not {feed!r}")
    name = store_name or topic
    connection = connection_settings(client_config or {})
    if feed == "kafka_source":
        _source_options(connection)  # refused before anything is read
    wanted = select_partitions(bootstrap_servers, topic, partitions, client_config=connection)
    job = _Job(
        bootstrap_servers,
        topic,
        str(Path(state_dir).absolute()),
        name,
        eos,
        fetch,
        tuple(sorted(connection.items())),
    )
    rows = (_by_consumer if feed == "consumer" else _by_kafka_source)(spark, job, wanted)
    return sorted(rows, key=lambda r: int(r["partition"]))


def _by_consumer(spark: SparkSession, job: _Job, wanted: list[int]) -> list[dict[str, Any]]:
    def restore(assigned: Iterable[int]) -> Iterator[dict[str, Any]]:
        from streamstate.state.topic_restore import restore_topic

        for partition in assigned:
            for result in restore_topic(
                job.bootstrap_servers,
                job.topic,
                job.state_dir,
                store_name=job.name,
                partitions=[partition],
                eos=job.eos,
                fetch=job.fetch,
                consumer_config=dict(job.connection),
                # One Spark task, one partition, one core: the fetcher needs no more threads.
                parallelism=1,
            ):
                yield result.to_dict()

    rdd = spark.sparkContext.parallelize(wanted, numSlices=len(wanted))
    spark.sparkContext.setJobDescription(f"streamstate: restore {job.topic}")
    return list(rdd.mapPartitions(restore).collect())


def _by_kafka_source(spark: SparkSession, job: _Job, wanted: list[int]) -> list[dict[str, Any]]:
    ranges = _plan(job, wanted)
    topic, name, state_dir = job.topic, job.name, job.state_dir
    results = {p: _row(p, start, end, 0, 0.0) for p, (start, end) in ranges.items()}
    to_read = {p: r for p, r in ranges.items() if r[0] < r[1]}
    if not to_read:
        return list(results.values())

    def offsets(which: int) -> str:
        return json.dumps({topic: {str(p): r[which] for p, r in to_read.items()}})

    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", job.bootstrap_servers)
        .options(**_source_options(dict(job.connection)))
        .option("assign", json.dumps({topic: sorted(to_read)}))
        .option("startingOffsets", offsets(0))
        .option("endingOffsets", offsets(1))
        # Compaction gaps and transaction markers leave offsets without records: expected in a
        # changelog, not data loss.
        .option("failOnDataLoss", "false")
        .option("kafka.isolation.level", "read_committed" if job.eos else "read_uncommitted")
        .load()
        .select("topic", "partition", "offset", "key", "value")
    )

    def restore(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from streamstate.records import TopicPartition
        from streamstate.state.checkpoint import OffsetCheckpoint
        from streamstate.state.stores import PersistentKeyValueStore, process_next
        from streamstate.state.topic_restore import CHECKPOINT_FILE, store_directory

        started = time.monotonic()
        store: PersistentKeyValueStore | None = None
        partition = -1
        last, restored = -1, 0
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                parts = batch.column("partition").unique().to_pylist()
                if store is None:
                    partition = int(parts[0])
                    store = PersistentKeyValueStore(
                        name, store_directory(state_dir, name, partition)
                    )
                if parts != [partition]:
                    raise ValueError(f"a task got records of partitions {parts}, not {partition}")
                done = process_next(store, batch, to_read[partition][1])
                if done.num_restored:
                    last, restored = done.last_restored_offset, restored + done.num_restored
            if store is None:
                return
            if last >= 0:
                store.flush()
                directory = store_directory(state_dir, name, partition)
                OffsetCheckpoint(directory / CHECKPOINT_FILE).write(
                    {TopicPartition(topic, partition): last}
                )
        finally:
            if store is not None:
                store.close()
        start, end = to_read[partition]
        row = _row(partition, start, end, restored, round(time.monotonic() - started, 3))
        yield pa.RecordBatch.from_pylist([row], schema=_ARROW_RESULT)

    spark.sparkContext.setJobDescription(
        f"streamstate: restore {topic} ({len(to_read)} partitions)"
    )
    with quiet_pandas3_warning():
        mapped = df.mapInArrow(restore, _RESULT_SCHEMA)
    for row in mapped.collect():
        results[int(row["partition"])] = row.asDict()
    return list(results.values())


def _source_options(connection: Mapping[str, Any]) -> dict[str, str]:
    """librdkafka connection settings as options of Spark's (Java) Kafka source."""
    options: dict[str, str] = {}
    rest = dict(connection)
    if "security.protocol" in rest:
        options["kafka.security.protocol"] = str(rest.pop("security.protocol")).upper()
    mechanism = rest.pop("sasl.mechanisms", rest.pop("sasl.mechanism", None))
    username, password = rest.pop("sasl.username", None), rest.pop("sasl.password", None)
    if mechanism is not None:
        options["kafka.sasl.mechanism"] = str(mechanism)
    if username is not None:
        module = {"PLAIN": "plain.PlainLoginModule"}.get(
            str(mechanism or "PLAIN"), "scram.ScramLoginModule"
        )
        options["kafka.sasl.jaas.config"] = (
            f"org.apache.kafka.common.security.{module} required "
            f'username="{username}" password="{password}";'
        )
    if "ssl.ca.location" in rest:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = str(rest.pop("ssl.ca.location"))
    if rest:
        raise ValueError(
            f"feed='kafka_source' cannot pass {sorted(rest)} to Spark's Kafka source; use "
            f"feed='consumer', which takes every librdkafka setting"
        )
    return options


def _row(partition: int, start: int, end: int, restored: int, seconds: float) -> dict[str, Any]:
    return {
        "partition": partition,
        "start_offset": start,
        "end_offset": end,
        "restored": restored,
        "seconds": seconds,
    }


def _plan(job: _Job, wanted: list[int]) -> dict[int, tuple[int, int]]:
    """``{partition: (start, end)}`` to read, as the reader would decide it; stores that must be
    restored from the beginning are wiped here, on the driver, before any task opens them."""
    from confluent_kafka import Consumer

    from streamstate.clients.config import restore_consumer_config
    from streamstate.records import TopicPartition
    from streamstate.state.checkpoint import OffsetCheckpoint
    from streamstate.state.stores import PersistentKeyValueStore, wipe_store
    from streamstate.state.topic_restore import CHECKPOINT_FILE, read_checkpoint, store_directory

    consumer = Consumer(
        restore_consumer_config(job.bootstrap_servers, eos=job.eos, **dict(job.connection))
    )
    plan: dict[int, tuple[int, int]] = {}
    try:
        for p in wanted:
            tp = TopicPartition(job.topic, p)
            directory = store_directory(job.state_dir, job.name, p)
            directory.mkdir(parents=True, exist_ok=True)
            low, end = consumer.get_watermark_offsets(tp, timeout=30.0, cached=False)
            with PersistentKeyValueStore(job.name, directory) as store:
                checkpoint = read_checkpoint(store, directory, tp)
                if checkpoint is not None and checkpoint + 1 < low:
                    # Records after the checkpoint are gone: restore from the new log start.
                    OffsetCheckpoint(directory / CHECKPOINT_FILE).delete()
                    wipe_store(store)
                    checkpoint = None
                elif checkpoint is None and job.eos:
                    wipe_store(store)
            start = low if checkpoint is None else checkpoint + 1
            plan[p] = (min(start, end), end)
    finally:
        consumer.close()
    return plan
