"""Runs of records: the task loop's batch hand-over (``StreamTask.process``).

``PartitionGroup.next_record`` hands out one record at a time in Kafka's cross-partition
timestamp order. Where a source topic's records go to a processor that can take several at
once (``ProcessorTopology.run_handlers``: a plain stream-table join writing to a plain sink;
an aggregation over a cached store fed by its source, e.g. ``group_by_key().count()`` or a
tumbling-window count, which forwards nothing per record), the task asks the group for the
*run* the one-at-a-time loop would take next (``PartitionGroup.next_run``: the records in a
row from one queue up to where the loop would switch queues, ties included; nothing is added to
the queues while the task processes) and hands the whole run over in one call. The state a
record leaves behind is what the loop leaves:

* the records are removed from the queue (``PartitionGroup.advance``) only once processed, so
  stream time, the queue's head offset (what a commit commits) and its size are exactly the
  loop's after each run; a record that raises is removed with those before it, as the loop had
  removed it before processing it;
* the partition time processed (committed as metadata) and the partitions to commit are
  updated once per run (the highest timestamp of the run; a set add), the record context
  (``StreamTask.context``, ``ProcessorTopology.current``) is the run's last record, or the
  one that raised when the processing exception handler is asked about it;
* a run is taken only while no stream-time punctuation is scheduled (the loop checks them after
  each record; the run's processors schedule none), only under at-least-once with no
  dead-letter queue (the exactly-once tracker names each send by its source record), and a
  handler stops before any record not in its shape (a null key or value, headers), which then
  goes through the one-at-a-time path; KIP-695's readiness is checked when the run empties its
  queue, as the loop checks it when a queue runs dry.

``RUNS`` switches the hand-over off (tests compare both paths).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamstate.errors import StreamsError
from streamstate.records import NOT_KNOWN

__all__ = ["RUNS", "RunHandler", "run_handlers", "take_next_run"]

RUNS = True

RunHandler = Callable[[list[Any]], int]


def run_handlers(task: Any, processors: Any) -> list[RunHandler | None] | None:
    """Per partition of ``task``'s group (``partitions()`` order), the run handler of its topic
    or ``None``; ``None`` when no partition has one or runs do not apply (module doc)."""
    if not RUNS or task._tracker is not None or task._eos or task._dlq is not None:
        return None
    by_topic = processors.run_handlers()
    if not by_topic:
        return None
    return [by_topic.get(tp.topic) for tp in task.group.partitions()]


def take_next_run(task: Any, max_records: int) -> tuple[int, bool]:
    """Hands the run the loop would take next (at most ``max_records``) to its partition's
    handler: ``(processed, whether the queue ran dry)``; ``(0, False)`` when there is none, no
    handler, a stream-time punctuation is scheduled, or the first record is not in the
    handler's shape (the one-at-a-time path then takes it). See the module doc."""
    if task.processors.has_stream_punctuations():
        return 0, False
    group = task.group
    run = group.next_run(max_records)
    if run is None:
        return 0, False
    index, n = run
    handler = task._run_handlers[index]
    if handler is None:
        return 0, False
    queue = group.queue(task.partitions[index])
    taken = _take(task, handler, index, n, queue)
    return taken, taken > 0 and not queue.size()


def _take(task: Any, handler: RunHandler, index: int, n: int, queue: Any) -> int:
    group = task.group
    records = group.peek(index, n)
    try:
        taken = handler(records)
    except Exception as exc:
        failed = task.processors.current
        at = next((i for i, r in enumerate(records) if r is failed), None)
        if at is None:  # cannot happen: the handler names the record it is on
            raise
        group.advance(index, at + 1)
        _processed(task, queue, records, at)
        _at(task.context, failed)
        if isinstance(exc, StreamsError):
            raise
        task._on_failed_send_or_processor(failed, exc)
        _processed(task, queue, [failed], 1)
        return at + 1
    if taken:
        group.advance(index, taken)
        _processed(task, queue, records, taken)
        _at(task.context, records[taken - 1])
    return taken


def _processed(task: Any, queue: Any, records: list[Any], count: int) -> None:
    """The loop's bookkeeping of ``records[:count]``: the partition time processed (the
    highest timestamp, Kafka 2.6+) and the partition to commit."""
    if count <= 0:
        return
    highest = max(r.timestamp for r in records[:count]) if count > 1 else records[0].timestamp
    processed_time = task._processed_time
    if highest > processed_time.get(queue, NOT_KNOWN):
        processed_time[queue] = highest
    task._processed.add(queue)


def _at(ctx: Any, record: Any) -> None:
    ctx.topic, ctx.partition = record.topic, record.partition
    ctx.offset, ctx.timestamp = record.offset, record.timestamp
