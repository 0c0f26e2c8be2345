"""The word count written with the Processor API: a complete processor graph, re-keyed through
a repartition topic (``streamstate.examples.word_count`` is the same program in the DSL).

Run it with ``streamstate run python/streamstate/examples/word_count_graph.py --bootstrap-servers
HOST:PORT``. It reads text lines from ``text-lines`` (any key; the value is UTF-8 text), splits
each into lowercase words, re-keys every word by itself through the repartition topic
``word-count-app-words-repartition`` (so that each word is counted by the one task that owns
its partition), counts in the changelogged store ``counts`` and writes ``word -> count``
(both UTF-8 text) to ``word-counts``. Its topology, as ``topology.describe()`` prints it::

    Topologies:
       Sub-topology: 0
        Source: lines (topics: [text-lines])
          --> split
        Processor: split (stores: [])
          --> words-repartition-sink
          <-- lines
        Sink: words-repartition-sink (topic: words-repartition)
          <-- split

      Sub-topology: 1
        Source: words (topics: [words-repartition])
          --> count
        Processor: count (stores: [counts])
          --> counts-sink
          <-- words
        Sink: counts-sink (topic: word-counts)
          <-- count

``text-lines`` and ``word-counts`` must exist (``STREAMSTATE_INPUT_TOPIC`` and
``STREAMSTATE_OUTPUT_TOPIC`` name others); the app creates its repartition and changelog topics.
Query it while it runs: ``app.store("counts").get(b"streams")`` is ``b"42"``, the count as
decimal text.
"""

from __future__ import annotations

import os
import tempfile

from streamstate import (
    Processor,
    ProcessorGraphContext,
    Record,
    StreamsApp,
    Topology,
)
from streamstate.serde import StringDeserializer, StringSerializer


class SplitWords(Processor):
    """Forwards one record per word of the line, keyed (and valued) by the word."""

    def init(self, context: ProcessorGraphContext) -> None:
        """Keeps the context to forward through."""
        self.context = context

    def process(self, record: Record) -> None:
        """Splits the line on whitespace, lowercased."""
        for word in (record.value or "").lower().split():
            self.context.forward(Record(word, word, record.timestamp, record.headers))


class CountWords(Processor):
    """Adds one to the word's count in the store ``counts`` and forwards the new count."""

    def init(self, context: ProcessorGraphContext) -> None:
        """Looks the store up once."""
        self.context = context
        self.counts = context.get_state_store("counts")

    def process(self, record: Record) -> None:
        """Counts the word (its key)."""
        key = record.key.encode()
        count = int(self.counts.get(key) or b"0") + 1
        self.counts.put(key, b"%d" % count)
        self.context.forward(record.with_value(str(count)))


def word_count_topology(input_topic: str, output_topic: str, *, caching: bool = False) -> Topology:
    """The word count's graph: ``input_topic`` lines to ``output_topic`` counts; ``caching``
    puts a record cache in front of the store (its changelog then gets the latest count of
    each word once per commit; the sink still gets every count)."""
    text = StringDeserializer()
    topology = Topology()
    topology.add_source("lines", input_topic, value_deserializer=text)
    topology.add_processor("split", SplitWords, "lines")
    topology.add_repartition(
        "words",
        "split",
        key_serializer=StringSerializer(),
        value_serializer=StringSerializer(),
        key_deserializer=text,
        value_deserializer=text,
    )
    topology.add_processor("count", CountWords, "words")
    topology.add_store("counts", "count", caching=caching)
    topology.add_sink(
        "counts-sink",
        output_topic,
        "count",
        key_serializer=StringSerializer(),
        value_serializer=StringSerializer(),
    )
    return topology


topology = word_count_topology(
    os.environ.get("STREAMSTATE_INPUT_TOPIC", "text-lines"),
    os.environ.get("STREAMSTATE_OUTPUT_TOPIC", "word-counts"),
)

app = StreamsApp(
    topology,
    {
        "application.id": os.environ.get("STREAMSTATE_APPLICATION_ID", "word-count-app"),
        "bootstrap.servers": os.environ.get("STREAMSTATE_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        "state.dir": os.environ.get(
            "STREAMSTATE_STATE_DIR", os.path.join(tempfile.gettempdir(), "streamstate-example")
        ),
        "commit.interval.ms": 1000,
        "session.timeout.ms": 6000,
    },
)
