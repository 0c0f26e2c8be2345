"""``python.gc.freeze`` through ``StreamsApp`` on the real broker: a running client holds the
heap frozen (``gc.freeze()``), the last one to close unfreezes it, and the setting turns it
off (``streamstate.app.garbage_collection``)."""

from __future__ import annotations

import gc
from pathlib import Path

from tests.apps import new_app, wait_until

from streamstate.app import State, StreamsApp
from streamstate.dsl import StreamsBuilder
from streamstate.kafka_local import KafkaTestCluster
from streamstate.serde import Serdes


def _copy(
    kafka: KafkaTestCluster, apps: list[StreamsApp], tmp: Path, **config: object
) -> StreamsApp:
    builder = StreamsBuilder()
    builder.stream(
        kafka.create_topic(partitions=1), key_serde=Serdes.Bytes(), value_serde=Serdes.Bytes()
    ).to(kafka.create_topic(partitions=1))
    app = new_app(apps, kafka, builder.build(), tmp, **config)
    app.start()
    wait_until(lambda: app.state is State.RUNNING, "RUNNING")
    return app


def test_running_clients_hold_the_heap_frozen_until_the_last_closes(
    kafka: KafkaTestCluster, apps: list[StreamsApp], tmp_path: Path
) -> None:
    assert gc.get_freeze_count() == 0, "premise: no client of an earlier test still runs"
    first = _copy(kafka, apps, tmp_path / "first")
    assert gc.get_freeze_count() > 0
    second = _copy(kafka, apps, tmp_path / "second")
    assert first.close(30)
    assert gc.get_freeze_count() > 0, "the first close unfroze while a client still runs"
    assert second.close(30)
    assert gc.get_freeze_count() == 0


def test_the_setting_turns_the_freeze_off(
    kafka: KafkaTestCluster, apps: list[StreamsApp], tmp_path: Path
) -> None:
    app = _copy(kafka, apps, tmp_path, **{"python.gc.freeze": False})
    assert gc.get_freeze_count() == 0
    assert app.close(30)
