"""The broker-log summary a failed local Kafka start reports."""

from __future__ import annotations

from streamstate.testing.broker import _first_error

LOG = """[2026-11-22 02:34:30,793] INFO [SocketServer] Enabling request processing.
[2026-11-22 02:34:30,810] ERROR Unable to start acceptor for CONTROLLER (kafka.network.X)
org.apache.kafka.common.KafkaException: Socket server failed to bind: Address already in use.
\tat org.apache.kafka.server.ServerSocketFactory.openServerSocket(ServerSocketFactory.java:56)
\t... 12 more
Caused by: java.net.BindException: Address already in use
\tat java.base/sun.nio.ch.Net.bind0(Native Method)
[2026-11-22 02:34:30,900] ERROR a later error
[2026-11-22 02:34:31,000] INFO shutting down, config dump follows
"""


def test_the_first_error_keeps_its_exception_and_causes_without_frames() -> None:
    assert _first_error(LOG) == (
        "[2026-11-22 02:34:30,810] ERROR Unable to start acceptor for CONTROLLER "
        "(kafka.network.X)\n"
        "org.apache.kafka.common.KafkaException: Socket server failed to bind: Address already "
        "in use.\n"
        "Caused by: java.net.BindException: Address already in use"
    )


def test_a_log_without_errors_has_no_first_error() -> None:
    assert _first_error("[t] INFO fine\n[t] WARN hm\n") is None
