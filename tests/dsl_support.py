"""What the DSL's driver tests share: Kafka's ``MockApiProcessor`` (capture what a stream
forwards) and the dropped-records count."""

from __future__ import annotations

from typing import Any

from streamstate import Processor
from streamstate.testing import TopologyTestDriver


class Capture(Processor):
    """Kafka's ``MockApiProcessor``: keeps ``(key, value, timestamp)`` of what it receives."""

    def __init__(self, out: list[tuple[Any, Any, int]]) -> None:
        self.out = out

    def process(self, record: Any) -> None:
        self.out.append((record.key, record.value, record.timestamp))


def capture(stream: Any) -> list[tuple[Any, Any, int]]:
    """What ``stream`` forwards, in order (``stream.process(supplier)`` in Kafka's tests)."""
    out: list[tuple[Any, Any, int]] = []
    stream.process(lambda: Capture(out))
    return out


def dropped(driver: TopologyTestDriver) -> int:
    """The driver's ``dropped-records-total``."""
    return int(driver.metrics()["dropped-records-total"])
