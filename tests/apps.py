"""What the tests of running apps share: waiting, with a deadline, for something to happen,
and an app in a child process to SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TIMEOUT = 90.0


def wait_until(
    condition: Callable[[], bool], what: str, timeout: float = TIMEOUT, interval: float = 0.1
) -> None:
    """Polls ``condition`` every ``interval`` seconds until it holds; fails naming ``what``
    after ``timeout`` seconds (generous: the machine is shared with the broker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def start_app_child(imports: str, topology: str, config: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Starts a ``StreamsApp`` in a child process, which runs until it is killed: ``topology``
    is a Python expression building its topology (``imports``: the import lines it needs),
    ``config`` its config."""
    script = "\n".join(
        [
            "import time",
            "from streamstate.app import StreamsApp",
            imports,
            f"app = StreamsApp({topology}, {config!r})",
            "app.start()",
            "time.sleep(600)",
        ]
    )
    root = Path(__file__).resolve().parents[1]
    return subprocess.Popen(
        [sys.executable, "-c", script], cwd=root, env={**os.environ, "PYTHONPATH": str(root)}
    )


def kill_word_count_mid_stream(
    kafka: Any, child: subprocess.Popen[bytes], app_id: str, text: str, lines: int
) -> None:
    """SIGKILLs the word count running in ``child`` mid-stream: once it has committed some of
    the ``lines`` of ``text`` and then sent 5,000 more words through its repartition topic
    ``<app_id>-words-repartition``, so that the kill leaves an open transaction with records
    in every topic it writes. Fails if the child had committed every line by then."""
    from confluent_kafka import KafkaException  # noqa: PLC0415 - only the kill tests need it
    from confluent_kafka import TopicPartition as KafkaTopicPartition  # noqa: PLC0415

    offsets = kafka.consumer(**{"group.id": app_id})
    inputs = [KafkaTopicPartition(text, p) for p in kafka.partitions(text)]
    committed: list[int] = []
    try:

        def some_committed() -> bool:
            try:
                positions = offsets.committed(inputs, timeout=10)
            except KafkaException:  # the group's coordinator is not known yet
                return False
            committed.append(sum(max(tp.offset, 0) for tp in positions))
            return committed[-1] > 0

        wait_until(some_committed, "the child committing some lines", interval=0.05)
        repartition = f"{app_id}-words-repartition"
        seen = sum(kafka.end_offsets(repartition).values())
        wait_until(
            lambda: sum(kafka.end_offsets(repartition).values()) >= seen + 5_000,
            "more words through the repartition topic",
            interval=0.02,
        )
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        offsets.close()
    assert committed[-1] < lines, "the kill should land mid-stream"
