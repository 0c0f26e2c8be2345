"""What the tests of running apps share: waiting, with a deadline, for something to happen,
and an app in a child process to SIGKILL."""

from __future__ import annotations

import os
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
