"""The word count of ``benches/bench_word_count.py`` written with Quix Streams (a peer library).

Runs in its own virtualenv (``.venv-quix``, made by ``make bench``): Quix Streams pins a
confluent-kafka older than streamstate's. Usage::

    python quix_word_count.py BOOTSTRAP TOPIC SINK WORDS STATE_DIR

Text lines (UTF-8 values) are split into lowercase words (``apply(..., expand=True)``),
re-keyed by word through Quix's repartition topic (``group_by``), counted per word in Quix's
state (RocksDB, changelogged; Quix has no unwindowed ``count()``, so the count is the
``apply(stateful=True)`` its documentation shows for running totals) and written to SINK
(word -> count as text). Commits every second; stops once WORDS words are counted. Prints one
JSON line: ``elapsed_s`` (from ``run()`` to the stop), ``total_count`` and ``distinct_words``.
"""

from __future__ import annotations

import json
import sys
import time
import uuid

from quixstreams import Application


def main() -> int:
    bootstrap, topic_name, sink_name, words, state_dir = sys.argv[1:6]
    target = int(words)
    app = Application(
        broker_address=bootstrap,
        consumer_group=f"bench-quix-wc-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        state_dir=state_dir,
        commit_interval=1.0,
        loglevel="WARNING",
    )
    source = app.topic(topic_name, key_deserializer="bytes", value_deserializer="string")
    sink = app.topic(sink_name, key_serializer="string", value_serializer="string")
    totals: dict[str, int] = {}
    counted = [0]

    def count(word: str, state) -> str:  # type: ignore[no-untyped-def]
        total = state.get("count", 0) + 1
        state.set("count", total)
        totals[word] = total
        counted[0] += 1
        if counted[0] == target:
            app.stop()
        return str(total)

    sdf = app.dataframe(source)
    sdf = sdf.apply(lambda line: (line or "").lower().split(), expand=True)
    sdf = sdf.group_by(
        lambda word: word,
        name="words",
        key_serializer="string",
        key_deserializer="string",
        value_serializer="string",
        value_deserializer="string",
    )
    sdf = sdf.apply(count, stateful=True)
    sdf.to_topic(sink)
    started = time.monotonic()
    app.run()
    elapsed = time.monotonic() - started
    report = {
        "elapsed_s": elapsed,
        "total_count": sum(totals.values()),
        "distinct_words": len(totals),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
