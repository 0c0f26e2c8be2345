"""A complete streamstate app: count clicks per user, enrich with a global store of user names.

Run it with ``streamstate run python/streamstate/examples/click_counts.py --bootstrap-servers
HOST:PORT``. It reads ``clicks`` (key: user id, value: anything), keeps a count per user in the
changelogged store ``counts``, looks the user's name up in the global store ``users`` (topic
``users``), and writes ``name=count`` to ``click-counts``. Query it while it runs::

    app.store("counts").get(b"user-7")      # b"42"

The topics must exist (``streamstate demo`` creates them); the changelog topic
``click-counts-app-counts-changelog`` is created by the app. ``streamstate demo`` runs it as part
of the tour.
"""

from __future__ import annotations

import os
import tempfile

from streamstate import ProcessorContext, StampedRecord, StreamsApp, Topology

topology = Topology()
topology.add_store("counts")  # persistent, logged to <application.id>-counts-changelog
topology.add_global_store("users", topic="users")


@topology.processor(sources=["clicks"], stores=["counts", "users"], sinks=["click-counts"])
def count_clicks(ctx: ProcessorContext, record: StampedRecord) -> None:
    """Adds one to the user's count and emits ``name=count``."""
    counts = ctx.store("counts")
    n = int(counts.get(record.key) or b"0") + 1
    counts.put(record.key, b"%d" % n)
    name = ctx.store("users").get(record.key) or record.key
    ctx.send("click-counts", record.key, name + b"=%d" % n)


app = StreamsApp(
    topology,
    {
        "application.id": os.environ.get("STREAMSTATE_APPLICATION_ID", "click-counts-app"),
        "bootstrap.servers": os.environ.get("STREAMSTATE_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        "state.dir": os.environ.get(
            "STREAMSTATE_STATE_DIR", os.path.join(tempfile.gettempdir(), "streamstate-example")
        ),
        "commit.interval.ms": 1000,
        # The broker's minimum: a restarted instance waits this long for a dead one to time out.
        "session.timeout.ms": 6000,
    },
)
