"""The ``streamstate`` command's error contract: one clear line, non-zero exit."""

from __future__ import annotations

import io
import subprocess
import sys

from streamstate import TopicPartition
from streamstate.cli.restore import ProgressBar


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamstate", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_help_lists_the_commands() -> None:
    out = run("--help")
    assert out.returncode == 0
    assert "kafka" in out.stdout and "demo" in out.stdout


def test_errors_are_one_line_without_traceback() -> None:
    # Nothing listens on port 1: the demo's first connection fails fast.
    out = run("demo", "--bootstrap-servers", "127.0.0.1:1", "--records", "1")
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().startswith("streamstate: error:")
    assert len(out.stderr.strip().splitlines()) == 1


def test_help_lists_restore_and_query() -> None:
    out = run("--help")
    assert "restore" in out.stdout and "query" in out.stdout
    restore = run("restore", "--help")
    for option in ("--bootstrap-servers", "--topic", "--state-dir", "--runner", "--json"):
        assert option in restore.stdout


def test_bad_partitions_are_a_usage_error() -> None:
    out = run(
        "restore",
        "--bootstrap-servers",
        "x:1",
        "--topic",
        "t",
        "--state-dir",
        "d",
        "--partitions",
        "0,x",
    )
    assert out.returncode == 2
    assert "--partitions takes partition numbers" in out.stderr


def test_the_progress_bar_shows_totals_rate_and_eta() -> None:
    out = io.StringIO()
    bar = ProgressBar(out, width=10)
    bar.on_restore_start(TopicPartition("t", 0), "s", 100, 300)
    bar.on_restore_start(TopicPartition("t", 1), "s", 0, 200)
    bar.on_batch_restored(TopicPartition("t", 0), "s", 199, 100)
    bar._drawn = 0.0  # let the next update draw at once
    bar.on_batch_restored(TopicPartition("t", 1), "s", 99, 100)
    frames = out.getvalue().split("\r")
    assert frames[-1].startswith("[#####.....]  50.0% 200/400 offsets")
    assert "rec/s" in frames[-1] and "ETA" in frames[-1]
    assert "(2 partitions)" in frames[-1]
    bar.on_restore_end(TopicPartition("t", 0), "s", 200)
    bar.on_restore_end(TopicPartition("t", 1), "s", 200)
    bar.finish()
    assert out.getvalue().split("\r")[-1].startswith("[##########] 100.0% 400/400 offsets")
    assert out.getvalue().endswith("\n")
