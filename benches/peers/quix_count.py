"""The stateful count of ``benches/bench_app.py`` written with Quix Streams (a peer library).

Runs in its own virtualenv (``.venv-quix``, made by ``make bench``): Quix Streams pins a
confluent-kafka older than streamstate's. Usage::

    python quix_count.py BOOTSTRAP TOPIC SINK N STATE_DIR [GUARANTEE]

GUARANTEE is Quix's ``processing_guarantee``: ``at-least-once`` (the default) or
``exactly-once`` (a Kafka transaction per commit).

Counts per key in Quix's state (RocksDB, changelogged), writes each new count to SINK, commits
every second, and stops after N outputs; prints the total of the counts it holds at the end.
"""

from __future__ import annotations

import sys
import uuid

from quixstreams import Application


def main() -> int:
    bootstrap, topic_name, sink_name, n, state_dir = sys.argv[1:6]
    guarantee = sys.argv[6] if len(sys.argv) > 6 else "at-least-once"
    app = Application(
        broker_address=bootstrap,
        consumer_group=f"bench-quix-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        state_dir=state_dir,
        commit_interval=1.0,
        processing_guarantee=guarantee,
        loglevel="WARNING",
    )
    source = app.topic(topic_name, key_deserializer="bytes", value_deserializer="bytes")
    sink = app.topic(sink_name, key_serializer="bytes", value_serializer="bytes")
    totals: dict[bytes, int] = {}

    def count(value: bytes, key: bytes, timestamp: int, headers: object, state) -> bytes:  # type: ignore[no-untyped-def]
        total = state.get("count", 0) + 1
        state.set("count", total)
        totals[key] = total
        return b"%d" % total

    sdf = app.dataframe(source)
    sdf = sdf.apply(count, stateful=True, metadata=True)
    sdf.to_topic(sink)
    app.run(count=int(n), timeout=120)
    print(sum(totals.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
