"""Every public name keeps its import path: the modules that moved into ``state/``,
``clients/``, ``testing/`` and ``cli/`` are still importable where users first met them, as the
very same objects."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys

import pytest

import streamstate

# (old module, new module, the names that moved, space-separated)
MOVED = [
    (
        "streamstate.stores",
        "streamstate.state.stores",
        "InMemoryKeyValueStore KeyValueIterator PersistentKeyValueStore RestoredBatch process_next",
    ),
    ("streamstate.checkpoint", "streamstate.state.checkpoint", "OffsetCheckpoint"),
    ("streamstate.changelog", "streamstate.state.changelog_reader", "StoreChangelogReader"),
    ("streamstate.changelog", "streamstate.state.restorer", "StateRestoreListener StateRestorer"),
    ("streamstate.changelog", "streamstate.state.stores", "holds_data wipe_store"),
    ("streamstate.changelog", "streamstate.clients.config", "restore_consumer_config"),
    ("streamstate.changelog", "streamstate.clients.restore_consumer", "open_restore_consumer"),
    (
        "streamstate.topic_restore",
        "streamstate.state.topic_restore",
        "CHECKPOINT_FILE PartitionRestoreResult read_checkpoint restore_topic select_partitions "
        "store_directory topic_partitions",
    ),
    (
        "streamstate.kafka_local",
        "streamstate.testing.broker",
        "KAFKA_VERSION LocalKafka LocalKafkaError cache_dir resolve_kafka",
    ),
    ("streamstate.kafka_local", "streamstate.testing.cluster", "KafkaTestCluster"),
    ("streamstate.kafka_local", "streamstate.cli.kafka", "main"),
]


@pytest.mark.parametrize(("old", "new", "names"), MOVED)
def test_a_moved_name_is_the_same_object_at_its_old_path(old: str, new: str, names: str) -> None:
    before, after = importlib.import_module(old), importlib.import_module(new)
    for name in names.split():
        assert getattr(before, name) is getattr(after, name), f"{old}.{name}"
        assert name in before.__all__, f"{old}.__all__ lacks {name}"


def test_the_old_modules_export_exactly_what_they_did() -> None:
    exported: dict[str, set[str]] = {old: set() for old, _, _ in MOVED}
    for old, _, names in MOVED:
        exported[old].update(names.split())
    for old, names in exported.items():
        assert set(importlib.import_module(old).__all__) == names, old


def test_the_package_top_exports_the_moved_state_names() -> None:
    for _, new, names in MOVED:
        if new.startswith("streamstate.state."):
            for name in set(names.split()) & set(streamstate.__all__):
                assert getattr(streamstate, name) is getattr(importlib.import_module(new), name)


def test_the_console_script_runs_the_command_line() -> None:
    (script,) = [
        e
        for e in importlib.metadata.entry_points(group="console_scripts")
        if e.name == "streamstate"
    ]
    assert script.value == "streamstate.cli:main"
    assert script.load() is importlib.import_module("streamstate.cli.main").main


def test_the_library_imports_neither_the_cli_nor_the_testing_package() -> None:
    # A fresh interpreter: importing everything a user imports must not pull the workbench in.
    code = (
        "import sys, streamstate, streamstate.app, streamstate.state, streamstate.clients, "
        "streamstate.serde, streamstate.timestamps, streamstate.errors, streamstate.spark\n"
        "loaded = sorted(m for m in sys.modules "
        "if m.split('.')[:2] in (['streamstate', 'cli'], ['streamstate', 'testing']))\n"
        "print(','.join(loaded))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == ""
