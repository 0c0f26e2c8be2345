"""Changelog restoration: Kafka Streams' ``StoreChangelogReader`` over a confluent-kafka consumer.

A state store's changelog topic holds every write to the store; replaying it (in offset order,
the last write to a key winning, a ``None`` value deleting the key) rebuilds the store. The
:class:`StoreChangelogReader` drives that replay for any number of stores at once with one
*restore consumer*: each store is registered with a :class:`StateRestorer` naming its changelog
partition and, if a ``.checkpoint`` file has one, the offset of the last record it already holds.
Each :meth:`StoreChangelogReader.restore` call polls once and applies what arrived, in one write
batch per partition, with the Rust step :func:`streamstate.process_next`.

The reader follows Kafka Streams 2.4-2.5 (``register`` / ``restore`` / ``restoredOffsets`` /
``remove`` / ``clear``), with these parts of the 2.6+ redesign (KAFKA-9113):

* checkpoints hold the offset of the last record applied; restoration resumes at that offset + 1;
* completion compares the consumer's position with the end offset (``hasRestoredToEnd``), so a
  transaction marker or a compaction gap at the end never leaves a partition waiting;
* a completed partition is paused, not unassigned, and the progress of long restorations is
  logged every 10 seconds.

The restore consumer is assigned partitions manually and never joins a group. Make it with
:func:`~streamstate.clients.config.restore_consumer_config`, which sets
``auto.offset.reset=error`` (librdkafka's value for the Java client's ``none``, which Kafka
Streams sets on its restore consumer): a position that fell out of the log is then reported
instead of silently moved, and the reader wipes that store and restores it from the beginning.

This module runs the protocol (initialize, assign, poll and apply, complete);
:mod:`streamstate.state.changelog_progress` holds each partition's bookkeeping and the watchdog
(stall detection, the periodic progress log).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import cast

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException

from streamstate._core import ChangelogFetcher
from streamstate.clients.kafka_errors import ErrorKind, classify, error_text, kafka_error
from streamstate.clients.poll import PollEvent, split_poll
from streamstate.errors import ProcessorStateError, StreamsError
from streamstate.records import TopicPartition
from streamstate.state.changelog_progress import ChangelogPhase as _Phase
from streamstate.state.changelog_progress import ChangelogState as _Changelog
from streamstate.state.changelog_progress import RestoreWatch
from streamstate.state.changelog_progress import changelog_key as _key
from streamstate.state.changelog_progress import tp_str as _tp_str
from streamstate.state.restorer import StateRestoreListener, StateRestorer
from streamstate.state.stores import process_next, wipe_store

__all__ = ["StoreChangelogReader"]

# Named as before the module moved into streamstate.state: logging is configured by this name.
_log = logging.getLogger("streamstate.changelog")


class StoreChangelogReader:
    """Restores state stores from their changelog partitions with one restore consumer.

    ``restore_consumer`` is a ``confluent_kafka.Consumer`` used only by this reader, made with
    :func:`~streamstate.clients.config.restore_consumer_config` (the reader relies on
    ``auto.offset.reset=error``). It must not be subscribed to topics: the reader assigns
    partitions itself (``incremental_assign``). It may also be a
    :class:`streamstate._core.ChangelogFetcher` (see
    :func:`~streamstate.clients.restore_consumer.open_restore_consumer`): the reader then drives
    it with the same calls, except that each poll reads and applies the records in Rust, on up to
    one thread per core, and reports per partition what it applied; the protocol below is the
    same.

    Register a :class:`StateRestorer` per changelog partition, then call :meth:`restore` until
    it returns every registered partition. Each call:

    1. initializes newly registered partitions: reads the end offset *once* (the high watermark,
       or the last stable offset with an ``isolation.level=read_committed`` consumer; the
       restoration never goes past it, even if the changelog grows meanwhile); a partition whose
       checkpoint is at the end, or whose changelog has never held a record (end 0), completes
       at once: its listener hears ``on_restore_start`` (start = end) then ``on_restore_end``
       with 0 records, as Kafka Streams 2.6+ announces every changelog. A checkpoint *past*
       the end (the changelog was deleted and re-created) wipes the store, which is then
       restored from the beginning. Otherwise the consumer starts at the checkpoint + 1, or at
       the beginning of the log without a checkpoint (with ``eos=True`` the store is wiped
       first, as Kafka Streams does under exactly-once, since a store without a checkpoint may
       hold uncommitted writes); a checkpoint below the log start (retention or
       ``delete_records`` removed those records) wipes the store and restores it from the
       beginning. The listener's ``on_restore_start``
       then receives the real start offset and the end offset.
    2. polls once (``consume`` with ``poll_ms`` as timeout, at least ``max_poll_records``
       records) and applies each partition's records below its end offset in one write batch
       (:func:`streamstate.process_next`; null keys are skipped, ``None`` values delete), then
       calls ``on_batch_restored``.
    3. completes a partition once the consumer's position reaches its end offset: positions
       move past transaction markers and compaction gaps, so neither leaves it waiting. A
       completed partition is paused and ``on_restore_end`` is called.

    A position that fell out of the log (``auto.offset.reset=error`` reports it) is logged as a
    warning naming the partition; that store is wiped and restored from the beginning, and no
    exception escapes. A partition that makes no progress for ``stall_timeout_s`` seconds of
    :meth:`restore` calls raises :class:`~streamstate.errors.ProcessorStateError` naming it,
    its position and its end offset. While partitions restore, an INFO line reports their
    progress every ``progress_interval_s`` seconds.

    Not thread-safe: use one reader (and its consumer) from one thread.
    """

    def __init__(
        self,
        restore_consumer: Consumer | ChangelogFetcher,
        *,
        poll_ms: int = 100,
        restore_listener: StateRestoreListener | None = None,
        eos: bool = False,
        stall_timeout_s: float = 120.0,
        progress_interval_s: float = 10.0,
        max_poll_records: int = 1000,
        request_timeout_s: float = 30.0,
    ) -> None:
        """Creates a reader over ``restore_consumer``; nothing is assigned or fetched yet.

        ``poll_ms`` is the timeout of the one poll each :meth:`restore` makes (Kafka Streams'
        ``poll.ms``); ``restore_listener`` receives every store's progress; ``eos`` wipes stores
        that have no checkpoint before restoring them. ``stall_timeout_s`` is how long a
        partition may go without progress before :meth:`restore` raises,
        ``progress_interval_s`` how often progress is logged, ``max_poll_records`` the least
        number of records one poll may return (at least 1,000), and ``request_timeout_s`` the
        timeout of each end-offset request.
        """
        if poll_ms < 0:
            raise ValueError(f"poll_ms must be >= 0, not {poll_ms}")
        if stall_timeout_s <= 0:
            raise ValueError(f"stall_timeout_s must be > 0, not {stall_timeout_s}")
        if progress_interval_s <= 0:
            raise ValueError(f"progress_interval_s must be > 0, not {progress_interval_s}")
        if request_timeout_s <= 0:
            raise ValueError(f"request_timeout_s must be > 0, not {request_timeout_s}")
        self._consumer = restore_consumer
        # A consumer that reads and applies by itself (a ChangelogFetcher, or an object that
        # delegates to one) is driven through its restore(); decided by what it can do, not by
        # its type, so that a wrapper works as it does around a confluent-kafka consumer.
        self._fetcher = cast(
            "ChangelogFetcher | None",
            restore_consumer if callable(getattr(restore_consumer, "restore", None)) else None,
        )
        self._poll_s = poll_ms / 1000.0
        self._listener = restore_listener
        self._eos = eos
        self._stall_timeout_s = float(stall_timeout_s)
        self._progress_interval_s = float(progress_interval_s)
        self._max_poll_records = max(1000, int(max_poll_records))
        self._request_timeout_s = float(request_timeout_s)
        self._changelogs: dict[tuple[str, int], _Changelog] = {}
        # Stall detection and the periodic progress log (changelog_progress).
        self._watch = RestoreWatch(
            stall_timeout_s=self._stall_timeout_s,
            progress_interval_s=self._progress_interval_s,
            poll_s=self._poll_s,
        )

    # ----------------------------------------------------------------------------------------
    # Registration
    # ----------------------------------------------------------------------------------------

    def register(self, restorer: StateRestorer) -> None:
        """Registers ``restorer``'s store for restoration from its changelog partition.

        Registering a partition that is already registered keeps the first restorer (its store
        and its current checkpoint) and initializes that partition again on the next
        :meth:`restore`, as Kafka Streams 2.x does when a task re-registers its stores after
        wiping them.
        """
        key = _key(restorer.partition)
        existing = self._changelogs.get(key)
        if existing is None:
            self._changelogs[key] = _Changelog(restorer)
            _log.debug(
                "Added restorer for changelog topic %r partition %d (store %r, checkpoint %s)",
                key[0],
                key[1],
                restorer.store_name,
                restorer.checkpoint,
            )
            return
        _log.debug(
            "Skip re-adding restorer for changelog topic %r partition %d; it will be "
            "initialized again (store %r, checkpoint %s)",
            key[0],
            key[1],
            existing.restorer.store_name,
            existing.restorer.checkpoint,
        )
        if existing.assigned:
            self._unassign([existing])
        existing.reset()

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        """Stops restoring ``partitions``: unassigns them from the consumer and forgets them.

        The listener's ``on_restore_suspended`` is called for each one still restoring (as
        Kafka Streams 3.5+ does). A partition that is not registered is ignored (logged at
        DEBUG).
        """
        removed: list[_Changelog] = []
        for tp in partitions:
            changelog = self._changelogs.pop(_key(tp), None)
            if changelog is None:
                _log.debug(
                    "Changelog topic %r partition %d could not be found, it could be already "
                    "cleaned up and never restore again",
                    tp.topic,
                    tp.partition,
                )
                continue
            removed.append(changelog)
        self._unassign([c for c in removed if c.assigned])
        for changelog in removed:
            if changelog.phase is _Phase.RESTORING:
                _log.info(
                    "Suspended restoring store %r from changelog topic %r partition %d at "
                    "position %d after %d records",
                    changelog.restorer.store_name,
                    changelog.tp.topic,
                    changelog.tp.partition,
                    changelog.position,
                    changelog.total_restored,
                )
                total = changelog.total_restored
                self._notify(changelog, "restore suspended", "on_restore_suspended", total)

    def clear(self) -> None:
        """Forgets every registered partition and unassigns them from the consumer."""
        changelogs = list(self._changelogs.values())
        self._changelogs.clear()
        self._watch.clear()
        self._unassign([c for c in changelogs if c.assigned])

    def is_empty(self) -> bool:
        """True when no partition is registered."""
        return not self._changelogs

    def completed(self) -> set[TopicPartition]:
        """The registered partitions whose restoration is complete."""
        return {c.tp for c in self._changelogs.values() if c.phase is _Phase.COMPLETED}

    def end_offset(self, tp: TopicPartition) -> int | None:
        """The end offset (exclusive) read when ``tp`` was initialized; ``None`` before that or
        when ``tp`` is not registered."""
        changelog = self._changelogs.get(_key(tp))
        return None if changelog is None else changelog.end

    def position(self, tp: TopicPartition) -> int | None:
        """The offset of the next record of ``tp`` to restore, as far as the reader knows;
        ``None`` before initialization or when ``tp`` is not registered."""
        changelog = self._changelogs.get(_key(tp))
        if changelog is None or changelog.phase is _Phase.REGISTERED:
            return None
        return changelog.position

    def restored_offsets(self) -> dict[TopicPartition, int]:
        """``{partition: offset of the last record applied}`` for persistent stores.

        That is the number a ``.checkpoint`` file stores (restoration resumes one past it): the
        last record this reader applied, else the restorer's checkpoint; a persistent store with
        neither (nothing restored, no checkpoint) is left out. In-memory stores are never
        included, as in Kafka Streams.
        """
        offsets: dict[TopicPartition, int] = {}
        for changelog in self._changelogs.values():
            if not changelog.restorer.persistent:
                continue
            if changelog.last_applied >= 0:
                offsets[TopicPartition(*_key(changelog.tp))] = changelog.last_applied
            elif changelog.restorer.checkpoint is not None:
                offsets[TopicPartition(*_key(changelog.tp))] = changelog.restorer.checkpoint
        return offsets

    # ----------------------------------------------------------------------------------------
    # Restoration
    # ----------------------------------------------------------------------------------------

    def restore(self) -> set[TopicPartition]:
        """Initializes new partitions, polls once, applies what arrived; returns every
        partition completed so far (not only those completed by this call).

        Raises :class:`~streamstate.errors.ProcessorStateError` when the consumer is subscribed
        to topics, when a partition cannot be read (an error other than an out-of-range
        position), or when a partition made no progress for ``stall_timeout_s``; a
        :class:`~streamstate.errors.StreamsError` when the restore listener raises; and
        whatever the store raises when a batch cannot be written.
        """
        call_start = time.monotonic()
        registered = [c for c in self._changelogs.values() if c.phase is _Phase.REGISTERED]
        if registered:
            self._check_not_subscribed()
            for changelog in registered:
                self._initialize(changelog)

        restoring = [c for c in self._changelogs.values() if c.phase is _Phase.RESTORING]
        if restoring:
            self._poll_and_apply(restoring)
            self._check_completion(
                [c for c in self._changelogs.values() if c.phase is _Phase.RESTORING]
            )

        now = time.monotonic()
        self._watch.check_stalls(self._changelogs.values(), call_start, now)
        self._watch.maybe_log_progress(self._changelogs.values(), now)
        self._watch.call_ended(time.monotonic())
        return self.completed()

    def _check_not_subscribed(self) -> None:
        try:
            member_id = self._consumer.memberid()
        except (KafkaException, RuntimeError):
            return
        if member_id:
            raise ProcessorStateError(
                "the restore consumer should not be subscribed to any topics (it is a member "
                f"of a consumer group, member id {member_id!r}); give the reader a consumer of "
                "its own, which it assigns partitions to manually"
            )

    def _watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        low, high = self._consumer.get_watermark_offsets(
            TopicPartition(tp.topic, tp.partition),
            timeout=self._request_timeout_s,
            cached=False,
        )
        return int(low), int(high)

    def _initialize(self, changelog: _Changelog) -> None:
        tp = changelog.tp
        restorer = changelog.restorer
        try:
            low, end = self._watermarks(tp)
        except KafkaException as exc:
            error = kafka_error(exc)
            text = error_text(exc)
            if error is not None and classify(error) is ErrorKind.RETRIABLE:
                changelog.problem = f"its end offset could not be read ({text})"
                _log.debug(
                    "Could not read the end offset of changelog topic %r partition %d (%s); "
                    "will retry in the next restore() call",
                    tp.topic,
                    tp.partition,
                    text,
                )
                return
            raise ProcessorStateError(
                f"could not read the end offset of the changelog: {text}",
                topic=tp.topic,
                partition=tp.partition,
                store_name=restorer.store_name,
            ) from exc
        changelog.problem = None
        changelog.end = end
        checkpoint = restorer.checkpoint

        if checkpoint is None and self._eos:
            _log.info(
                "No checkpoint found for store %r (changelog topic %r partition %d) with EOS "
                "turned on: wiping the store and restoring it from the beginning",
                restorer.store_name,
                tp.topic,
                tp.partition,
            )
            self._wipe(changelog)

        if checkpoint is not None and checkpoint + 1 > end:
            # The position after the checkpoint is past the log's end: out of range (a fetch
            # there gets OFFSET_OUT_OF_RANGE). The log is not the one the store was restored
            # from (deleted and re-created, say), so the store's contents cannot be trusted.
            _log.warning(
                "Checkpoint %d of store %r is beyond the end offset %d of changelog topic "
                "%r partition %d: the changelog was deleted and re-created, or truncated. "
                "Wiping the store and restoring it from the beginning",
                checkpoint,
                restorer.store_name,
                end,
                tp.topic,
                tp.partition,
            )
            self._wipe(changelog)
            checkpoint = None

        if end == 0 or (checkpoint is not None and checkpoint + 1 >= end):
            changelog.position = checkpoint + 1 if checkpoint is not None else end
            changelog.start = changelog.position
            changelog.total_restored = 0
            changelog.phase = _Phase.COMPLETED
            _log.debug(
                "Nothing to restore for store %r from changelog topic %r partition %d "
                "(checkpoint %s, end offset %d)",
                restorer.store_name,
                tp.topic,
                tp.partition,
                checkpoint,
                end,
            )
            # Kafka Streams 2.6+ (StoreChangelogReader.prepareChangelogs, then
            # restoreChangelog's hasRestoredToEnd) announces every active changelog, so a
            # listener hears start and end (0 records) for this one too.
            self._notify(changelog, "restore start", "on_restore_start", changelog.position, end)
            self._notify(changelog, "restore end", "on_restore_end", 0)
            return

        if checkpoint is not None and checkpoint + 1 < low:
            _log.warning(
                "Checkpoint %d of store %r is below the log start offset %d of changelog topic "
                "%r partition %d: the records after it were removed (retention, compaction or "
                "delete_records). Wiping the store and restoring it from the beginning",
                checkpoint,
                restorer.store_name,
                low,
                tp.topic,
                tp.partition,
            )
            self._wipe(changelog)
            checkpoint = None

        if checkpoint is not None:
            self._start(changelog, checkpoint + 1, checkpoint + 1)
        else:
            self._start(changelog, OFFSET_BEGINNING, low)

    def _start(self, changelog: _Changelog, assign_offset: int, start: int) -> None:
        """Assigns the partition at ``assign_offset`` and announces the restoration."""
        tp = changelog.tp
        assert changelog.end is not None
        self._assign(changelog, assign_offset)
        changelog.phase = _Phase.RESTORING
        changelog.start = start
        changelog.position = start
        changelog.last_applied = -1
        changelog.total_restored = 0
        changelog.stalled_s = 0.0
        changelog.progressed = True
        self._watch.started(time.monotonic())
        _log.info(
            "Restoring store %r from changelog topic %r partition %d, offset %d to end offset %d",
            changelog.restorer.store_name,
            tp.topic,
            tp.partition,
            start,
            changelog.end,
        )
        end = changelog.end
        self._notify(changelog, "restore start", "on_restore_start", start, end)

    def _assign(self, changelog: _Changelog, offset: int) -> None:
        tp = changelog.tp
        try:
            if changelog.assigned:
                self._consumer.incremental_unassign([TopicPartition(tp.topic, tp.partition)])
                changelog.assigned = False
            self._consumer.incremental_assign([TopicPartition(tp.topic, tp.partition, offset)])
            # librdkafka keeps a partition paused across unassign and assign: a partition paused
            # on completion and registered again must fetch.
            self._consumer.resume([TopicPartition(tp.topic, tp.partition)])
        except KafkaException as exc:
            raise ProcessorStateError(
                f"the restore consumer could not be assigned the changelog partition: "
                f"{error_text(exc)}",
                topic=tp.topic,
                partition=tp.partition,
                store_name=changelog.restorer.store_name,
            ) from exc
        changelog.assigned = True

    def _unassign(self, changelogs: Sequence[_Changelog]) -> None:
        if not changelogs:
            return
        try:
            self._consumer.incremental_unassign(
                [TopicPartition(c.tp.topic, c.tp.partition) for c in changelogs]
            )
        except KafkaException as exc:
            raise ProcessorStateError(
                "the restore consumer could not unassign changelog partitions "
                f"{', '.join(_tp_str(c.tp) for c in changelogs)}: {error_text(exc)}"
            ) from exc
        finally:
            for changelog in changelogs:
                changelog.assigned = False

    def _poll_and_apply(self, restoring: list[_Changelog]) -> None:
        if self._fetcher is not None:
            self._fetch_and_apply(self._fetcher, restoring)
            return
        num_messages = max(self._max_poll_records, 500 * len(restoring))
        consumer = cast(Consumer, self._consumer)  # not a fetcher: a confluent-kafka consumer
        try:
            messages = consumer.consume(num_messages=num_messages, timeout=self._poll_s)
        except KafkaException as exc:
            raise ProcessorStateError(
                f"the restore consumer failed polling records: {error_text(exc)}"
            ) from exc

        polled = split_poll(messages)
        # An error event fails the call before anything of this poll is applied.
        for event in polled.events:
            self._handle_event(event)
        invalid = polled.invalid_offsets

        for key, batch in polled.runs.items():
            changelog = self._changelogs.get(key)
            if changelog is None or changelog.phase is not _Phase.RESTORING or key in invalid:
                continue
            # Defensive: never apply a record twice (e.g. one fetched before a re-assignment).
            fresh = batch
            if (batch[0].offset() or 0) < changelog.position:
                fresh = [m for m in batch if (m.offset() or 0) >= changelog.position]
                if not fresh:
                    continue
            assert changelog.end is not None
            restored = process_next(changelog.restorer.store, fresh, changelog.end)
            if restored.next_offset >= 0:
                changelog.advance(int(restored.next_offset))
            if restored.num_restored > 0:
                self._batch_restored(
                    changelog, int(restored.num_restored), int(restored.last_restored_offset)
                )

        for key, offset in polled.end_positions.items():
            changelog = self._changelogs.get(key)
            if changelog is not None and changelog.phase is _Phase.RESTORING:
                changelog.advance(offset)

        for key, (offset, reason) in invalid.items():
            changelog = self._changelogs.get(key)
            if changelog is not None and changelog.phase is _Phase.RESTORING:
                self._restart_from_beginning(changelog, offset, reason)

    def _fetch_and_apply(self, fetcher: ChangelogFetcher, restoring: list[_Changelog]) -> None:
        """The Rust path of one poll: the fetcher reads and applies in Rust for up to
        ``poll_ms`` (or until every partition reached its end), gathering each partition's
        records into large write batches, and reports per partition what it applied; the
        protocol (listener calls, invalid offsets, errors) is as after a confluent-kafka poll."""
        # A restoring partition has its end offset (set before it starts restoring).
        targets = [
            (c.tp.topic, c.tp.partition, c.restorer.store, c.end, c.position)
            for c in restoring
            if c.end is not None
        ]
        # As many records per call as a confluent-kafka poll would return: listeners see
        # batches of the same granularity on both paths.
        num_messages = max(self._max_poll_records, 500 * len(restoring))
        results = fetcher.restore(targets, self._poll_s, num_messages)
        for text in fetcher.take_events():
            self._warn_client_event(text)
        invalid: dict[tuple[str, int], tuple[int, str]] = {}
        for result in results:
            key = (result.topic, result.partition)
            changelog = self._changelogs.get(key)
            if changelog is None:
                continue
            if result.error is not None:
                event = PollEvent(result.error, key[0], key[1], result.error_offset)
                if event.kind is ErrorKind.INVALID_OFFSET:
                    offset = result.error_offset if result.error_offset is not None else -1
                    invalid[key] = (offset, result.error.str())
                elif event.kind is not ErrorKind.END_OF_PARTITION:
                    self._handle_event(event)
            if result.invalid_offset is not None:
                invalid[key] = result.invalid_offset
                continue
            if result.num_restored > 0:
                self._batch_restored(
                    changelog, int(result.num_restored), int(result.last_restored_offset)
                )
            changelog.advance(result.position)
        for key, (offset, reason) in invalid.items():
            changelog = self._changelogs.get(key)
            if changelog is not None and changelog.phase is _Phase.RESTORING:
                self._restart_from_beginning(changelog, offset, reason)

    def _batch_restored(self, changelog: _Changelog, num: int, last: int) -> None:
        """Counts ``num`` records applied up to offset ``last`` and tells the listener."""
        changelog.total_restored += num
        changelog.last_applied = last
        _log.debug(
            "Restored %d records from changelog topic %r partition %d to store %r, "
            "last offset %d, end offset %d",
            num,
            changelog.tp.topic,
            changelog.tp.partition,
            changelog.restorer.store_name,
            last,
            changelog.end,
        )
        self._notify(changelog, "batch restored", "on_batch_restored", last, num)

    def _handle_event(self, event: PollEvent) -> None:
        """An error event other than an end of partition or an invalid offset (those are read
        from the poll result)."""
        key = event.key
        changelog = self._changelogs.get(key) if key is not None else None
        if changelog is not None and changelog.phase is _Phase.RESTORING:
            offset = event.offset
            raise ProcessorStateError(
                f"the restore consumer failed reading the changelog: {event.error.str()}",
                topic=changelog.tp.topic,
                partition=changelog.tp.partition,
                offset=offset if offset is not None and offset >= 0 else None,
                store_name=changelog.restorer.store_name,
            )
        if key is None and event.kind is ErrorKind.FATAL:
            raise ProcessorStateError(f"the restore consumer failed: {event.error.str()}")
        # A client-wide, recoverable event (a broker connection dropped, say): librdkafka
        # retries by itself, and the stall timeout catches an outage that does not end.
        self._warn_client_event(event.error.str())

    def _warn_client_event(self, event: str) -> None:
        """Logs a client-wide event (a broker connection lost, ...) as a WARNING naming the
        partitions it holds up, if any restore; librdkafka retries by itself."""
        waiting = [c for c in self._changelogs.values() if c.phase is _Phase.RESTORING]
        if not waiting:
            _log.debug("Restore consumer reported %s", event)
            return
        _log.warning(
            "The restore consumer reported: %s. Changelog partitions %s wait for it (the "
            "client retries; a partition without progress for %g s fails the restoration)",
            event,
            ", ".join(_tp_str(c.tp) for c in waiting),
            self._stall_timeout_s,
        )

    def _restart_from_beginning(self, changelog: _Changelog, offset: int, reason: str) -> None:
        tp = changelog.tp
        _log.warning(
            "Changelog topic %r partition %d: offset %d is out of range (%s). It is likely "
            "that the topic was truncated (retention, delete_records) or compacted on the "
            "broker. Wiping store %r and restoring it from the beginning",
            tp.topic,
            tp.partition,
            offset,
            reason,
            changelog.restorer.store_name,
        )
        self._wipe(changelog)
        try:
            low, _ = self._watermarks(tp)
        except KafkaException as exc:
            _log.debug(
                "Could not read the log start offset of changelog topic %r partition %d (%s)",
                tp.topic,
                tp.partition,
                error_text(exc),
            )
            low = 0
        self._start(changelog, OFFSET_BEGINNING, low)

    def _check_completion(self, restoring: list[_Changelog]) -> None:
        if not restoring:
            return
        query = [TopicPartition(c.tp.topic, c.tp.partition) for c in restoring]
        try:
            positions = self._consumer.position(query)
        except KafkaException as exc:
            raise ProcessorStateError(
                "the restore consumer could not report its position for changelog partitions "
                f"{', '.join(_tp_str(tp) for tp in query)}: {error_text(exc)}"
            ) from exc
        invalid: list[tuple[_Changelog, int, str]] = []
        for reported in positions:
            changelog = self._changelogs.get(_key(reported))
            if changelog is None or changelog.phase is not _Phase.RESTORING:
                continue
            if reported.error is not None:
                if classify(reported.error) is ErrorKind.INVALID_OFFSET:
                    invalid.append((changelog, changelog.position, reported.error.str()))
                else:
                    _log.debug(
                        "Position of changelog topic %r partition %d unknown: %s",
                        reported.topic,
                        reported.partition,
                        reported.error.str(),
                    )
                continue
            # OFFSET_INVALID (-1001) until the first record arrives: then the reader's own
            # position (the start, or past the last record applied) is the answer.
            if reported.offset >= 0:
                changelog.advance(reported.offset)
        for changelog, offset, reason in invalid:
            self._restart_from_beginning(changelog, offset, reason)

        for changelog in restoring:
            if changelog.phase is _Phase.RESTORING and changelog.end is not None:
                if changelog.position >= changelog.end:
                    self._complete(changelog)

    def _complete(self, changelog: _Changelog) -> None:
        tp = changelog.tp
        changelog.phase = _Phase.COMPLETED
        try:
            self._consumer.pause([TopicPartition(tp.topic, tp.partition)])
        except KafkaException as exc:
            _log.debug(
                "Could not pause changelog topic %r partition %d: %s",
                tp.topic,
                tp.partition,
                error_text(exc),
            )
        _log.info(
            "Finished restoring changelog topic %r partition %d to store %r with a total number "
            "of %d records (position %d, end offset %s)",
            tp.topic,
            tp.partition,
            changelog.restorer.store_name,
            changelog.total_restored,
            changelog.position,
            changelog.end,
        )
        total = changelog.total_restored
        self._notify(changelog, "restore end", "on_restore_end", total)

    def _wipe(self, changelog: _Changelog) -> None:
        """Empties the store. (Kafka Streams closes the store and deletes its directory; the
        store object here is the caller's and stays open, so its keys are deleted instead.)"""
        tp = changelog.tp
        if changelog.restorer.before_wipe is not None:
            changelog.restorer.before_wipe()
        removed = wipe_store(changelog.restorer.store)
        changelog.restorer.checkpoint = None
        changelog.last_applied = -1
        _log.info(
            "Wiped store %r (changelog topic %r partition %d): %d keys deleted",
            changelog.restorer.store_name,
            tp.topic,
            tp.partition,
            removed,
        )

    def _notify(self, changelog: _Changelog, what: str, method: str, *args: int) -> None:
        """Calls ``method`` of the listener with the partition, the store name and ``args``;
        wraps what it raises as Kafka Streams does ("state restore listener failed on ...")."""
        if self._listener is None:
            return
        tp = TopicPartition(changelog.tp.topic, changelog.tp.partition)
        name = changelog.restorer.store_name
        try:
            getattr(self._listener, method)(tp, name, *args)
        except Exception as exc:
            raise StreamsError(
                f"state restore listener failed on {what} ({method}): {type(exc).__name__}: {exc}",
                topic=tp.topic,
                partition=tp.partition,
                store_name=name,
            ) from exc
