"""Instances (and stream threads) sharing one backlog: the harness of the scale-out scenarios
(``test_scale_out.py``) and of ``benches/bench_scale_out.py``.

:func:`produce_backlog` writes the backlog; :func:`run_group` starts counting apps
(``scale_app.py``, one process each) on it, on a schedule of joins and leaves, and measures the
time from the first start until the group's committed offsets reach the end of every source
partition (lag 0), then closes them and reads what they wrote: every output record, the last
count of each key (read ``read_committed``), and each instance's report (records processed,
CPU seconds, forced rejoins, lost assignments, threads that died).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

APP = Path(__file__).with_name("scale_app.py")


def produce_backlog(bootstrap: str, topic: str, records: int, keys: int) -> Counter[bytes]:
    """Writes ``records`` records over ``keys`` keys (partitioned by key), each exactly once;
    returns the number of records of each key.

    The exactly-once cases count the outputs against ``records``, so the producer is
    idempotent: a plain one resends a whole batch when a request times out (a loaded machine),
    and the topic then holds thousands of records twice (the ``backlog`` fixture checks the
    topic's record count)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True}
    )
    per_key: Counter[bytes] = Counter()
    for i in range(records):
        key = b"key-%05d" % ((i * 7919) % keys)
        per_key[key] += 1
        while True:
            try:
                producer.produce(topic, b"v", key)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError(f"the backlog of {topic} was not all acknowledged")
    return per_key


@dataclass
class Instance:
    """One app process."""

    process: subprocess.Popen[str]
    name: str
    started: float
    report: dict[str, Any] = field(default_factory=dict)


@dataclass
class GroupRun:
    """What :func:`run_group` measured."""

    seconds: float | None  # first start to lag 0; None: not within the timeout
    reports: list[dict[str, Any]]
    outputs: int  # records the sink holds (read_committed)
    last_counts: dict[bytes, int]  # the last count the sink holds per key

    @property
    def rejoins(self) -> int:
        """Forced rejoins over every instance."""
        return sum(int(r.get("rejoins", 0)) for r in self.reports)

    @property
    def cpu(self) -> float:
        """CPU seconds over every instance."""
        return sum(float(r.get("cpu", 0.0)) for r in self.reports)

    @property
    def died(self) -> list[str]:
        """Threads that died, over every instance, and instances that did not close."""
        dead = [d for r in self.reports for d in r.get("died", [])]
        dead += [f"{r['name']}: no clean close ({r})" for r in self.reports if "state" not in r]
        return dead


