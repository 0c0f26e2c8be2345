"""streamstate's two restore contenders of ``benches/bench_restore_peers.py``, each run in a
process of its own so that its peak RSS is its own:

* ``restore``: :func:`streamstate.topic_restore.restore_topic`, the code ``streamstate restore``
  runs, timed from the call to its return (the command's own seconds: opening the stores and the
  restore consumer, restoring, the last checkpoints);
* ``app``: a :class:`~streamstate.StreamsApp` whose one processor owns the store, started on an
  empty state directory; its state updater restores the store, timed by the app's global restore
  listener from the first ``on_restore_start`` to the last ``on_restore_end`` (as Kafka Streams
  is timed in ``RestoreBench.java``); the group join before it is not counted.

``python benches/_restore_contender.py restore|app --bootstrap HOST:PORT ...`` prints one JSON
line: ``seconds`` (the measured span), ``cpu_s`` (the process's CPU seconds, every thread, over
that span), ``peak_rss_mb`` (the process's peak RSS, measured before the checks read the stores
back), ``restored``, ``entries`` (the stores' approximate number of entries) and ``probe`` (the
stored value of ``--probe-key``, hex, or null).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from streamstate import PersistentKeyValueStore, StateRestoreListener, TopicPartition
from streamstate.app import State, StreamsApp, Topology
from streamstate.topic_restore import restore_topic, store_directory


class Span(StateRestoreListener):
    """The first ``on_restore_start`` to the last ``on_restore_end``, with the process's CPU
    seconds at both ends; done once every partition that started has ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.first_start: float | None = None
        self.cpu_at_start = 0.0
        self.last_end = 0.0
        self.cpu_at_end = 0.0
        self.started = 0
        self.ended = 0
        self.restored = 0

    def on_restore_start(
        self, tp: TopicPartition, store_name: str, start_offset: int, end_offset: int
    ) -> None:
        with self._lock:
            if self.first_start is None:
                self.first_start = time.monotonic()
                self.cpu_at_start = time.process_time()
            self.started += 1

    def on_restore_end(self, tp: TopicPartition, store_name: str, total_restored: int) -> None:
        with self._lock:
            self.last_end = time.monotonic()
            self.cpu_at_end = time.process_time()
            self.ended += 1
            self.restored += total_restored

    def done(self, partitions: int) -> bool:
        with self._lock:
            return self.ended >= partitions and self.ended == self.started

    def seconds(self) -> float:
        assert self.first_start is not None, "no restoration started"
        return self.last_end - self.first_start


def _peak_rss_mb() -> float:
    # VmHWM, not getrusage's ru_maxrss: Linux carries the parent's peak into ru_maxrss across
    # the (v)fork and exec that started this process, so a bench process that had produced a
    # 1 GB changelog made every contender after it report at least its peak.
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("no VmHWM in /proc/self/status")


def run_restore(args: argparse.Namespace) -> dict[str, Any]:
    """``streamstate restore``'s code, timed as a whole."""
    span = Span()
    cpu = time.process_time()
    started = time.monotonic()
    results = restore_topic(
        args.bootstrap, args.topic, args.state_dir, store_name=args.store, restore_listener=span
    )
    seconds = time.monotonic() - started
    cpu_s = time.process_time() - cpu
    report: dict[str, Any] = {
        "seconds": seconds,
        "cpu_s": cpu_s,
        "peak_rss_mb": _peak_rss_mb(),
        "span_s": span.seconds(),
        "restored": sum(r.restored for r in results),
    }
    entries = 0
    probe = None
    for result in results:
        directory = store_directory(args.state_dir, args.store, result.partition)
        with PersistentKeyValueStore(args.store, directory) as store:
            entries += store.approximate_num_entries()
            if args.probe_key and result.partition == args.probe_partition:
                probe = store.get(bytes.fromhex(args.probe_key))
    report.update(entries=entries, probe=None if probe is None else probe.hex())
    return report


def run_app(args: argparse.Namespace) -> dict[str, Any]:
    """A ``StreamsApp`` restoring its store from the changelog, timed by its restore listener."""
    topology = Topology().add_store(args.store)

    @topology.processor(sources=[args.input_topic], stores=[args.store])
    def never(ctx: object, record: object) -> None:
        raise AssertionError("the input topic is empty")

    span = Span()
    app = StreamsApp(
        topology,
        {
            "application.id": args.application_id,
            "bootstrap.servers": args.bootstrap,
            "state.dir": str(args.state_dir),
        },
    )
    app.set_global_state_restore_listener(span)
    try:
        app.start()
        deadline = time.monotonic() + args.timeout_s
        while not (app.state is State.RUNNING and span.done(args.partitions)):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"not restored within {args.timeout_s} s: state {app.state}, "
                    f"{span.ended} of {span.started} restorations ended"
                )
            app.wait_for_state(State.RUNNING, 0.01)
        report: dict[str, Any] = {
            "seconds": span.seconds(),
            "cpu_s": span.cpu_at_end - span.cpu_at_start,
            "peak_rss_mb": _peak_rss_mb(),
            "restored": span.restored,
        }
        store = app.store(args.store)
        probe = store.get(bytes.fromhex(args.probe_key)) if args.probe_key else None
        report.update(
            entries=int(store.approximate_num_entries()),
            probe=None if probe is None else probe.hex(),
        )
        return report
    finally:
        app.close(120)


def main(argv: list[str] | None = None) -> int:
    """Runs one contender and prints its JSON report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("contender", choices=["restore", "app"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", help="restore: the changelog topic")
    parser.add_argument("--application-id", help="app: its application.id")
    parser.add_argument("--input-topic", help="app: its (empty) source topic")
    parser.add_argument("--partitions", type=int, default=1, help="app: changelog partitions")
    parser.add_argument("--store", required=True)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--probe-key", default="", help="hex")
    parser.add_argument("--probe-partition", type=int, default=0)
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-restore-contender-") as tmp:
        if args.state_dir is None:
            args.state_dir = Path(tmp)
        report = run_restore(args) if args.contender == "restore" else run_app(args)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
