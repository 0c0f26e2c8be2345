"""What the chaos scenarios share: waiting, reading a sink's input coordinates, the app process."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from tests import apps

TIMEOUT = 180.0
APP = Path(__file__).with_name("chaos_app.py")


def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    """Polls ``condition`` until it holds, for up to ``timeout`` seconds (longer than the
    integration tests': the scenarios wait out session timeouts and broker restarts)."""
    apps.wait_until(condition, what, timeout)


class SinkReader:
    """Follows a sink topic from the beginning, collecting the ``partition:offset`` values."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.seen: set[tuple[int, int]] = set()
        self.records = 0
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"chaos-reader-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self._consumer.subscribe([topic])

    def poll(self) -> set[tuple[int, int]]:
        for m in self._consumer.consume(5000, 0.2):
            if m.error() is None:
                p, o = m.value().split(b":")
                self.seen.add((int(p), int(o)))
                self.records += 1
        return self.seen

    def close(self) -> None:
        self._consumer.close()


def read_committed_consumer(bootstrap: str, topic: str, partitions: int) -> Consumer:
    """A consumer of the ``partitions`` of ``topic`` from offset 0, ``read_committed``, in no
    group (assigned; nothing committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-committed-reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
    return consumer


def app_args(bootstrap: str, source: str, sink: str, app_id: str, state_dir: Path) -> list[str]:
    """The arguments every chaos app (``chaos_app.py``, ``count_app.py``) requires."""
    return [
        *("--bootstrap", bootstrap, "--source", source, "--sink", sink),
        *("--app-id", app_id, "--state-dir", str(state_dir)),
    ]


def start_app_process(
    bootstrap: str, source: str, sink: str, app_id: str, state_dir: Path, *extra: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(APP),
            *app_args(bootstrap, source, sink, app_id, state_dir),
            *extra,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