class Group:
    """Starts and stops app processes of one ``application.id`` on one backlog."""

    def __init__(
        self,
        bootstrap: str,
        sources: list[str],
        sink: str,
        state_root: Path,
        *,
        guarantee: str = "at_least_once",
        threads: int = 1,
        sleep_every: int = 0,
        log_dir: Path | None = None,
    ) -> None:
        """Nothing starts before :meth:`start`."""
        self.bootstrap = bootstrap
        self.sources = sources
        self.sink = sink
        self.app_id = f"scale-{uuid.uuid4().hex[:8]}"
        self.state_root = state_root
        self.guarantee = guarantee
        self.threads = threads
        self.sleep_every = sleep_every
        self.log_dir = log_dir or state_root
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.instances: list[Instance] = []
        self._offsets = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": self.app_id, "enable.auto.commit": False}
        )
        self._ends = self._end_offsets()

    def start(self) -> Instance:
        """Starts one more instance."""
        name = f"i{len(self.instances)}"
        args = [
            *("--bootstrap", self.bootstrap, "--source", self.sources[0], "--sink", self.sink),
            *("--app-id", self.app_id, "--state-dir", str(self.state_root / name)),
            *("--guarantee", self.guarantee, "--threads", str(self.threads)),
            *("--sleep-every", str(self.sleep_every)),
        ]
        if len(self.sources) > 1:
            args += ["--second-source", self.sources[1]]
        stderr = open(self.log_dir / f"{self.app_id}-{name}.log", "w")
        process = subprocess.Popen(
            [sys.executable, str(APP), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        stderr.close()
        instance = Instance(process, name, time.monotonic())
        self.instances.append(instance)
        return instance

    def stop(self, instance: Instance, timeout: float = 90.0) -> None:
        """Closes ``instance`` cleanly (SIGTERM) and collects its report."""
        if instance.process.poll() is None:
            instance.process.send_signal(signal.SIGTERM)
        try:
            out, _ = instance.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            instance.process.kill()
            out, _ = instance.process.communicate()
        instance.report = {"name": instance.name}
        for line in out.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "closed":
                instance.report.update(event)
        if "event" not in instance.report:
            # No clean close: the end of its log (with the stacks faulthandler dumped, if its
            # close hung) says why.
            log = self.log_dir / f"{self.app_id}-{instance.name}.log"
            instance.report["log_tail"] = log.read_text(errors="replace")[-4000:]

    def lag(self) -> int:
        """The records between the group's committed offsets and the sources' ends."""
        tps = [KafkaTopicPartition(t, p) for (t, p) in self._ends]
        committed = self._offsets.committed(tps, timeout=30)
        return sum(
            self._ends[(c.topic, c.partition)] - max(c.offset, 0)
            for c in committed
            if c.error is None
        )

    def processing_started(self) -> bool:
        """Whether any offset of the group has been committed."""
        return self.lag() < sum(self._ends.values())

    def owners(self) -> int:
        """How many members (stream threads) own partitions, from the broker's view of the
        group."""
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        (future,) = admin.describe_consumer_groups([self.app_id]).values()
        try:
            members = future.result(timeout=30).members
        except Exception:  # the group is not there yet
            return 0
        return sum(1 for m in members if m.assignment and m.assignment.topic_partitions)

    def close(self) -> list[dict[str, Any]]:
        """Stops every instance still running; returns every instance's report."""
        for instance in self.instances:
            if not instance.report:
                self.stop(instance)
        self._offsets.close()
        return [i.report for i in self.instances]

    def _end_offsets(self) -> dict[tuple[str, int], int]:
        ends: dict[tuple[str, int], int] = {}
        for topic in self.sources:
            metadata = self._offsets.list_topics(topic, timeout=30).topics[topic]
            for p in metadata.partitions:
                _, high = self._offsets.get_watermark_offsets(
                    KafkaTopicPartition(topic, p), timeout=30
                )
                ends[(topic, p)] = high
        return ends


def run_group(
    group: Group,
    schedule: Callable[[Group], None],
    *,
    timeout: float,
) -> GroupRun:
    """Runs ``schedule(group)`` (which starts the instances, and may stop some), waits up to
    ``timeout`` seconds from the first start for lag 0, then :func:`finish` es the group."""
    try:
        schedule(group)
        seconds = wait_for_lag_zero(group, timeout)
    except BaseException:
        group.close()
        raise
    return finish(group, seconds)


def wait_for_lag_zero(group: Group, timeout: float) -> float | None:
    """Seconds from the group's first start until lag 0; None if not within ``timeout``."""
    first = min(i.started for i in group.instances)
    while time.monotonic() - first < timeout:
        if group.lag() == 0:
            return time.monotonic() - first
        time.sleep(0.2)
    return None


def finish(group: Group, seconds: float | None) -> GroupRun:
    """Closes the group's instances and reads what they wrote."""
    reports = group.close()
    outputs, last = read_sink(group.bootstrap, group.sink)
    return GroupRun(seconds, reports, outputs, last)


def read_sink(bootstrap: str, topic: str) -> tuple[int, dict[bytes, int]]:
    """Every record of ``topic`` read ``read_committed``: how many, and the last value (a count)
    of each key."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"scale-reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in partitions])
        at_end: set[int] = set()
        total = 0
        last: dict[bytes, int] = {}
        deadline = time.monotonic() + 120
        while len(at_end) < len(partitions) and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 1.0):
                error = m.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                    continue
                at_end.discard(m.partition())
                total += 1
                last[m.key()] = int(m.value())
        if len(at_end) < len(partitions):
            raise RuntimeError(f"the sink {topic} was not read to its end in 120 s")
        return total, last
    finally:
        consumer.close()
