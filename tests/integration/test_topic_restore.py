"""``restore_topic`` and the ``streamstate restore`` / ``query`` commands on the real broker.

Every test compares the restored stores with a plain-Python replay of what was produced (the
last write to each key wins, ``None`` deletes, null keys are skipped), partition by partition.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from streamstate import (
    OffsetCheckpoint,
    PersistentKeyValueStore,
    StateRestoreListener,
    StreamsError,
    TopicPartition,
)
from streamstate.kafka_local import KafkaTestCluster
from streamstate.topic_restore import (
    CHECKPOINT_FILE,
    PartitionRestoreResult,
    restore_topic,
    store_directory,
)

Entry = tuple[bytes | None, bytes | None]
# Non-ASCII text keys and values must come back as text.
KEY_TEXT = "cl\u00e9-\u043a\u043b\u044e\u0447"
VALUE_TEXT = "\u5024-\u00fc"


def replay(entries: Sequence[Entry], into: dict[bytes, bytes] | None = None) -> dict[bytes, bytes]:
    state = dict(into or {})
    for key, value in entries:
        if key is None:
            continue
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def contents(state_dir: Path, name: str, partition: int) -> dict[bytes, bytes]:
    with PersistentKeyValueStore(name, store_directory(state_dir, name, partition)) as store:
        return dict(store.all())


def checkpoint_of(state_dir: Path, name: str, partition: int) -> dict[TopicPartition, int]:
    directory = store_directory(state_dir, name, partition)
    return OffsetCheckpoint(directory / CHECKPOINT_FILE).read()


def changelog(n: int, seed: int, keys: int = 50) -> list[Entry]:
    """Puts, deletes and a few null keys over ``keys`` keys, deterministic per seed."""
    entries: list[Entry] = []
    for i in range(n):
        k = (i * 7 + seed) % keys
        if i % 11 == 5:
            entries.append((None, b"no-key-%d" % i))
        elif i % 5 == 3:
            entries.append((b"key-%03d" % k, None))
        else:
            entries.append((b"key-%03d" % k, b"value-%d-%d" % (seed, i)))
    return entries


def produce(kafka: KafkaTestCluster, topic: str, partition: int, entries: list[Entry]) -> None:
    kafka.produce(topic, entries, partition=partition)


@pytest.fixture
def topic(kafka: KafkaTestCluster) -> str:
    # Not compacted: a compacted topic refuses the null-key records the changelogs here hold.
    return kafka.create_topic(partitions=3)


def test_restores_every_partition_and_checkpoints_it(
    kafka: KafkaTestCluster, topic: str, tmp_path: Path
) -> None:
    produced = {p: changelog(200 + 50 * p, seed=p) for p in range(3)}
    for p, entries in produced.items():
        produce(kafka, topic, p, entries)

    results = restore_topic(kafka.bootstrap_servers, topic, tmp_path)

    assert [r.partition for r in results] == [0, 1, 2]
    for r in results:
        entries = produced[r.partition]
        applied = sum(1 for k, _ in entries if k is not None)
        assert (r.start_offset, r.end_offset, r.restored) == (0, len(entries), applied)
        assert r.seconds >= 0
        assert contents(tmp_path, topic, r.partition) == replay(entries)
        last_keyed = max(i for i, (k, _) in enumerate(entries) if k is not None)
        assert checkpoint_of(tmp_path, topic, r.partition) == {
            TopicPartition(topic, r.partition): last_keyed
        }


def test_a_second_run_resumes_from_the_checkpoint(
    kafka: KafkaTestCluster, topic: str, tmp_path: Path
) -> None:
    first = changelog(120, seed=1)
    produce(kafka, topic, 1, first)
    restore_topic(kafka.bootstrap_servers, topic, tmp_path, partitions=[1], store_name="s")
    more = [(b"key-%03d" % i, b"later-%d" % i) for i in range(30)] + [(b"key-001", None)]
    produce(kafka, topic, 1, more)

    results = restore_topic(
        kafka.bootstrap_servers, topic, tmp_path, partitions=[1], store_name="s"
    )

    assert results == [
        PartitionRestoreResult(1, len(first), len(first) + len(more), len(more), results[0].seconds)
    ]
    assert contents(tmp_path, "s", 1) == replay(first + more)
    assert not store_directory(tmp_path, "s", 0).exists()


class _Batches(StateRestoreListener):
    def __init__(self) -> None:
        self.sizes: list[int] = []

    def on_batch_restored(
        self, tp: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        self.sizes.append(num_restored)


def test_max_poll_records_caps_each_batch_the_listener_hears_of(
    kafka: KafkaTestCluster, topic: str, tmp_path: Path
) -> None:
    entries = changelog(6_000, seed=5)
    produce(kafka, topic, 2, entries)
    batches = _Batches()

    results = restore_topic(
        kafka.bootstrap_servers,
        topic,
        tmp_path,
        partitions=[2],
        restore_listener=batches,
        max_poll_records=1_000,
    )

    applied = sum(1 for k, _ in entries if k is not None)
    assert results[0].restored == sum(batches.sizes) == applied
    # Each poll reads at most 1,000 records, some of them null keys that are not applied.
    assert max(batches.sizes) <= 1_000
    assert len(batches.sizes) >= 6
    assert contents(tmp_path, topic, 2) == replay(entries)
    with pytest.raises(ValueError, match="max_poll_records"):
        restore_topic(kafka.bootstrap_servers, topic, tmp_path, max_poll_records=999)


def test_nothing_to_restore_reports_the_end_as_start(
    kafka: KafkaTestCluster, topic: str, tmp_path: Path
) -> None:
    produce(kafka, topic, 0, changelog(10, seed=3))
    restore_topic(kafka.bootstrap_servers, topic, tmp_path, partitions=[0, 2])
    again = restore_topic(kafka.bootstrap_servers, topic, tmp_path, partitions=[0, 2])
    assert [(r.partition, r.start_offset, r.end_offset, r.restored) for r in again] == [
        (0, 10, 10, 0),
        (2, 0, 0, 0),
    ]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(b"0\n1\n", id="cut-short"),
        pytest.param(b"\xff\xfe garbage", id="not-utf8"),
        pytest.param(b"7\n1\nx 0 3\n", id="unknown-version"),
    ],
)
def test_a_corrupt_checkpoint_leads_to_a_safe_full_restore(
    kafka: KafkaTestCluster,
    topic: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    damage: bytes,
) -> None:
    entries = changelog(80, seed=4)
    produce(kafka, topic, 2, entries)
    directory = store_directory(tmp_path, topic, 2)
    directory.mkdir(parents=True)
    with PersistentKeyValueStore(topic, directory) as store:
        store.put(b"stale-key", b"must go")
    (directory / CHECKPOINT_FILE).write_bytes(damage)

    with caplog.at_level(logging.WARNING, logger="streamstate.topic_restore"):
        results = restore_topic(kafka.bootstrap_servers, topic, tmp_path, partitions=[2])

    assert results[0].start_offset == 0
    assert contents(tmp_path, topic, 2) == replay(entries)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "corrupt" in w.lower() and f"changelog topic {topic!r} partition 2" in w for w in warnings
    ), warnings


def test_a_checkpoint_of_another_changelog_is_not_trusted(
    kafka: KafkaTestCluster, topic: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    entries = changelog(60, seed=5)
    produce(kafka, topic, 0, entries)
    directory = store_directory(tmp_path, topic, 0)
    directory.mkdir(parents=True)
    with PersistentKeyValueStore(topic, directory) as store:
        store.put(b"stale-key", b"from the other changelog")
    OffsetCheckpoint(directory / CHECKPOINT_FILE).write({TopicPartition("other", 0): 40})

    with caplog.at_level(logging.WARNING, logger="streamstate.topic_restore"):
        results = restore_topic(kafka.bootstrap_servers, topic, tmp_path, partitions=[0])

    assert results[0].restored == sum(1 for k, _ in entries if k is not None)
    assert contents(tmp_path, topic, 0) == replay(entries)
    assert any("other-0" in r.getMessage() for r in caplog.records)


def test_a_store_with_data_but_no_checkpoint_is_wiped_first(
    kafka: KafkaTestCluster, topic: str, tmp_path: Path
) -> None:
    entries = changelog(40, seed=6)
    produce(kafka, topic, 1, entries)
    directory = store_directory(tmp_path, topic, 1)
    directory.mkdir(parents=True)
    with PersistentKeyValueStore(topic, directory) as store:
        store.put(b"stale-key", b"left by a killed run")

    restore_topic(kafka.bootstrap_servers, topic, tmp_path, partitions=[1])

    assert contents(tmp_path, topic, 1) == replay(entries)


def test_records_deleted_past_the_checkpoint_restore_from_the_new_log_start(
    kafka: KafkaTestCluster, topic: str, tmp_path: Path
) -> None:
    first = changelog(50, seed=7)
    produce(kafka, topic, 0, first)
    restore_topic(kafka.bootstrap_servers, topic, tmp_path, partitions=[0])
    later = changelog(50, seed=8)
    produce(kafka, topic, 0, later)
    kafka.delete_records(topic, 0, 70)

    results = restore_topic(kafka.bootstrap_servers, topic, tmp_path, partitions=[0])

    assert results[0].start_offset == 70
    assert contents(tmp_path, topic, 0) == replay(later[20:])


def test_an_unknown_topic_or_partition_is_a_clear_error(
    kafka: KafkaTestCluster, topic: str, tmp_path: Path
) -> None:
    with pytest.raises(StreamsError, match="does not exist") as info:
        restore_topic(kafka.bootstrap_servers, "no-such-topic-xyz", tmp_path)
    assert info.value.topic == "no-such-topic-xyz"
    with pytest.raises(StreamsError, match=r"has partitions 0,1,2, not 7"):
        restore_topic(kafka.bootstrap_servers, topic, tmp_path, partitions=[1, 7])
    assert not (tmp_path / topic).exists()


# --- the command line ------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamstate", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )


def test_restore_json_is_exactly_one_object_and_query_reads_it_back(
    kafka: KafkaTestCluster, topic: str, tmp_path: Path
) -> None:
    entries: list[Entry] = [
        (b"text", b"hello"),
        (b"bin", b"\x00\xff\x10"),
        (KEY_TEXT.encode(), VALUE_TEXT.encode()),
        (b"gone", b"x"),
        (b"gone", None),
    ]
    produce(kafka, topic, 0, entries)
    produce(kafka, topic, 1, [(b"other", b"p1")])
    state = str(tmp_path)
    base = ["--bootstrap-servers", kafka.bootstrap_servers, "--topic", topic]

    out = cli("restore", *base, "--state-dir", state, "--store", "st", "--json")

    assert out.returncode == 0, out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    assert report["total_restored"] == 6
    by_partition = {p["partition"]: p for p in report["partitions"]}
    assert set(by_partition) == {0, 1, 2}
    assert {k: by_partition[0][k] for k in ("start_offset", "end_offset", "restored")} == {
        "start_offset": 0,
        "end_offset": 5,
        "restored": 5,
    }
    assert set(by_partition[0]) == {
        "partition",
        "start_offset",
        "end_offset",
        "restored",
        "seconds",
    }

    q = ["query", "--state-dir", state, "--store", "st"]
    assert cli(*q, "--key", "text").stdout == "text\thello\n"
    assert json.loads(cli(*q, "--key", "bin", "--json").stdout) == {"key": "bin", "value": "00ff10"}
    assert cli(*q, "--key", KEY_TEXT, "--partition", "0").stdout == f"{KEY_TEXT}\t{VALUE_TEXT}\n"
    assert cli(*q, "--key", "6f74686572", "--hex").stdout == "other\tp1\n"
    listed = json.loads(cli(*q, "--all", "--json").stdout)
    assert listed == [
        {"key": "bin", "value": "00ff10"},
        {"key": KEY_TEXT, "value": VALUE_TEXT},
        {"key": "text", "value": "hello"},
        {"key": "other", "value": "p1"},
    ]

    missing = cli(*q, "--key", "gone")
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert missing.stderr.strip().splitlines() == [
        "streamstate: key 'gone' not found in store 'st' (any partition)"
    ]
    wrong_partition = cli(*q, "--key", "other", "--partition", "0")
    assert wrong_partition.returncode == 1

    again = cli("restore", *base, "--state-dir", state, "--store", "st")
    assert again.returncode == 0, again.stderr
    assert "restored 0 records into 3 stores" in again.stdout


def test_cli_errors_are_one_line(kafka: KafkaTestCluster, tmp_path: Path) -> None:
    unknown = cli(
        "restore",
        "--bootstrap-servers",
        kafka.bootstrap_servers,
        "--topic",
        "no-such-topic-cli",
        "--state-dir",
        str(tmp_path),
    )
    assert unknown.returncode == 1
    assert unknown.stderr.strip().splitlines() == [
        f"streamstate: error: topic 'no-such-topic-cli' does not exist at "
        f"{kafka.bootstrap_servers} (Broker: Unknown topic or partition) "
        f"(topic 'no-such-topic-cli')"
    ]
    no_store = cli("query", "--state-dir", str(tmp_path), "--store", "nothing", "--all")
    assert no_store.returncode == 1
    assert len(no_store.stderr.strip().splitlines()) == 1
    assert "no store 'nothing'" in no_store.stderr
