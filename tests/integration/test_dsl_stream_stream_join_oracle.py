"""Windowed KStream-KStream joins behave as Kafka Streams 4.4's: every scenario of
``tests/unit/test_dsl_stream_stream_join.py`` (Kafka's ``KStreamKStreamJoinTest``,
``KStreamKStreamLeftJoinTest`` and ``KStreamKStreamOuterJoinTest``, and the edges they leave
out), run in streamstate's ``TopologyTestDriver``, writes exactly what
``benches/kstreams/StreamStreamJoinScenarios.java`` reports from Kafka's own driver on the same
program and records, batch by batch, and counts the same ``dropped-records-total``; and the
expected outputs written down in the unit tests are Kafka's.

The oracle is Kafka Streams itself (run once per module, every scenario in one JVM); without
Java or its jars (``make kstreams``) these tests fail with the error.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from benches import _kstreams
from tests.unit.test_dsl_stream_stream_join import EXPECTED, SCENARIOS, as_text, expand, run


@pytest.fixture(scope="module")
def kafka_report() -> dict[str, Any]:
    """Kafka's driver's output and dropped records, by scenario (Java runs once)."""
    arguments: list[str] = []
    for i, (name, scenario) in enumerate(SCENARIOS.items()):
        before, after, grace = scenario.windows
        events = " ".join(expand(scenario.events))
        arguments += [
            f"--s{i}",
            f"{name};{scenario.kind};{before};{after};{grace};{scenario.emit_interval_ms};{events}",
        ]
    report = _kstreams._run_java("StreamStreamJoinScenarios", arguments, 300.0)
    return {str(name): json.loads(str(text)) for name, text in report.items()}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_as_kafkas_driver(name: str, kafka_report: dict[str, Any]) -> None:
    kafka = kafka_report[name]
    assert run(SCENARIOS[name]) == (kafka["batches"], kafka["dropped"])
    assert EXPECTED[name] == (as_text(kafka["batches"]), kafka["dropped"])


def test_every_scenario_ran_in_java(kafka_report: dict[str, Any]) -> None:
    assert sorted(kafka_report) == sorted(SCENARIOS)
