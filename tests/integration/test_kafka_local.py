"""The local broker and its test helpers, against a real Kafka broker."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType

from streamstate.app.key_metadata import murmur2
from streamstate.kafka_local import (
    KafkaTestCluster,
    LocalKafka,
    LocalKafkaError,
    main,
)
from streamstate.testing import broker as kafka_local


def _consume_all(kafka: KafkaTestCluster, topic: str, count: int) -> list[Any]:
    """Read ``count`` records of ``topic`` from the beginning of every partition."""
    consumer = kafka.consumer()
    partitions = sorted(kafka.end_offsets(topic))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    messages: list[Any] = []
    deadline = time.monotonic() + 30
    while len(messages) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        messages.append(message)
    assert len(messages) == count, f"got {len(messages)} of {count} records"
    # Nothing beyond what was produced.
    assert consumer.poll(0.5) is None
    return messages


def _process_running(pid: int) -> bool:
    """True if ``pid`` is a live process (a zombie counts as gone: it holds nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _port_accepts(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def test_round_trip_keeps_values_timestamps_and_offsets(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(partitions=2)
    assigned = kafka.produce(
        topic,
        [
            ("k1", "v1", 1_700_000_000_000),
            (b"k2", b"v2", 1_700_000_000_001),
            {
                "key": "k3",
                "value": "v3",
                "timestamp": 1_700_000_000_002,
                "partition": 1,
                "headers": [("h", b"x")],
            },
            (None, "v4", 1_700_000_000_003),
        ],
        partition=0,
    )
    assert assigned == [(0, 0), (0, 1), (1, 0), (0, 2)]
    assert kafka.end_offsets(topic) == {0: 3, 1: 1}
    assert kafka.beginning_offsets(topic) == {0: 0, 1: 0}

    messages = _consume_all(kafka, topic, 4)
    got = {
        (m.partition(), m.offset()): (m.key(), m.value(), m.timestamp(), m.headers())
        for m in messages
    }
    assert got == {
        (0, 0): (b"k1", b"v1", (TIMESTAMP_CREATE_TIME, 1_700_000_000_000), None),
        (0, 1): (b"k2", b"v2", (TIMESTAMP_CREATE_TIME, 1_700_000_000_001), None),
        (1, 0): (b"k3", b"v3", (TIMESTAMP_CREATE_TIME, 1_700_000_000_002), [("h", b"x")]),
        (0, 2): (None, b"v4", (TIMESTAMP_CREATE_TIME, 1_700_000_000_003), None),
    }


def test_keyed_records_use_the_java_partitioner(kafka: KafkaTestCluster) -> None:
    # A vector from Kafka's own UtilsTest: murmur2("21") == -973932308.
    assert murmur2(b"21") == -973932308
    topic = kafka.create_topic(partitions=5)
    keys = [f"key-{i}".encode() for i in range(40)]
    assigned = kafka.produce(topic, [(key, b"v") for key in keys])
    expected = [(murmur2(key) & 0x7FFFFFFF) % 5 for key in keys]
    assert [p for p, _ in assigned] == expected
    assert len(set(expected)) == 5


def test_topics_are_not_auto_created(kafka: KafkaTestCluster) -> None:
    with pytest.raises(LocalKafkaError, match=r"Unknown topic or partition"):
        kafka.produce("no-such-topic-" + os.urandom(4).hex(), [("k", "v")], timeout=1)


def test_compacted_topic_config_reads_back(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(
        partitions=1,
        config={"cleanup.policy": "compact", "min.compaction.lag.ms": "1234"},
    )
    resource = ConfigResource(ResourceType.TOPIC, topic)
    futures = kafka.admin.describe_configs([resource])
    entries = futures[resource].result(timeout=10)
    assert entries["cleanup.policy"].value == "compact"
    assert entries["min.compaction.lag.ms"].value == "1234"
    assert entries["retention.ms"].is_default


def test_a_test_broker_checks_retention_once_so_old_records_stay(kafka: KafkaTestCluster) -> None:
    # The suite's broker, started by KafkaTestCluster (STREAMSTATE_BOOTSTRAP_SERVERS unset):
    # a windowed changelog's old records must not be deleted while a test reads them.
    assert kafka.broker is not None, "this test needs the broker KafkaTestCluster starts"
    resource = ConfigResource(ResourceType.BROKER, "1")
    entries = kafka.admin.describe_configs([resource])[resource].result(timeout=10)
    assert int(entries["log.retention.check.interval.ms"].value) >= 365 * 24 * 3600 * 1000


def test_delete_records_moves_the_log_start(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(partitions=2)
    kafka.produce(topic, [(f"k{i}", f"v{i}") for i in range(10)], partition=0)
    kafka.produce(topic, [("x", "y")], partition=1)
    assert kafka.delete_records(topic, 0, 4) == 4
    assert kafka.beginning_offsets(topic) == {0: 4, 1: 0}
    assert kafka.end_offsets(topic) == {0: 10, 1: 1}
    messages = _consume_all(kafka, topic, 7)
    assert sorted(m.offset() for m in messages if m.partition() == 0) == list(range(4, 10))
    with pytest.raises(LocalKafkaError):
        kafka.delete_records(topic, 0, 11)  # beyond the high watermark


def test_session_broker_status(kafka: KafkaTestCluster) -> None:
    if kafka.broker is None:
        pytest.skip("running against $STREAMSTATE_BOOTSTRAP_SERVERS")
    status = kafka.broker.status()
    assert status["running"] is True
    assert status["bootstrap_servers"] == kafka.bootstrap_servers
    pid = status["pid"]
    assert isinstance(pid, int) and _process_running(pid)
    assert "kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    # Another handle on the same directory sees the same broker, and start() is idempotent.
    again = LocalKafka(kafka.broker.instance_dir)
    assert again.start() == kafka.bootstrap_servers
    assert again.status()["pid"] == pid
    assert again.bootstrap_servers == kafka.bootstrap_servers


def test_stale_pid_file_is_not_a_running_broker(tmp_path: Path) -> None:
    broker = LocalKafka(tmp_path)
    # This pytest process: alive, but not this instance's Kafka JVM.
    broker.pid_file.write_text(f"{os.getpid()}\n")
    broker.bootstrap_file.write_text("127.0.0.1:1\n")
    assert broker.status()["running"] is False
    assert broker.bootstrap_servers is None
    assert broker.stop() is False
    assert not broker.pid_file.exists()
    assert not broker.bootstrap_file.exists()


def test_jvm_that_dies_at_startup_reports_its_log(
    kafka: KafkaTestCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = LocalKafka(tmp_path / "bad", heap_mb=256)
    with socket.socket() as taken:
        # The broker is handed a controller port that is already taken, so its JVM exits early.
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        real_free_ports = kafka_local._free_ports
        monkeypatch.setattr(
            kafka_local, "_free_ports", lambda count: [*real_free_ports(count - 1), port]
        )
        with pytest.raises(LocalKafkaError) as caught:
            broker.start(timeout=60)
    assert "exited during startup" in caught.value.message
    assert caught.value.detail is not None
    assert "last lines of" in caught.value.detail
    assert "Address already in use" in caught.value.detail
    assert not broker.pid_file.exists()
    assert broker.status()["running"] is False


def test_a_port_taken_before_the_broker_binds_it_is_replaced(
    kafka: KafkaTestCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Between choosing a free port and the JVM binding it, another broker or a client's
    # outgoing connection may take it: the start tries again with new ports.
    broker = LocalKafka(tmp_path / "retry", heap_mb=512)
    handed: list[list[int]] = []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        real_free_ports = kafka_local._free_ports

        def taken_first(count: int) -> list[int]:
            ports = real_free_ports(count)
            handed.append([*ports[:-1], port] if not handed else ports)
            return handed[-1]

        monkeypatch.setattr(kafka_local, "_free_ports", taken_first)
        try:
            address = broker.start(fresh=True, timeout=120)
            assert len(handed) == 2 and port in handed[0], "the first start had the taken port"
            assert port not in handed[1] and address.endswith(f":{handed[1][0]}")
            assert _port_accepts(address)
        finally:
            broker.stop()


def test_cli_and_a_second_broker_stop_cleanly(
    kafka: KafkaTestCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    instance = tmp_path / "second"
    args = ["--instance-dir", str(instance)]

    assert main(["start", *args, "--fresh", "--heap-mb", "512"]) == 0
    address = capsys.readouterr().out.strip()
    assert address.startswith("127.0.0.1:") and address != kafka.bootstrap_servers
    assert (instance / "bootstrap.txt").read_text().strip() == address

    assert main(["status", *args, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["running"] is True and status["bootstrap_servers"] == address
    pid = status["pid"]
    assert _process_running(pid)

    broker = LocalKafka(instance)
    # The second broker really is a broker: topics work on it.
    second = KafkaTestCluster(address)
    try:
        topic = second.create_topic()
        assert second.produce(topic, [("k", "v")]) == [(0, 0)]
    finally:
        second.close()

    assert broker.stop() is True
    assert not _process_running(pid), "the broker JVM outlived stop()"
    assert not _port_accepts(address)
    assert not broker.pid_file.exists()
    assert broker.status() == {
        "running": False,
        "pid": None,
        "bootstrap_servers": None,
        "instance_dir": str(instance.resolve()),
        "version": broker.version,
    }
    assert main(["status", *args]) == 0
    assert capsys.readouterr().out.strip() == "not running"
    assert main(["stop", *args]) == 0
    assert capsys.readouterr().out.strip() == "not running"


def test_cli_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A file where the instance directory should be: start cannot work.
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["start", "--instance-dir", str(blocker / "x")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
