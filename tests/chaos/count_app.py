"""A counting StreamsApp for the SIGKILL loop (``test_kill_loop.py``), run as a child process.

It counts the records of each key in a persistent, logged store ``counts`` and sends
``(key, count)`` to the sink. It reports on stdout, one JSON object a line:

* ``{"event": "restore", ...}``: a restore listener's start and end per changelog partition
  (start offset, end offset, records restored): what the restart read back from the changelog.
* ``{"event": "snapshot", "partition": p, "store": {...}}``: a task's store as it was at the
  first record this process processed for it (after restoration, before any new write).
* ``{"event": "progress", "processed": n}``: every 50 records processed by this process.
* ``{"event": "tasks", "state": ..., "active": [...], "restoring": [...], "standby": {...}}``:
  the app's state and its tasks' partitions whenever they change (``standby``: each standby
  task's changelog position, reported at most every 0.5 s while only positions move).
* ``{"event": "stalled", "phase": ...}``: the process stopped inside a commit (``--stall``);
  ``released`` when it goes on; ``commit-failed`` when a commit step raised (fencing);
  ``producer`` with each transactional producer's ``transactional.id``.

``--stall offsets|before|after --stall-at K`` makes the K-th commit of this process that carries
consumed offsets stop (for good, or until ``--release-file`` exists: a frozen zombie that wakes):
``offsets`` stops with the records written (in the open transaction) and the offsets not yet
handed over (exactly-once: before ``send_offsets_to_transaction``); ``before`` stops with the
records written and the offsets handed over but not committed (at-least-once: inside
``Consumer.commit``; exactly-once: after ``send_offsets_to_transaction``, before
``commit_transaction``), ``after`` stops once the broker has committed, before the runtime
applies the commit to its stores and checkpoint. The hooks are subclasses of confluent-kafka's
clients installed before streamstate is imported, so they see every client the runtime makes.

``--quiet`` leaves out the snapshot and progress events (large stores, heavy load);
``--group-protocol`` and ``--standby-replicas`` set ``group.protocol`` and
``num.standby.replicas``.

SIGTERM closes the app cleanly (a final commit) and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka

_stall: dict[str, Any] = {"phase": None, "at": 0, "release": None}
_commits = [0]
_out_lock = threading.Lock()


def emit(**fields: Any) -> None:
    with _out_lock:
        print(json.dumps(fields), flush=True)


def _stall_if_due(phase: str) -> None:
    """Stops at the chosen commit in ``phase``: forever, or until the release file exists."""
    if _stall["phase"] != phase or _commits[0] != _stall["at"]:
        return
    emit(event="stalled", phase=phase, commit=_commits[0])
    release = _stall["release"]
    while release is None or not os.path.exists(release):
        time.sleep(0.1)
    emit(event="released", phase=phase)


def _call(name: str, method: Callable[[], Any]) -> Any:
    """Calls a client's commit step, reporting its failure (a zombie's fencing) before raising."""
    try:
        return method()
    except Exception as exc:
        emit(event="commit-failed", step=name, error=str(exc))
        raise


class _HookedConsumer(confluent_kafka.Consumer):
    def commit(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("offsets"):
            return super().commit(*args, **kwargs)
        _commits[0] += 1
        _stall_if_due("offsets")
        _stall_if_due("before")
        result = _call("commit", lambda: super(_HookedConsumer, self).commit(*args, **kwargs))
        _stall_if_due("after")
        return result


class _HookedProducer(confluent_kafka.Producer):
    _offsets_sent = False

    def __init__(self, config: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        if config.get("transactional.id"):
            emit(event="producer", transactional_id=config["transactional.id"])

    def send_offsets_to_transaction(self, *args: Any, **kwargs: Any) -> Any:
        _commits[0] += 1
        _stall_if_due("offsets")
        result = _call(
            "send_offsets_to_transaction",
            lambda: super(_HookedProducer, self).send_offsets_to_transaction(*args, **kwargs),
        )
        self._offsets_sent = True
        _stall_if_due("before")
        return result

    def commit_transaction(self, *args: Any, **kwargs: Any) -> Any:
        result = _call(
            "commit_transaction",
            lambda: super(_HookedProducer, self).commit_transaction(*args, **kwargs),
        )
        if self._offsets_sent:
            self._offsets_sent = False
            _stall_if_due("after")
        return result


def _partition(task_id: Any) -> int:
    """A task's partition: the task id itself in the one-function form, else its field."""
    return task_id if isinstance(task_id, int) else int(task_id.partition)


