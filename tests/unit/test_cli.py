"""The ``streamstate`` command's error contract: one clear line, non-zero exit."""

from __future__ import annotations

import subprocess
import sys


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
