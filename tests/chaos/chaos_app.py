"""A StreamsApp for the chaos scenarios, run as a process of its own (so it can be SIGKILLed,
and its memory measured alone).

It forwards every record to the sink as ``b"<partition>:<offset>"`` (the effect the scenarios
check: every input coordinate must reach the sink), optionally sleeping 1 ms every
``--slow-every`` records. With ``--expect N`` it exits once it has processed N distinct input
coordinates, printing one JSON line: the distinct count and the peak RSS (``VmHWM``) in MB.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

from streamstate.app import State, StreamsApp, Topology


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1.0


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--source", "--sink", "--app-id", "--state-dir"):
        parser.add_argument(name, required=True)
    parser.add_argument("--slow-every", type=int, default=0)
    parser.add_argument("--expect", type=int, default=0)
    parser.add_argument("--commit-interval-ms", type=int, default=500)
    args = parser.parse_args()
    # The runtime's INFO lines (rebalances, task migrated, pauses) reach the test's output.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    seen: set[tuple[int, int]] = set()
    lock = threading.Lock()
    topology = Topology()

    @topology.processor(sources=[args.source], sinks=[args.sink])
    def forward(ctx: Any, record: Any) -> None:
        if args.slow_every and record.offset % args.slow_every == 0:
            time.sleep(0.001)
        ctx.send(args.sink, record.key, b"%d:%d" % (record.partition, record.offset))
        with lock:
            seen.add((record.partition, record.offset))

    app = StreamsApp(
        topology,
        {
            "application.id": args.app_id,
            "bootstrap.servers": args.bootstrap,
            "state.dir": args.state_dir,
            "commit.interval.ms": args.commit_interval_ms,
            "session.timeout.ms": 6000,
        },
    )
    app.start()
    print("started", flush=True)
    try:
        while True:
            time.sleep(0.2)
            if app.state is State.ERROR:
                print(json.dumps({"error": str(app.fatal_error)}), flush=True)
                return 1
            with lock:
                done = len(seen)
            if args.expect and done >= args.expect:
                break
    finally:
        app.close(60)
    with lock:
        report = {"processed": len(seen), "peak_rss_mb": round(peak_rss_mb(), 1)}
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
