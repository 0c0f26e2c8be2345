"""What the exactly-once chaos tests share: the counting app as a child process
(``count_app.py``), the input they count, and the sink read ``read_committed``."""

from __future__ import annotations

import json
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.chaos._helpers import read_committed_consumer

from streamstate.kafka_local import KafkaTestCluster

KEYS = 50
PARTITIONS = 2
DEADLINE = 180.0
APP = Path(__file__).with_name("count_app.py")


class Child:
    """The counting app as a child process; its JSON lines gathered by a reader thread."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(APP), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.put(json.loads(line))

    def wait_for(
        self, condition: Callable[[dict[str, Any]], bool], what: str, meanwhile: Callable[[], None]
    ) -> dict[str, Any]:
        """Returns the first event meeting ``condition``, calling ``meanwhile`` between polls."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is not None and self.events.empty():
                    code = self.process.returncode
                    raise AssertionError(f"the child exited ({code}): {what}") from None
                meanwhile()
                continue
            self.seen.append(event)
            if event.get("event") == "error":
                raise AssertionError(f"the child went to ERROR: {event['error']}")
            if condition(event):
                return event
        raise AssertionError(f"timed out waiting for {what}")

    def until(self, condition: Callable[[], bool], what: str) -> None:
        """Waits for ``condition`` (checked every 0.2 s) while this child runs, never ERROR."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            while not self.events.empty():
                event = self.events.get()
                self.seen.append(event)
                if event.get("event") == "error":
                    raise AssertionError(f"the child went to ERROR: {event['error']}")
            if condition():
                return
            if self.process.poll() is not None:
                raise AssertionError(f"the child exited ({self.process.returncode}): {what}")
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(60)
        self._drain()

    def _drain(self) -> None:
        self._reader.join(30)
        while not self.events.empty():
            self.seen.append(self.events.get())
        if self.process.stdout is not None:
            self.process.stdout.close()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(120)
        self._drain()
        return code


class CommittedSink:
    """Reads the sink from the beginning with ``read_committed``: per key, the counts in order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.counts: dict[bytes, list[int]] = defaultdict(list)
        self._consumer = read_committed_consumer(bootstrap, topic, PARTITIONS)

    def poll(self) -> dict[bytes, list[int]]:
        for m in self._consumer.consume(5000, 0.2):
            if m.error() is None:
                self.counts[m.key()].append(int(m.value()))
        return self.counts

    def close(self) -> None:
        self._consumer.close()


class Input:
    """Produces the input and keeps the number of records of each key."""

    def __init__(self, kafka: KafkaTestCluster, topic: str, rng: random.Random) -> None:
        self.kafka, self.topic, self.rng = kafka, topic, rng
        self.per_key: dict[bytes, int] = defaultdict(int)

    def add(self, n: int) -> None:
        keys = [b"k%02d" % self.rng.randrange(KEYS) for _ in range(n)]
        self.kafka.produce(self.topic, [(k, b"v") for k in keys])
        for k in keys:
            self.per_key[k] += 1


def exact(counts: dict[bytes, list[int]], per_key: dict[bytes, int]) -> dict[str, Any]:
    """The keys whose committed counts are not exactly 1..N: key -> (N, first counts, length)."""
    return {
        k.decode(): (n, counts.get(k, [])[:3], len(counts.get(k, [])))
        for k, n in per_key.items()
        if counts.get(k) != list(range(1, n + 1))
    }


def reached(counts: dict[bytes, list[int]], per_key: dict[bytes, int]) -> bool:
    """Whether every key's count in the sink has reached its number of input records."""
    return all(counts.get(k) and max(counts[k]) >= n for k, n in per_key.items())
