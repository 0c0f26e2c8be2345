"""Versioned tables behave as in Kafka Streams 4.4: the programs of
``tests/unit/test_dsl_versioned_store.py`` on streamstate's ``TopologyTestDriver`` give exactly
what ``benches/kstreams/VersionedTablesOracle.java`` reports from Kafka's own driver on the same
programs and records: each output topic (out-of-order updates forwarded to ``to_stream``,
``filter`` and ``map_values`` but not counted by ``group_by``; puts past the retention
dropped), the versioned store's answers as of past times, and ``dropped-records-total``.

The oracle is Kafka Streams itself (run once per module); without Java or its jars
(``make kstreams``) these tests fail with the error.
"""

from __future__ import annotations

from typing import Any

import pytest
from benches import _kstreams
from tests.dsl_support import dropped
from tests.unit.test_dsl_versioned_store import (
    DERIVED_INPUT,
    ORACLE_INPUT,
    STRINGS,
    TEXT,
    derived_program,
    oracle_program,
)

from streamstate.dsl import StreamsBuilder
from streamstate.serde import StringDeserializer
from streamstate.testing import TopologyTestDriver

TABLE_AS_OF = [0, 300, 399, 400, 449, 450, 499, 500, 600]
DERIVED_AS_OF = [49, 50, 100, 150, 199, 200, 300, 350, 400, 450]


@pytest.fixture(scope="module")
def kafka_report() -> dict[str, str]:
    """What Kafka Streams' driver reported, by ``<program>/<what>`` (Java runs once)."""
    report = _kstreams._run_java("VersionedTablesOracle", [], 120.0)
    return {str(name): str(text) for name, text in report.items()}


def _text(value: Any) -> str:
    return "null" if value is None else str(value)


def _record(found: Any) -> str:
    # Kafka's typed store returns no valid-to in 4.4: compare value and timestamp.
    return "null" if found is None else f"{found.value}@{found.timestamp}"


def run(
    program: str,
    builder: StreamsBuilder,
    records: list[tuple[str, str | None, int]],
    *,
    topics: list[str],
    store_name: str,
    as_of: list[int],
) -> dict[str, str]:
    """The same report as the Java program's, from streamstate's driver."""
    report: dict[str, str] = {}
    with TopologyTestDriver(builder.build(), STRINGS) as driver:
        source = driver.create_input_topic("in", TEXT, TEXT)
        for key, value, timestamp in records:
            source.pipe_input(key, value, timestamp)
        for topic in topics:
            out = driver.create_output_topic(topic, StringDeserializer(), StringDeserializer())
            report[f"{program}/{topic}"] = " ".join(
                f"{r.key}={_text(r.value)}@{r.timestamp}" for r in out.read_records_to_list()
            )
        store = driver.get_versioned_key_value_store(store_name)
        report[f"{program}/asof"] = " ".join(f"{t}={_record(store.get('k', t))}" for t in as_of)
        report[f"{program}/latest"] = _record(store.get("k"))
        report[f"{program}/dropped"] = str(dropped(driver))
    return report


@pytest.mark.parametrize("program", ["table", "to_table"])
def test_a_versioned_table_runs_as_in_kafka(program: str, kafka_report: dict[str, str]) -> None:
    ours = run(
        program,
        oracle_program(to_table=program == "to_table"),
        ORACLE_INPUT,
        topics=["out", "filtered", "mapped", "counts"],
        store_name="vs",
        as_of=TABLE_AS_OF,
    )
    assert ours == {k: v for k, v in kafka_report.items() if k.startswith(f"{program}/")}


def test_versioned_filter_and_map_values_stores_run_as_in_kafka(
    kafka_report: dict[str, str],
) -> None:
    ours = run(
        "derived",
        derived_program(),
        DERIVED_INPUT,
        topics=["filtered", "mapped", "counts"],
        store_name="vf",
        as_of=DERIVED_AS_OF,
    )
    assert ours == {k: v for k, v in kafka_report.items() if k.startswith("derived/")}
