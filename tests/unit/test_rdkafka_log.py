"""librdkafka's lines through ``RateLimitedLog``: a facility's repeats at DEBUG for a while."""

from __future__ import annotations

import logging

import pytest

from streamstate.clients import rdkafka_log
from streamstate.clients.rdkafka_log import RateLimitedLog

_FMT = "%s [%s] %s"


def _levels(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records]


def test_repeats_of_a_facility_go_to_debug_until_the_window_passes(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(rdkafka_log.time, "monotonic", lambda: now[0])
    log = RateLimitedLog(logging.getLogger("test.rdkafka"), repeat_s=10.0)
    with caplog.at_level(logging.DEBUG, logger="test.rdkafka"):
        log.log(logging.ERROR, _FMT, "FAIL", "c#1", "refused")  # confluent-kafka's levels
        log.log(3, _FMT, "FAIL", "c#1", "refused again")  # librdkafka's syslog level 3 = ERROR
        log.log(logging.WARNING, _FMT, "REQTMOUT", "c#1", "timed out")  # another facility
        now[0] += 10.5
        log.log(logging.ERROR, _FMT, "FAIL", "c#1", "still refused")
    assert _levels(caplog) == [
        (logging.ERROR, "FAIL [c#1] refused"),
        (logging.DEBUG, "FAIL [c#1] refused again"),
        (logging.WARNING, "REQTMOUT [c#1] timed out"),
        (logging.ERROR, "FAIL [c#1] still refused"),
    ]


def test_debug_lines_pass_as_they_are(caplog: pytest.LogCaptureFixture) -> None:
    log = RateLimitedLog(logging.getLogger("test.rdkafka"))
    with caplog.at_level(logging.DEBUG, logger="test.rdkafka"):
        log.log(7, _FMT, "BROKER", "c#1", "one")
        log.log(logging.DEBUG, _FMT, "BROKER", "c#1", "two")
    assert _levels(caplog) == [
        (logging.DEBUG, "BROKER [c#1] one"),
        (logging.DEBUG, "BROKER [c#1] two"),
    ]
