"""When an application has caught up: its consumer group's committed offsets at the end of every
input partition (the lag-0 point the end-to-end benchmarks time to)."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streamstate import State, StreamsApp

__all__ = ["CommittedLag", "run_to_lag_zero"]


class CommittedLag:
    """Whether consumer group ``group`` has committed ``ends`` (partition -> end offset) of
    ``topic``; a context manager that closes its consumer."""

    def __init__(self, bootstrap: str, group: str, topic: str, ends: dict[int, int]) -> None:
        self.ends = ends
        self.partitions = [TopicPartition(topic, p) for p in sorted(ends)]
        # Never subscribes: it only fetches the group's committed offsets.
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )

    def zero(self) -> bool:
        """Whether every partition's committed offset has reached its end."""
        try:
            committed = self.consumer.committed(self.partitions, timeout=10)
        except KafkaException:
            return False  # the coordinator is loading or moving: asked again
        return all(c.error is None and c.offset >= self.ends[c.partition] for c in committed)

    def __enter__(self) -> CommittedLag:
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.close()


def run_to_lag_zero(
    app: StreamsApp,
    lag: CommittedLag,
    *,
    timeout_s: float,
    poll_s: float,
    at_lag_zero: Callable[[], None] | None = None,
) -> tuple[float, float, int]:
    """Starts ``app`` and waits for ``lag`` to reach zero (failing on the app's error or after
    ``timeout_s``); returns the wall and CPU seconds from the start and the app's
    ``dropped-records-total``, and closes the app. ``at_lag_zero`` runs once lag 0 is reached,
    before the app closes (while its threads still run: a diagnostic reads their CPU there)."""
    started, cpu_started = time.monotonic(), time.process_time()
    app.start()
    try:
        while not lag.zero():
            assert app.fatal_error is None, app.fatal_error
            assert app.state is not State.ERROR, "streamstate failed"
            assert time.monotonic() - started < timeout_s, "streamstate did not reach lag 0"
            time.sleep(poll_s)
        run_s, cpu_s = time.monotonic() - started, time.process_time() - cpu_started
        if at_lag_zero is not None:
            at_lag_zero()
        return run_s, cpu_s, int(app.metrics()["dropped-records-total"])
    finally:
        app.close(60)
