"""``StopRequest``: a SIGTERM always stops the main loop, however busy the other threads are.

The ``threading.Event`` it replaces deadlocked when the signal interrupted ``Event.wait`` inside
its lock (about one SIGTERM in two with a main thread polling ``wait(0)`` beside two busy
threads): the chaos harness's scale-out instance then never closed. The children below poll as
tightly as that, so a lock in the handler's path would hang some of them.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from streamstate.cli.signals import StopRequest

_CHILD = """
import sys, threading
from streamstate.cli.signals import StopRequest

def busy():
    while True:
        sum(range(1000))

for _ in range(2):
    threading.Thread(target=busy, daemon=True).start()
with StopRequest().installed() as stop:
    print("ready", flush=True)
    while not stop.wait(0.0):
        pass
print("stopped", stop.signal, flush=True)
"""


def test_a_sigterm_stops_a_tightly_polling_main_thread_every_time() -> None:
    for attempt in range(8):
        child = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        # Different moments of the poll loop from one attempt to the next.
        time.sleep(0.01 * (attempt % 5))
        child.send_signal(signal.SIGTERM)
        try:
            out, _ = child.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            pytest.fail(f"attempt {attempt}: the child did not stop within 15 s of SIGTERM")
        assert out.split() == ["stopped", str(int(signal.SIGTERM))]


def test_wait_returns_false_after_its_timeout_and_true_once_requested() -> None:
    stop = StopRequest()
    started = time.monotonic()
    assert stop.wait(0.12) is False
    assert time.monotonic() - started >= 0.12
    stop.request()
    assert stop.is_set() and stop.wait(10.0) is True


def test_installed_puts_the_previous_handlers_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    stop = StopRequest()
    with stop.installed([signal.SIGTERM]):
        assert signal.getsignal(signal.SIGTERM) == stop.request
    assert signal.getsignal(signal.SIGTERM) == before
