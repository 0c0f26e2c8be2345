"""Chaos: the broker stopped and started again (same port, same log directory) while the app
processes. The client must ride it out (retrying commits, its producer retrying sends), never
reaching ERROR, and every input record's effect must arrive (at-least-once)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from tests.chaos._helpers import SinkReader, wait_until

from streamstate.app import State, StreamsApp, Topology
from streamstate.testing import KafkaTestCluster


def test_the_app_survives_a_broker_restart_mid_processing(tmp_path: Path) -> None:
    cluster = KafkaTestCluster.start_local(tmp_path / "broker", heap_mb=512)
    broker = cluster.broker
    assert broker is not None
    app: StreamsApp | None = None
    reader: SinkReader | None = None
    try:
        source, sink = cluster.create_topic(partitions=2), cluster.create_topic(partitions=2)
        expected = set(cluster.produce(source, [(b"k%d" % i, b"v") for i in range(3_000)]))
        topology = Topology()

        @topology.processor(sources=[source], sinks=[sink])
        def forward(ctx: Any, record: Any) -> None:
            if record.offset % 20 == 0:
                time.sleep(0.002)
            ctx.send(sink, record.key, b"%d:%d" % (record.partition, record.offset))

        app = StreamsApp(
            topology,
            {
                "application.id": f"restart-{uuid.uuid4().hex[:8]}",
                "bootstrap.servers": cluster.bootstrap_servers,
                "state.dir": str(tmp_path / "state"),
                "commit.interval.ms": 200,
                "session.timeout.ms": 10_000,
                "buffered.records.per.partition": 100,
            },
        )
        states: list[State] = []
        app.set_state_listener(lambda new, old: states.append(new))
        app.start()
        reader = SinkReader(cluster.bootstrap_servers, sink)
        wait_until(lambda: len(reader.poll()) >= 200, "processing under way")
        address = cluster.bootstrap_servers
        assert broker.stop()
        time.sleep(3)
        assert broker.start() == address  # the same port and log directory
        expected |= set(cluster.produce(source, [(b"m%d" % i, b"v") for i in range(1_000)]))
        wait_until(lambda: reader.poll() >= expected, "every record's effect in the sink")
        assert State.ERROR not in states and State.PENDING_ERROR not in states, states
        assert app.state in (State.RUNNING, State.REBALANCING)
    finally:
        if reader is not None:
            reader.close()
        if app is not None:
            app.close(60)
        cluster.close()
