"""The stream-table enrichment of ``benches/bench_join.py`` written with Quix Streams (a peer
library).

Runs in its own virtualenv (``.venv-quix``, made by ``make bench``): Quix Streams pins a
confluent-kafka older than streamstate's. Usage::

    python quix_join_enrich.py BOOTSTRAP TABLE_TOPIC TOPIC SINK STATE_DIR GROUP

Reads TABLE_TOPIC and TOPIC (string keys, JSON values, parsed per record; co-partitioned) as
consumer group GROUP and joins each record of TOPIC with the latest row of its key in
TABLE_TOPIC: ``join_asof(table, how="inner", on_merge=...)``, Quix's join of a stream with the
latest value per key of another (its nearest form of Kafka's ``KStream.join(KTable)``; Quix
3.28 has no join against a table built from a topic besides it, ``join_lookup`` reads external
databases). The right side's rows go to a timestamped RocksDB store (changelogged); a left
record takes the latest row with a timestamp at or before its own (the table's timestamps are
older than the stream's, and Quix consumes co-partitioned topics of a join in timestamp order,
so the table is loaded first). The merge is ``{**order, **user}``, as the other contenders'
joiners. SINK gets one JSON record per joined record.

Commits every second. The protocol of ``benches/_kstreams.py``'s ``run_until_done``: prints
``{"event": "started"}`` just before ``run()``, runs until its stdin ends (the driver closes it
once GROUP's committed offsets reach the end of TOPIC), then stops, and prints one JSON line:
``run_s`` (from ``run()`` to its return, the stop included) and ``quix_version``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import quixstreams
from quixstreams import Application


def enrich(order: Any, user: Any) -> Any:
    """A new record with the order's fields, then the user's."""
    return {**order, **user}


def main() -> int:
    bootstrap, table_name, topic_name, sink_name, state_dir, group = sys.argv[1:7]
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        auto_offset_reset="earliest",
        state_dir=state_dir,
        commit_interval=1.0,
        loglevel="WARNING",
    )
    table = app.topic(table_name, key_deserializer="string", value_deserializer="json")
    source = app.topic(topic_name, key_deserializer="string", value_deserializer="json")
    sink = app.topic(sink_name, key_serializer="string", value_serializer="json")

    users = app.dataframe(table)
    orders = app.dataframe(source)
    orders.join_asof(users, how="inner", on_merge=enrich).to_topic(sink)

    def stop_at_end_of_stdin() -> None:
        sys.stdin.read()
        app.stop()

    threading.Thread(target=stop_at_end_of_stdin, daemon=True).start()
    print(json.dumps({"event": "started"}), flush=True)
    started = time.monotonic()
    app.run()
    report = {"run_s": time.monotonic() - started, "quix_version": quixstreams.__version__}
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
