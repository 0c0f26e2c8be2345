"""The word count in the DSL: Kafka Streams' first program, in six lines of ``StreamsBuilder``.

Run it with ``streamstate run python/streamstate/examples/word_count.py --bootstrap-servers
HOST:PORT``. It reads text lines from ``text-lines`` (any key; the value is UTF-8 text), splits
each into lowercase words, re-keys every word by itself through the repartition topic
``word-count-dsl-app-words-repartition``, counts them in the store ``counts`` (changelog
``word-count-dsl-app-counts-changelog``, with Kafka's record cache: the counts are forwarded
once per commit) and writes ``word -> count`` (UTF-8 text, 8-byte big-endian long) to
``word-counts``. ``text-lines`` and ``word-counts`` must exist (``STREAMSTATE_INPUT_TOPIC`` and
``STREAMSTATE_OUTPUT_TOPIC`` name others). Query it while it runs:
``app.store("counts").get("streams")`` is the count, an ``int``. The same program with the
Processor API is ``streamstate.examples.word_count_graph``.
"""

from __future__ import annotations

import os
import tempfile

from streamstate import Serdes, StreamsApp, StreamsBuilder, Topology


def word_count_topology(input_topic: str, output_topic: str) -> Topology:
    """The word count: ``input_topic`` lines to ``output_topic`` counts."""
    builder = StreamsBuilder()
    (
        builder.stream(input_topic, key_serde=Serdes.String(), value_serde=Serdes.String())
        .flat_map_values(lambda line: line.lower().split())
        .group_by(
            lambda _key, word: word,
            key_serde=Serdes.String(),
            value_serde=Serdes.String(),
            name="words",
        )
        .count(materialized="counts")
        .to_stream()
        .to(output_topic, value_serde=Serdes.Long())
    )
    return builder.build()


topology = word_count_topology(
    os.environ.get("STREAMSTATE_INPUT_TOPIC", "text-lines"),
    os.environ.get("STREAMSTATE_OUTPUT_TOPIC", "word-counts"),
)

app = StreamsApp(
    topology,
    {
        "application.id": os.environ.get("STREAMSTATE_APPLICATION_ID", "word-count-dsl-app"),
        "bootstrap.servers": os.environ.get("STREAMSTATE_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        "state.dir": os.environ.get(
            "STREAMSTATE_STATE_DIR", os.path.join(tempfile.gettempdir(), "streamstate-example")
        ),
        "commit.interval.ms": 1000,
        "session.timeout.ms": 6000,
    },
)
