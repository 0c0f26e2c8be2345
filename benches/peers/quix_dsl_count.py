"""The DSL counts of ``benches/bench_dsl.py`` written with Quix Streams (a peer library).

Runs in its own virtualenv (``.venv-quix``, made by ``make bench``): Quix Streams pins a
confluent-kafka older than streamstate's. Usage::

    python quix_dsl_count.py BOOTSTRAP TOPIC SINK PROGRAM STATE_DIR GROUP

Reads TOPIC (string keys, JSON values, parsed per record) as consumer group GROUP and counts:

* ``count``: per key, in Quix's state (RocksDB, changelogged). Quix has no unwindowed
  ``count()``; this is the stateful ``apply`` its documentation shows for running totals. SINK
  gets every new count (key -> JSON number).
* ``windowed``: per key and 1-minute tumbling window, ``tumbling_window(60_000).count()``
  (no grace, as ``TimeWindows.of_size_with_no_grace``) with ``current()``: SINK gets every
  update (key -> ``{"start": ..., "end": ..., "value": count}``).

Commits every second. The protocol of ``benches/_kstreams.py``'s ``run_until_done``: prints
``{"event": "started"}`` just before ``run()``, runs until its stdin ends (the driver closes it
once GROUP's committed offsets reach the end of TOPIC), then stops, and prints one JSON line:
``run_s`` (from ``run()`` to its return, the stop included) and ``late_records`` (records of a
window already closed, which Quix skips).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from quixstreams import Application


def main() -> int:
    bootstrap, topic_name, sink_name, program, state_dir, group = sys.argv[1:7]
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        auto_offset_reset="earliest",
        state_dir=state_dir,
        commit_interval=1.0,
        loglevel="WARNING",
    )
    source = app.topic(topic_name, key_deserializer="string", value_deserializer="json")
    sink = app.topic(sink_name, key_serializer="string", value_serializer="json")
    late = [0]

    def count(_value: Any, state: Any) -> int:
        total: int = state.get("count", 0) + 1
        state.set("count", total)
        return total

    def on_late(*_args: Any) -> bool:
        late[0] += 1
        return False  # counted, not logged

    sdf = app.dataframe(source)
    if program == "count":
        sdf = sdf.apply(count, stateful=True)
    elif program == "windowed":
        sdf = sdf.tumbling_window(60_000, on_late=on_late).count().current()
    else:
        raise SystemExit(f"PROGRAM is count or windowed, not {program!r}")
    sdf.to_topic(sink)

    def stop_at_end_of_stdin() -> None:
        sys.stdin.read()
        app.stop()

    threading.Thread(target=stop_at_end_of_stdin, daemon=True).start()
    print(json.dumps({"event": "started"}), flush=True)
    started = time.monotonic()
    app.run()
    print(json.dumps({"run_s": time.monotonic() - started, "late_records": late[0]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