class _TaskReport:
    """Emits the app's state and tasks when they change (see the module doc)."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._last: tuple[Any, ...] = ()
        self._positions: dict[int, int] = {}
        self._at = 0.0

    def emit_if_changed(self) -> None:
        threads = list(self._app._threads)
        active = {tid: t for th in threads for tid, t in th.active_tasks().items()}
        positions = {tp.partition: o for th in threads for tp, o in th.standbys.positions().items()}
        now = (
            self._app.state.name,
            sorted(_partition(tid) for tid in active),
            sorted(_partition(tid) for tid, task in active.items() if task.restoring),
            sorted(positions),
        )
        moved = positions != self._positions and time.monotonic() - self._at >= 0.5
        if now != self._last or moved:
            self._last, self._positions, self._at = now, positions, time.monotonic()
            emit(
                event="tasks",
                state=now[0],
                active=now[1],
                restoring=now[2],
                standby={str(p): o for p, o in positions.items()},
            )


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--source", "--sink", "--app-id", "--state-dir"):
        parser.add_argument(name, required=True)
    parser.add_argument("--guarantee", default="at_least_once")
    parser.add_argument("--commit-interval-ms", type=int, default=100)
    parser.add_argument("--stall", choices=("offsets", "before", "after"), default=None)
    parser.add_argument("--stall-at", type=int, default=0)
    parser.add_argument("--release-file", default=None)
    parser.add_argument("--max-poll-interval-ms", type=int, default=300_000)
    parser.add_argument("--assignment", default="cooperative-sticky")
    parser.add_argument("--group-protocol", default="classic")
    parser.add_argument("--standby-replicas", type=int, default=0)
    parser.add_argument("--group-instance-id", default=None)
    parser.add_argument("--quiet", action="store_true")
    _args = parser.parse_args()
    _stall.update(phase=_args.stall, at=_args.stall_at, release=_args.release_file)
    confluent_kafka.Consumer = _HookedConsumer  # type: ignore[misc]
    confluent_kafka.Producer = _HookedProducer  # type: ignore[misc]

    from streamstate.app import State, StreamsApp, Topology  # noqa: PLC0415 (after the hooks)
    from streamstate.cli.signals import StopRequest  # noqa: PLC0415
    from streamstate.state.restorer import StateRestoreListener  # noqa: PLC0415

    class Listener(StateRestoreListener):
        def on_restore_start(self, tp: Any, store_name: str, start: int, end: int) -> None:
            emit(event="restore", phase="start", partition=tp.partition, start=start, end=end)

        def on_restore_end(self, tp: Any, store_name: str, total: int) -> None:
            emit(event="restore", phase="end", partition=tp.partition, restored=total)

    # Not a threading.Event: its set() can deadlock inside a signal handler (cli/signals.py).
    stop = StopRequest()
    signal.signal(signal.SIGTERM, stop.request)
    processed = [0]
    snapshotted: set[int] = set()
    topology = Topology().add_store("counts")

    @topology.processor(sources=[_args.source], stores=["counts"], sinks=[_args.sink])
    def count(ctx: Any, record: Any) -> None:
        store = ctx.store("counts")
        if record.partition not in snapshotted and not _args.quiet:
            snapshotted.add(record.partition)
            emit(
                event="snapshot",
                partition=record.partition,
                store={k.decode(): int(v) for k, v in store.all()},
            )
        n = int(store.get(record.key) or b"0") + 1
        store.put(record.key, b"%d" % n)
        ctx.send(_args.sink, record.key, b"%d" % n)
        processed[0] += 1
        if processed[0] % 50 == 0 and not _args.quiet:
            emit(event="progress", processed=processed[0])

    app = StreamsApp(
        topology,
        {
            "application.id": _args.app_id,
            "bootstrap.servers": _args.bootstrap,
            "state.dir": _args.state_dir,
            "processing.guarantee": _args.guarantee,
            "commit.interval.ms": _args.commit_interval_ms,
            "session.timeout.ms": 6000,
            "consumer.max.poll.interval.ms": _args.max_poll_interval_ms,
            "partition.assignment.strategy": _args.assignment,
            "group.protocol": _args.group_protocol,
            **({"num.standby.replicas": n} if (n := _args.standby_replicas) else {}),
            **({"group.instance.id": i} if (i := _args.group_instance_id) else {}),
        },
        restore_listener=Listener(),
    )
    try:
        app.start()
    except Exception as exc:  # the test hears why (stderr is not read)
        emit(event="error", error=f"start(): {exc!r}")
        raise
    emit(event="started")
    tasks = _TaskReport(app)
    try:
        while not stop.wait(0.1):
            if app.state is State.ERROR:
                emit(event="error", error=str(app.fatal_error))
                return 1
            tasks.emit_if_changed()
    finally:
        app.close(60)
    emit(event="closed", processed=processed[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
