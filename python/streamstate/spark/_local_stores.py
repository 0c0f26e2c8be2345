"""``process(..., stores="local")``: a task's stores on the executor's disk, as Kafka Streams
keeps them, so that a micro-batch costs what it touches and not what the stores hold.

With the default layout (``stores="spark"``, ``_process.py``) all of a task's stores are one cell
of Spark's state store, read and written back whole by every micro-batch the task has records
in: its cost grows with the stores and the cell must fit the JVM (``docs/spark-streaming.md``).
Here a task's stores are fjall stores under ``state.dir/<application.id>/spark/<store>/<p>/``
(the layout ``restore_topic`` restores into), and the task's cell in Spark's state store holds
only what must commit with Spark's checkpoint:

* ``version``: how many micro-batches the task has run;
* ``delta``: the writes of the task's last micro-batch (an Arrow IPC stream of store, changelog
  topic, key, value, ``to_key`` for a dropped key range), never applied to the disk yet;
* ``queues``: the record queues' carried state, as in the default layout.

A micro-batch's writes go to a :class:`~streamstate.state.transaction_buffer.TransactionBuffer`
over each store (reads see them), and become the cell's new ``delta``; the disk is not touched.
Spark commits the cell with the micro-batch, or retries the micro-batch from the old cell. So
the disk is always one delta behind what Spark committed, and the next micro-batch of the task
starts by applying the cell's delta (atomic per store, idempotent: whole values), flushing, and
recording the version the disk now holds (``spark/tasks/0_<p>.json``). A retried micro-batch
finds the disk at the version its cell says and runs again over the same state.

The changelog (``changelog=True``) is the durable copy, as in Kafka Streams: the delta is sent
to ``<application.id>-<store>-changelog`` (partition = task) when it is applied, that is once
Spark has committed it, so the topic only ever holds committed values and a compacted topic's
newest value of a key is always a committed one. When a task's disk is lost (an executor that
is gone, a task that moved) its stores are restored from the changelog to its end, then the
cell's delta is applied; without a changelog that is an error, never an empty store.
``hand_over`` sends the last delta too (``_hand_over.py``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from streamstate.errors import ProcessorStateError
from streamstate.spark._chunks import ipc_bytes, read_chunk
from streamstate.state.transaction_buffer import TransactionBuffer
from streamstate.stores import PersistentKeyValueStore, process_next

if TYPE_CHECKING:
    from streamstate.app.config import StreamsConfig

__all__ = ["DELTA_SCHEMA", "LOCAL_STATE_DDL", "LocalStores", "LocalStoresConfig", "local_root"]

# times: a DSL graph's stream times (``_graph.py``), small, committed with the micro-batch.
LOCAL_STATE_DDL = "version bigint, delta binary, queues string, times binary"
DELTA_SCHEMA = pa.schema(
    [
        ("store", pa.string()),
        # The store's changelog topic (null: not logged), so hand_over needs no topology.
        ("topic", pa.string()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        # Not null: the row drops keys [key, to_key) (a window store's expired segments).
        ("to_key", pa.binary()),
        # The changelog record's timestamp: a DSL store's value starts with it (as
        # ChangeLoggingKeyValueStore logs it); null for a plain store's.
        ("timestamp", pa.int64()),
    ]
)

# The size of the stores' level 1 (PersistentKeyValueStore's level_base_bytes): a task's stores
# are closed after every micro-batch, and the close waits for the LSM tree's merges. With fjall's
# 256 MiB a store of up to that size sits in level 1 whole, and every 4th micro-batch rewrites all
# of it; with 32 MiB the merges stay about that big. Measured with
# `python -m benches.diag_local_store_cycle runs 5000000 40 MiB` (a store of 5M keys, 40
# micro-batch cycles): 0.78 s per cycle with 256 MiB (a ~1.9 s close every 4th), 0.39 s with 32,
# 0.34-0.38 s with 16 (reads slower); 64 MiB gives 0.69 s (the store still fits in level 1).
_LEVEL_BASE_BYTES = 32 * 1024 * 1024


def local_root(state_dir: Path, application_id: str) -> Path:
    """Where the tasks of ``process(..., stores="local")`` keep their stores."""
    return state_dir / application_id / "spark"


@dataclass(frozen=True)
class LocalStoresConfig:
    """What a Spark task needs to open its local stores; pickled with the task."""

    root: str
    # Store name → changelog topic (None: the store is not logged, or changelog=False).
    changelogs: dict[str, str | None]
    bootstrap_servers: str
    # The connection settings (security.protocol, sasl.*, ssl.*) of a restore consumer.
    connection: dict[str, Any]
    # The stores whose values start with their timestamp (the DSL's).
    timestamped: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        stores: Mapping[str, Any],
        cfg: StreamsConfig,
        changelog: bool,
        settings: Mapping[str, Any],
    ) -> LocalStoresConfig:
        """The configuration of a topology's ``stores`` (name → spec) for an app's ``cfg``
        (``StreamsConfig``) and ``settings`` (its mapping, for the connection settings)."""
        from streamstate.clients.config import connection_settings

        return cls(
            str(local_root(cfg.state_dir, cfg.application_id).absolute()),
            {
                name: spec.changelog_topic(cfg.application_id)
                if changelog and spec.logged
                else None
                for name, spec in stores.items()
            },
            cfg.bootstrap_servers,
            connection_settings(settings),
            frozenset(name for name, spec in stores.items() if spec.timestamped),
        )


class LocalStores:
    """One task's local stores for one micro-batch: opened at the cell's version, each behind a
    buffer that collects the micro-batch's writes (see the module doc)."""

    def __init__(self, config: LocalStoresConfig, task_id: int, version: int, delta: Any) -> None:
        """Opens task ``task_id``'s stores at ``version`` (the cell's), applying ``delta``
        (the cell's IPC bytes, or ``None``) or restoring first if the disk is not there."""
        self._config = config
        self._task_id = task_id
        self.version = version
        self._root = Path(config.root)
        self._marker = self._root / "tasks" / f"0_{task_id}.json"
        on_disk = self._disk_version()
        if version == 0 or on_disk is None or not version - 1 <= on_disk <= version:
            if on_disk is not None and on_disk > version:
                raise ProcessorStateError(
                    f"task 0_{task_id}'s local stores in {self._root} hold micro-batch "
                    f"{on_disk}, newer than the checkpoint's {version}: the query was "
                    "restarted from an older copy of its checkpoint. Delete the directory "
                    "(and the changelog topics) to start over",
                    partition=task_id,
                )
            self._wipe()
            on_disk = 0
            if version > 0:
                self._restore()
        self.stores: dict[str, PersistentKeyValueStore] = {}
        try:
            for name in config.changelogs:
                self.stores[name] = self._open(name)
            self.delta = _read_delta(delta)
            if on_disk < version:
                self._apply(self.delta)
            if on_disk < version or version == 0:
                self._write_marker(version)
        except BaseException:
            # The stores' locks must go with the failed attempt: Spark retries it, maybe in
            # this very Python worker.
            for store in self.stores.values():
                store.close()
            raise
        self.buffers = {name: TransactionBuffer(store) for name, store in self.stores.items()}

    @classmethod
    def from_state(
        cls, config: LocalStoresConfig, task_id: int, state: Any
    ) -> tuple[LocalStores, str | None, bytes | None]:
        """The stores at the version of ``state`` (Spark's ``GroupState``), its queues' JSON
        and its stream times (``None`` before the task's first micro-batch)."""
        if not state.exists:
            return cls(config, task_id, 0, None), None, None
        version, delta, queues, times = state.get
        return cls(config, task_id, int(version), delta), queues, times

    def send_changelog(self, rows: Any) -> None:
        """Keeps the cell's delta as changelog rows in ``rows`` (a Spark task's output): the
        writes Spark has committed, sent now (see the module doc)."""
        for topic, key, value, timestamp in self.changelog_rows():
            rows.keep(topic, value, key, self._task_id, timestamp=timestamp)

    def changelog_rows(self) -> list[tuple[str, bytes, bytes | None, int | None]]:
        """The cell's delta as changelog records (topic, key, value), for the stores that are
        logged: what this micro-batch sends, now that Spark has committed it."""
        return _changelog_rows(self.delta)

    @staticmethod
    def changelog_rows_of(delta: Any) -> list[tuple[str, bytes, bytes | None, int | None]]:
        """:meth:`changelog_rows` of a cell's ``delta`` bytes (``hand_over`` reads them)."""
        return _changelog_rows(_read_delta(delta))

    def next_cell(self) -> tuple[int, bytes]:
        """The task's next cell's version and delta: this micro-batch's buffered writes."""
        stores: list[str] = []
        topics: list[str | None] = []
        keys: list[bytes] = []
        values: list[bytes | None] = []
        to_keys: list[bytes | None] = []
        timestamps: list[int | None] = []
        for name, buffer in self.buffers.items():
            topic = self._config.changelogs[name]
            timestamped = name in self._config.timestamped
            drops, writes = buffer.uncommitted()
            for low, high in drops:
                stores.append(name)
                topics.append(topic)
                keys.append(low)
                values.append(None)
                to_keys.append(high)
                timestamps.append(None)
            for key, value in writes.items():
                stores.append(name)
                topics.append(topic)
                keys.append(key)
                values.append(value)
                to_keys.append(None)
                timestamps.append(
                    max(int.from_bytes(value[:8], "big", signed=True), 0)
                    if timestamped and value is not None and len(value) >= 8
                    else None
                )
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(stores, pa.string()),
                pa.array(topics, pa.string()),
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array(to_keys, pa.binary()),
                pa.array(timestamps, pa.int64()),
            ],
            schema=DELTA_SCHEMA,
        )
        return self.version + 1, ipc_bytes([batch], DELTA_SCHEMA).to_pybytes()

    def close(self) -> None:
        """Closes the stores; the buffers' writes live on in the cell only."""
        for buffer in self.buffers.values():
            buffer.close()

    # -- the disk -----------------------------------------------------------------------------

    def _store_dir(self, name: str) -> Path:
        return self._root / name / str(self._task_id)

    def _open(self, name: str) -> PersistentKeyValueStore:
        path = self._store_dir(name)
        path.mkdir(parents=True, exist_ok=True)
        return PersistentKeyValueStore(name, path, level_base_bytes=_LEVEL_BASE_BYTES)

    def _disk_version(self) -> int | None:
        try:
            return int(json.loads(self._marker.read_text())["version"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            return None  # an unreadable marker: the disk is not trusted, it is rebuilt

    def _write_marker(self, version: int) -> None:
        # Written after the stores are flushed, renamed into place: a crash before leaves the
        # old version, and the delta is applied again (whole values: it converges).
        self._marker.parent.mkdir(parents=True, exist_ok=True)
        partial = self._marker.with_suffix(".tmp")
        partial.write_text(json.dumps({"version": version}))
        os.replace(partial, self._marker)

    def _wipe(self) -> None:
        self._marker.unlink(missing_ok=True)
        for name in self._config.changelogs:
            shutil.rmtree(self._store_dir(name), ignore_errors=True)

    def _restore(self) -> None:
        """Restores every store from its changelog to its end: the disk is gone (or not the
        one this checkpoint wrote) and the checkpoint is past its first micro-batch."""
        unlogged = sorted(n for n, topic in self._config.changelogs.items() if topic is None)
        if unlogged:
            raise ProcessorStateError(
                f"task 0_{self._task_id}'s local stores are not in {self._root} (a lost "
                f"executor disk, or a task that moved) and stores {unlogged} have no changelog "
                "to restore them from: run process(..., changelog=True) with logged stores to "
                "survive that",
                partition=self._task_id,
            )
        from streamstate.state.topic_restore import restore_topic

        for name, topic in self._config.changelogs.items():
            assert topic is not None
            # Created here, so that the store restore_topic fills has the local stores' shape.
            self._open(name).close()
            restore_topic(
                self._config.bootstrap_servers,
                topic,
                self._root,
                store_name=name,
                partitions=[self._task_id],
                consumer_config=self._config.connection,
                parallelism=1,
            )

    def _apply(self, delta: pa.RecordBatch | None) -> None:
        """Applies a committed delta to the disk: per store its dropped ranges, then its
        writes in one atomic batch; then every store is flushed.

        The writes go through the restore path (``process_next``), which writes a batch of
        at least 1 MiB as a sorted run straight into the LSM tree's tables, past the memtable
        and the journal: the stores are opened for every micro-batch, and fjall's open reads
        its whole journal (up to 64 MB before it starts another: 0.75 s for 5M keys written
        through ``put_all``), so writes through the journal would make every open slower.
        Measured with 50k-key micro-batches over a 5M-key store, open to close: 1.4 s through
        ``put_all``, 0.64 s through runs (``benches/diag_local_store_cycle.py``)."""
        if delta is not None and delta.num_rows:
            drops = pc.is_valid(delta.column("to_key"))
            for row in delta.filter(drops).to_pylist():
                self.stores[row["store"]].drop_range(row["key"], row["to_key"])
            writes = delta.filter(pc.invert(drops))
            for name in self.stores:
                mine = writes.filter(pc.equal(writes.column("store"), name))
                if mine.num_rows:
                    # Whole values, in the delta's order (one per key): offsets are positions.
                    batch = pa.RecordBatch.from_arrays(
                        [
                            mine.column("key"),
                            mine.column("value"),
                            pa.array(range(mine.num_rows), pa.int64()),
                        ],
                        names=["key", "value", "offset"],
                    )
                    process_next(self.stores[name], batch, mine.num_rows)
        for store in self.stores.values():
            store.flush()


def _read_delta(delta: Any) -> pa.RecordBatch | None:
    if not delta:
        return None
    table = pa.Table.from_batches(read_chunk(delta), schema=DELTA_SCHEMA).combine_chunks()
    batches = table.to_batches()
    return batches[0] if batches else None


def _changelog_rows(
    delta: pa.RecordBatch | None,
) -> list[tuple[str, bytes, bytes | None, int | None]]:
    rows: list[tuple[str, bytes, bytes | None, int | None]] = []
    if delta is None:
        return rows
    for topic, key, value, to_key, timestamp in zip(
        delta.column("topic").to_pylist(),
        delta.column("key").to_pylist(),
        delta.column("value").to_pylist(),
        delta.column("to_key").to_pylist(),
        delta.column("timestamp").to_pylist(),
        strict=True,
    ):
        # A dropped range is not logged (Kafka's segment drops are not either).
        if topic is not None and to_key is None:
            rows.append((topic, key, value, timestamp))
    return rows
