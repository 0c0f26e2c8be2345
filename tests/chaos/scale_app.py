"""A counting StreamsApp that shares a backlog with its peers, run as a child process by the
scale-out scenarios (``tests/chaos/scale_out.py``) and benchmark (``benches/bench_scale_out.py``).

It counts the records of each key in a persistent, logged, caching store ``counts`` and sends
``(key, count)`` to the sink: the shape of ``benches/bench_app.py``. ``--sleep-every K`` sleeps
1 ms every K records (the GIL is released: stream threads and instances really work in
parallel, so the backlog lasts as long as the scenario needs whatever the machine's load).
``--second-source`` adds a co-partitioned source topic (a topology with two sources: Kafka's
eager ``range`` assignment). ``--threads`` sets ``num.stream.threads``.

It reports on stdout, one JSON object a line: ``{"event": "started"}``, then on SIGTERM (a clean
close) ``{"event": "closed", ...}`` with the records it processed, its CPU seconds, the forced
rejoins (the runtime closing every task as lost and rejoining), the partitions it was told it
had lost, and whether a stream thread died.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import resource
import signal
import sys
import threading
import time
from typing import Any

from streamstate import StreamThreadExceptionResponse
from streamstate.app import State, StreamsApp, Topology
from streamstate.cli.signals import StopRequest

FORCED_REJOIN = "closing all tasks as lost and rejoining"
LOST = "Lost partitions"


class _Counter(logging.Handler):
    """Counts the runtime's log lines that mark a forced rejoin and a lost assignment."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.rejoins = self.lost = self.errors = 0

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if FORCED_REJOIN in text:
            self.rejoins += 1
        elif text.startswith(LOST):
            self.lost += 1
        if record.levelno >= logging.ERROR:
            self.errors += 1
            print(f"ERROR {text}", file=sys.stderr, flush=True)


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--source", "--sink", "--app-id", "--state-dir"):
        parser.add_argument(name, required=True)
    parser.add_argument("--second-source", default=None)
    parser.add_argument("--guarantee", default="at_least_once")
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sleep-every", type=int, default=0)
    args = parser.parse_args()

    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    counter = _Counter()
    runtime_log = logging.getLogger("streamstate")
    runtime_log.addHandler(counter)
    runtime_log.setLevel(logging.INFO)
    # Not a threading.Event: its set() can deadlock inside a signal handler (cli/signals.py).
    stop = StopRequest()
    signal.signal(signal.SIGTERM, stop.request)
    processed = [0]
    lock = threading.Lock()
    sources = [args.source] + ([args.second_source] if args.second_source else [])
    topology = Topology().add_store("counts", caching=True)

    @topology.processor(sources=sources, stores=["counts"], sinks=[args.sink])
    def count(ctx: Any, record: Any) -> None:
        store = ctx.store("counts")
        n = int(store.get(record.key) or b"0") + 1
        store.put(record.key, b"%d" % n)
        ctx.send(args.sink, record.key, b"%d" % n)
        with lock:
            processed[0] += 1
            due = args.sleep_every and processed[0] % args.sleep_every == 0
        if due:
            time.sleep(0.001)

    app = StreamsApp(
        topology,
        {
            "application.id": args.app_id,
            "bootstrap.servers": args.bootstrap,
            "state.dir": args.state_dir,
            "processing.guarantee": args.guarantee,
            "commit.interval.ms": args.commit_interval_ms,
            "num.stream.threads": args.threads,
            "session.timeout.ms": 10_000,
        },
    )
    died: list[str] = []

    def on_thread_death(exc: BaseException) -> StreamThreadExceptionResponse:
        died.append(repr(exc))
        return StreamThreadExceptionResponse.SHUTDOWN_CLIENT

    app.set_uncaught_exception_handler(on_thread_death)
    # A thread that dies outside the runtime's own handling (in its close, say) too.
    threading.excepthook = lambda hook: died.append(f"{hook.thread}: {hook.exc_value!r}")
    app.start()
    emit(event="started")
    try:
        while not stop.wait(0.1):
            if app.state in (State.ERROR, State.PENDING_ERROR):
                break
    finally:
        # A close that outlasts its own 60 s bound leaves every thread's stack in this
        # instance's log, which the harness shows when no "closed" event comes.
        faulthandler.dump_traceback_later(70, exit=False)
        app.close(60)
        faulthandler.cancel_dump_traceback_later()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    emit(
        event="closed",
        processed=processed[0],
        cpu=usage.ru_utime + usage.ru_stime,
        rejoins=counter.rejoins,
        lost=counter.lost,
        errors=counter.errors,
        died=died,
        state=app.state.value,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
