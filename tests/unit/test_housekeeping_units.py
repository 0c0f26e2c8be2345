"""Housekeeping without a broker: the configs of internal topics and of the state cleaner, the
cleaner's choice of directories, and ``clean_up()``'s state check (the real-broker tests are in
``tests/integration/test_housekeeping.py``)."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path
from typing import Any

import pytest

from streamstate import ProcessorStateError, StreamsError
from streamstate.app import State, StreamsApp, Topology
from streamstate.app.config import StreamsConfig
from streamstate.app.internal_topics import internal_topic_config
from streamstate.app.state_directory import (
    PROCESS_FILE,
    StateDirectoryLock,
    TaskDirectories,
    clean_app_dir,
    clean_removed_tasks,
)

_BASE = {"application.id": "hk", "bootstrap.servers": "127.0.0.1:9"}


def test_defaults_are_kafkas() -> None:
    config = StreamsConfig.from_mapping(_BASE)
    assert config.state_cleanup_delay_ms == 600_000
    assert config.replication_factor == -1
    assert config.topic_configs == {}


def test_topic_settings_become_topic_configs_as_strings() -> None:
    config = StreamsConfig.from_mapping(
        {
            **_BASE,
            "replication.factor": "3",
            "topic.min.insync.replicas": 2,
            "topic.unclean.leader.election.enable": False,
            "topic.min.cleanable.dirty.ratio": 0.1,
            "topic.segment.bytes": "1048576",
        }
    )
    assert config.replication_factor == 3
    assert config.topic_configs == {
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "false",
        "min.cleanable.dirty.ratio": "0.1",
        "segment.bytes": "1048576",
    }
    # topic.* is not a client setting: no client receives it.
    assert all("topic.min.insync.replicas" not in o for o in config.overrides.values())


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("replication.factor", 0, "-1 .*or at least 1"),
        ("replication.factor", -2, "-1 .*or at least 1"),
        ("replication.factor", "two", "takes an integer"),
        ("replication.factor", 1.5, "takes an integer"),
        ("replication.factor", True, "takes an integer"),
        ("topic.min.insync.replicas", None, "topic.min.insync.replicas takes a string"),
        ("topic.cleanup.policy", ["compact"], "takes a string"),
        ("topic.", "1", "names no topic config"),
        ("state.cleanup.delay.ms", 0, "at least 1"),
        ("state.cleanup.delay.ms", "soon", "takes milliseconds"),
        ("state.cleanup.delay.ms", 1.5, "takes milliseconds"),
    ],
)
def test_bad_values_are_refused_naming_the_setting(name: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StreamsConfig.from_mapping({**_BASE, name: value})


def test_topic_configs_layer_library_then_global_then_own() -> None:
    library = {"cleanup.policy": "compact"}
    assert internal_topic_config(library, {"segment.ms": "1"}, None) == {
        "cleanup.policy": "compact",
        "segment.ms": "1",
    }
    assert internal_topic_config(
        library,
        {"cleanup.policy": "compact,delete", "segment.ms": "1"},
        {"segment.ms": "2", "retention.ms": "3"},
    ) == {"cleanup.policy": "compact,delete", "segment.ms": "2", "retention.ms": "3"}


def _aged(path: Path, seconds: float) -> Path:
    past = time.time() - seconds
    os.utime(path, (past, past))
    return path


class _Task:
    """Stands for a StreamTask holding its directory."""


def test_the_cleaner_deletes_only_old_unheld_task_directories(tmp_path: Path) -> None:
    app_dir = tmp_path / "app"
    for name in ("0", "1", "2", "0_3", "1_0", "global", "notatask", "3_x"):
        (app_dir / name).mkdir(parents=True)
        (app_dir / name / ".checkpoint").write_text("0\n0\n")
    (app_dir / PROCESS_FILE).write_text("{}")
    directories = TaskDirectories()
    holder = _Task()
    directories.claim(app_dir / "1", holder)
    for name in ("0", "1", "0_3", "global", "notatask", "3_x", PROCESS_FILE):
        _aged(app_dir / name, 10)
    _aged(app_dir / "1_0", 0.5)  # recently closed here: younger than the delay
    deleted = clean_removed_tasks(app_dir, 2_000, directories=directories)
    assert sorted(p.name for p in deleted) == ["0", "0_3"]
    assert sorted(p.name for p in app_dir.iterdir()) == sorted(
        ["1", "2", "1_0", "global", "notatask", "3_x", PROCESS_FILE]
    )
    # Released, the held one goes at the next run; a holder collected without releasing
    # (a task that failed half-built) holds nothing.
    directories.release(app_dir / "1", holder)
    other = _Task()
    directories.claim(app_dir / "2", other)
    _aged(app_dir / "2", 10)
    _aged(app_dir / "1", 10)
    del other
    gc.collect()
    assert {p.name for p in clean_removed_tasks(app_dir, 2_000, directories=directories)} == {
        "1",
        "2",
    }


def test_the_cleaner_of_a_missing_directory_does_nothing(tmp_path: Path) -> None:
    assert clean_removed_tasks(tmp_path / "absent", 1) == []


def test_clean_app_dir_keeps_the_lock_and_the_process_id(tmp_path: Path) -> None:
    app_dir = tmp_path / "app"
    (app_dir / "0_0" / "store").mkdir(parents=True)
    (app_dir / "global").mkdir()
    (app_dir / PROCESS_FILE).write_text("{}")
    (app_dir / "stray-file").write_text("x")
    clean_app_dir(app_dir)
    assert sorted(p.name for p in app_dir.iterdir()) == sorted([".lock", PROCESS_FILE])
    clean_app_dir(tmp_path / "absent")  # nothing there: nothing to do


def test_clean_app_dir_refuses_a_directory_another_client_runs_on(tmp_path: Path) -> None:
    app_dir = tmp_path / "app"
    (app_dir / "0").mkdir(parents=True)
    running = StateDirectoryLock(app_dir)
    running.acquire()
    try:
        with pytest.raises(ProcessorStateError, match="in use by another"):
            clean_app_dir(app_dir)
    finally:
        running.release()
    assert (app_dir / "0").is_dir()


def test_clean_up_is_refused_unless_created_or_stopped(tmp_path: Path) -> None:
    topology = Topology().add_store("s")

    @topology.processor(sources=["in"], stores=["s"])
    def noop(ctx: Any, record: Any) -> None:
        pass

    app = StreamsApp(topology, {**_BASE, "state.dir": str(tmp_path)})
    (tmp_path / "hk" / "0").mkdir(parents=True)
    app.clean_up()
    assert not (tmp_path / "hk" / "0").exists()
    app._machine.transition(State.REBALANCING)
    with pytest.raises(StreamsError, match="while it is running"):
        app.clean_up()
