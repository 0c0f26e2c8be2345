"""Windowed KStream-KStream joins (``KStream.join`` / ``left_join`` / ``outer_join`` with a
``KStream`` and ``JoinWindows``) behave as Kafka Streams 4.4's, in the ``TopologyTestDriver``.

The scenarios port Kafka's ``KStreamKStreamJoinTest``, ``KStreamKStreamLeftJoinTest`` and
``KStreamKStreamOuterJoinTest`` (each named after the test it ports), plus the edges those tests
leave out (null keys and values, a late record, an expired segment, the emit throttle on the
driver's still wall clock). Each expected output (``EXPECTED``) is what Kafka Streams 4.4's
own ``TopologyTestDriver`` writes for the same program and records (wall clock starting at 0),
with the same ``dropped-records-total``, and for a ported test what that test asserts:
``tests/integration/test_dsl_stream_stream_join_oracle.py`` checks both against Java
(``benches/kstreams/StreamStreamJoinScenarios.java``).

A scenario is a join (``inner``, ``left``, ``outer``), its windows (before, after, grace, ms),
the emit interval (Kafka's tests set 0) and events: ``L:key:value:ts`` / ``R:...`` pipe one
record to the left / right topic (``~`` is ``None``); ``L4:B:1000`` pipes keys 0 to 3 with
values ``B0`` to ``B3`` at 1000, ``L4+:B:1000`` at 1000 + key; ``W:ms`` advances the driver's
wall-clock time; ``;`` reads what the join wrote since, written down in ``EXPECTED`` as
``key:value@timestamp`` (``~`` for a ``None`` key). Keys and values are strings, the joiner is
``f"{left}+{right}"`` (``null`` for ``None``, as Java prints it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from streamstate.dsl import JoinWindows, StreamsBuilder
from streamstate.errors import TopologyError
from streamstate.serde import Serdes
from streamstate.testing import TopologyTestDriver

CONFIG = {"application.id": "ssj", "bootstrap.servers": "unused"}
_METHODS = {"inner": "join", "left": "left_join", "outer": "outer_join"}
STRING = Serdes.String()


class Scenario(NamedTuple):
    """A join, its windows, its emit interval and its events (see the module doc)."""

    kind: str
    windows: tuple[int, int, int]
    events: str
    emit_interval_ms: int = 0


def expand(events: str) -> list[str]:
    """``events`` with every ``L4:B:1000`` / ``L4+:B:1000`` spelled out as records."""
    out: list[str] = []
    for token in events.split():
        head = token.split(":")[0]
        if len(head) > 1 and head[0] in "LR":
            side, count = head[0], head[1:]
            shift = count.endswith("+")
            _, prefix, timestamp = token.split(":")
            for key in range(int(count.rstrip("+"))):
                out.append(f"{side}:{key}:{prefix}{key}:{int(timestamp) + (key if shift else 0)}")
        else:
            out.append(token)
    return out


def _text(value: Any) -> str:
    return "null" if value is None else str(value)


def _none(text: str) -> str | None:
    return None if text == "~" else text


def join_program(kind: str, windows: JoinWindows, **options: Any) -> StreamsBuilder:
    """``l <kind> r`` into ``out``, all strings."""
    builder = StreamsBuilder()
    left = builder.stream("l", key_serde=STRING, value_serde=STRING)
    right = builder.stream("r", key_serde=STRING, value_serde=STRING)
    joined = getattr(left, _METHODS[kind])(
        right, lambda a, b: f"{_text(a)}+{_text(b)}", windows, **options
    )
    joined.to("out", key_serde=STRING, value_serde=STRING)
    return builder


def run(
    scenario: Scenario, config: dict[str, str] = CONFIG
) -> tuple[list[list[list[object]]], float]:
    """What the join wrote at each ``;`` of ``scenario``, and the dropped records."""
    before, after, grace = scenario.windows
    windows = JoinWindows.of_time_difference_and_grace(0, grace).before(before).after(after)
    builder = join_program(scenario.kind, windows, emit_interval_ms=scenario.emit_interval_ms)
    batches: list[list[list[object]]] = []
    with TopologyTestDriver(builder.build(), config) as driver:
        topics = {
            side: driver.create_input_topic(side.lower(), STRING.serializer, STRING.serializer)
            for side in ("L", "R")
        }
        out = driver.create_output_topic("out", STRING.deserializer, STRING.deserializer)
        for event in expand(scenario.events):
            if event == ";":
                batches.append([[r.key, r.value, r.timestamp] for r in out.read_records_to_list()])
            elif event.startswith("W:"):
                driver.advance_wall_clock_time(int(event[2:]))
            else:
                side, key, value, timestamp = event.split(":")
                topics[side].pipe_input(_none(key), _none(value), int(timestamp))
        dropped = float(driver.metrics()["dropped-records-total"])
    return batches, dropped


def as_text(batches: list[list[list[object]]]) -> list[str]:
    """Each batch as ``"key:value@timestamp ..."`` (``~`` for a ``None`` key): the form of
    ``EXPECTED``."""
    return [
        " ".join(f"{'~' if k is None else k}:{v}@{ts}" for k, v, ts in batch) for batch in batches
    ]


_TEST_JOIN = "L2:A:0 ; R2:a:0 ; L4:B:0 ; R4:b:0 ; L4:C:0 ; R2:c:0 ;"
_WINDOWING = (
    "L2:A:0 ; R2:a:0 ; L4+:B:1000 ; R4:b:1100 ; R4:c:1101 ; R4:d:1102 ; R4:e:1103 ; "
    "R4:f:1104 ; R4:g:899 ; R4:h:900 ; R4:i:901 ; R4:j:902 ; R4:k:903 ; R4+:l:2000 ; "
    "L4:C:2100 ; L4:D:2101 ; L4:E:2102 ; L4:F:2103 ; L4:G:2104 ; L4:H:1899 ; L4:I:1900 ; "
    "L4:J:1901 ; L4:K:1902 ; L4:L:1903 ;"
)
_ASYMMETRIC_AFTER = (
    "L4+:A:1000 ; R4:a:999 ; R4:b:1000 ; R4:c:1001 ; R4:d:1002 ; R4:e:1003 ; R4:f:1100 ; "
    "R4:g:1101 ; R4:h:1102 ; R4:i:1103 ; R4:j:1104 ;"
)
_ASYMMETRIC_BEFORE = (
    "L4+:A:1000 ; R4:a:899 ; R4:b:900 ; R4:c:901 ; R4:d:902 ; R4:e:903 ; R4:f:1000 ; "
    "R4:g:1001 ; R4:h:1002 ; R4:i:1003 ; R4:j:1004 ;"
)
_LEFT_EXPIRED = "L:0:A0:1 L:1:A1:2 L:0:A0-0:3 ; R:1:a1:3 ;"
_RIGHT_EXPIRED = "R:0:a0:1 R:1:a1:2 R:0:a0-0:3 ; L:1:A1:3 ;"

SCENARIOS: dict[str, Scenario] = {
    # KStreamKStreamJoinTest
    "testJoin": Scenario("inner", (100, 100, 0), _TEST_JOIN),
    "testOuterJoin": Scenario("outer", (100, 100, 86_400_000), _TEST_JOIN),
    "testWindowing": Scenario("inner", (100, 100, 0), _WINDOWING),
    "testAsymmetricWindowingAfter": Scenario("inner", (0, 100, 0), _ASYMMETRIC_AFTER),
    "testAsymmetricWindowingBefore": Scenario("inner", (100, 0, 0), _ASYMMETRIC_BEFORE),
    "runJoin": Scenario("inner", (50, 50, 50), "L:A:1:1 L:B:1:2 R:A:1:1 R:B:2:2 ;"),
    "shouldLogAndMeterOnSkippedRecordsWithNullValue": Scenario("inner", (100, 100, 0), "L:A:~:0 ;"),
    # the throttle with a moving wall clock (Kafka drives the processor by hand)
    "shouldThrottleEmitNonJoinedOuterRecordsEvenWhenClockDrift": Scenario(
        "outer",
        (1000, 1000, 0),
        "W:1000 R:key1:value1:10000 ; W:1100 R:key2:value2:13000 ; "
        "W:400 R:key3:value3:15000 ; W:1500 R:key4:value4:17000 ;",
        1000,
    ),
    # KStreamKStreamLeftJoinTest
    "left_testLeftJoinDuplicates": Scenario(
        "left",
        (100, 100, 10),
        "L:0:A0:0 L:0:A0-0:0 R:1:a0:111 R:2:dummy:500 ; "
        "L:2:A2:1000 L:2:A2-0:1000 R:2:a2:1001 ; R:3:a3:315 ;",
    ),
    "left_testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor": Scenario(
        "left", (100, 100, 0), f"{_LEFT_EXPIRED} L:2:dummy:401 ; R:2:dummy:401 ;"
    ),
    "left_testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor": Scenario(
        "left", (100, 100, 0), f"{_LEFT_EXPIRED} R:2:dummy:401 ; L:2:dummy:402 ;"
    ),
    "left_testRightNonJoinedRecordsAreNeverEmittedByTheLeftProcessor": Scenario(
        "left", (100, 100, 0), f"{_RIGHT_EXPIRED} L:2:dummy:401 ; R:2:dummy:402 ;"
    ),
    "left_testRightNonJoinedRecordsAreNeverEmittedByTheRightProcessor": Scenario(
        "left", (100, 100, 0), f"{_RIGHT_EXPIRED} R:2:dummy:401 ; L:2:dummy:402 ;"
    ),
    "left_testLeftJoinedRecordsWithZeroAfterAreEmitted": Scenario(
        "left",
        (100, 0, 0),
        "L4+:A:1000 ; R4:a:999 ; R4:b:1000 ; R4:c:1001 ; R4:d:1002 ; R4:e:1003 ; R4:f:1100 ;",
    ),
    "left_runLeftJoin": Scenario(
        "left", (100, 100, 0), "L2:A:0 ; R2:a:0 ; L3:B:0 ; R4:b:0 ; L4:C:0 ; L:0:dummy:1000 ;"
    ),
    "left_testOrdering": Scenario("left", (100, 100, 0), "L:0:A0:0 L:1:A1:100 ; R:1:a1:110 ;"),
    "left_testGracePeriod": Scenario(
        "left", (100, 100, 10), "L2:A:0 ; R4:a:101 ; R:0:dummy:1201 ;"
    ),
    "left_testWindowing": Scenario(
        "left",
        (100, 100, 0),
        "L2:A:0 ; R4:a:0 ; R4+:b:1000 ; L4:B:1100 ; L4:C:1101 ; L4:D:1102 ; L4:E:1103 ; "
        "L4:F:1104 ; L:0:dummy:1405 ; L4:G:899 ; L4:H:900 ; L4:I:901 ; L4:J:902 ; L4:K:903 ; "
        "L:0:dummy:1203 ;",
    ),
    "left_shouldNotEmitLeftJoinResultForAsymmetricWindow": Scenario(
        "left", (0, 100, 0), "L2+:A:0 ; R:0:a0:100 ; R:1:a1:102 ;"
    ),
    # KStreamKStreamOuterJoinTest
    "outer_testOuterJoinDuplicates": Scenario(
        "outer",
        (100, 100, 10),
        "L:0:A0:0 L:0:A0-0:0 R:1:11:0 R:1:12:0 R:1:10:111 R:3:100:211 ; "
        "L:2:A2:200 L:2:A2-0:200 R:2:13:201 R:2:14:201 ; R:3:100:1500 ;",
    ),
    "outer_testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor": Scenario(
        "outer",
        (100, 100, 0),
        "L:0:A0:1 L:1:A1:2 L:0:A0-0:3 ; R:1:11:3 ; L:2:dummy:401 ; R:2:100:401 ;",
    ),
    "outer_testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor": Scenario(
        "outer",
        (100, 100, 0),
        "L:0:A0:1 L:1:A1:2 L:0:A0-0:3 ; R:1:11:3 ; R:2:100:401 ; L:2:dummy:402 ;",
    ),
    "outer_testRightExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor": Scenario(
        "outer",
        (100, 100, 0),
        "R:0:10:1 R:1:11:2 R:0:12:3 ; L:1:A1:3 ; L:2:dummy:401 ; R:2:100:402 ;",
    ),
    "outer_testRightExpiredNonJoinedRecordsAreEmittedByTheRightProcessor": Scenario(
        "outer",
        (100, 100, 0),
        "R:0:10:1 R:1:11:2 R:0:12:3 ; L:1:A1:3 ; R:2:100:401 ; L:2:dummy:402 ;",
    ),
    "outer_testOrdering": Scenario("outer", (100, 100, 0), "L:0:A0:0 L:1:A1:100 ; R:1:11:110 ;"),
    "outer_testGracePeriod": Scenario(
        "outer", (100, 100, 10), "L:0:A0:0 R:1:11:0 ; L:1:A1:101 R:0:10:101 ; R:0:100:112 ;"
    ),
    "outer_testEmitAllNonJoinedResultsForAsymmetricWindow": Scenario(
        "outer",
        (5, 20, 0),
        "L:0:A0:29 ; L:1:A1:30 ; R:2:12:31 ; R:3:13:36 ; R:4:14:37 ; R:5:15:50 ;",
    ),
    "outer_runOuterJoin": Scenario(
        "outer",
        (100, 100, 0),
        "L2:A:0 ; R:0:10:0 R:1:11:0 ; L3:B:0 ; R:0:20:0 R:1:21:0 R:2:22:0 R:3:23:0 ; "
        "L4:C:0 ; L:0:dummy:400 ;",
    ),
    "outer_testWindowing": Scenario(
        "outer",
        (100, 100, 0),
        "L2:A:0 ; R4:1:0 ; R4+:2:1000 ; L4:B:1100 ; L4:C:1101 ; L4:D:1102 ; L4:E:1103 ; "
        "L4:F:1104 ; L:0:dummy:1405 ; L4:G:899 ; L4:H:900 ; L4:I:901 ; L4:J:902 ; L4:K:903 ; "
        "L:0:dummy:1103 ;",
    ),
    "outer_testShouldNotEmitLeftJoinResultForAsymmetricBeforeWindow": Scenario(
        "outer",
        (0, 100, 0),
        "L2+:A:0 ; R:0:10:100 ; R:1:11:102 ; R:2:12:103 ; L:2:A2:103 ;",
    ),
    "outer_testShouldNotEmitLeftJoinResultForAsymmetricAfterWindow": Scenario(
        "outer",
        (100, 0, 0),
        "L2+:A:0 ; R:1:11:1 ; R:2:12:101 ; R:3:13:101 ; L:2:A2:201 ;",
    ),
    # the edges: records without key or value; a record behind the stream time; a record of
    # an expired segment; Kafka's default 1 s emit interval on a wall clock that stands still
    "inner_null_key_and_value": Scenario(
        "inner", (100, 100, 0), "L:~:A:0 L:0:~:0 R:~:a:0 R:0:~:0 R:0:a:0 ;"
    ),
    "left_null_key_and_value": Scenario("left", (100, 100, 0), "L:~:A:0 R:~:a:0 L:0:~:0 ;"),
    "outer_null_key": Scenario("outer", (100, 100, 0), "L:~:A:0 R:~:a:0 ;"),
    "left_late_record_joined_with_null_at_once": Scenario(
        "left", (100, 100, 0), "L:0:A0:1000 R:9:z:2000 ; L:1:late:500 ;"
    ),
    "inner_expired_segment": Scenario(
        "inner", (100, 100, 0), "L:0:A:200000 R:0:a:100 ; L:0:B:150 ;"
    ),
    "left_throttled_by_still_wall_clock": Scenario(
        "left",
        (10, 10, 0),
        "L:0:A0:1 L:1:A1:100 ; L:2:A2:200 ; W:1000 L:3:A3:300 ;",
        1000,
    ),
}

EXPECTED: dict[str, tuple[list[str], float]] = {
    "testJoin": (
        [
            "",
            "0:A0+a0@0 1:A1+a1@0",
            "0:B0+a0@0 1:B1+a1@0",
            "0:A0+b0@0 0:B0+b0@0 1:A1+b1@0 1:B1+b1@0 2:B2+b2@0 3:B3+b3@0",
            "0:C0+a0@0 0:C0+b0@0 1:C1+a1@0 1:C1+b1@0 2:C2+b2@0 3:C3+b3@0",
            "0:A0+c0@0 0:B0+c0@0 0:C0+c0@0 1:A1+c1@0 1:B1+c1@0 1:C1+c1@0",
        ],
        0.0,
    ),
    "testOuterJoin": (
        [
            "",
            "0:A0+a0@0 1:A1+a1@0",
            "0:B0+a0@0 1:B1+a1@0",
            "0:A0+b0@0 0:B0+b0@0 1:A1+b1@0 1:B1+b1@0 2:B2+b2@0 3:B3+b3@0",
            "0:C0+a0@0 0:C0+b0@0 1:C1+a1@0 1:C1+b1@0 2:C2+b2@0 3:C3+b3@0",
            "0:A0+c0@0 0:B0+c0@0 0:C0+c0@0 1:A1+c1@0 1:B1+c1@0 1:C1+c1@0",
        ],
        0.0,
    ),
    "testWindowing": (
        [
            "",
            "0:A0+a0@0 1:A1+a1@0",
            "",
            "0:B0+b0@1100 1:B1+b1@1100 2:B2+b2@1100 3:B3+b3@1100",
            "1:B1+c1@1101 2:B2+c2@1101 3:B3+c3@1101",
            "2:B2+d2@1102 3:B3+d3@1102",
            "3:B3+e3@1103",
            "",
            "",
            "0:B0+h0@1000",
            "0:B0+i0@1000 1:B1+i1@1001",
            "0:B0+j0@1000 1:B1+j1@1001 2:B2+j2@1002",
            "0:B0+k0@1000 1:B1+k1@1001 2:B2+k2@1002 3:B3+k3@1003",
            "",
            "0:C0+l0@2100 1:C1+l1@2100 2:C2+l2@2100 3:C3+l3@2100",
            "1:D1+l1@2101 2:D2+l2@2101 3:D3+l3@2101",
            "2:E2+l2@2102 3:E3+l3@2102",
            "3:F3+l3@2103",
            "",
            "",
            "0:I0+l0@2000",
            "0:J0+l0@2000 1:J1+l1@2001",
            "0:K0+l0@2000 1:K1+l1@2001 2:K2+l2@2002",
            "0:L0+l0@2000 1:L1+l1@2001 2:L2+l2@2002 3:L3+l3@2003",
        ],
        0.0,
    ),
    "testAsymmetricWindowingAfter": (
        [
            "",
            "",
            "0:A0+b0@1000",
            "0:A0+c0@1001 1:A1+c1@1001",
            "0:A0+d0@1002 1:A1+d1@1002 2:A2+d2@1002",
            "0:A0+e0@1003 1:A1+e1@1003 2:A2+e2@1003 3:A3+e3@1003",
            "0:A0+f0@1100 1:A1+f1@1100 2:A2+f2@1100 3:A3+f3@1100",
            "1:A1+g1@1101 2:A2+g2@1101 3:A3+g3@1101",
            "2:A2+h2@1102 3:A3+h3@1102",
            "3:A3+i3@1103",
            "",
        ],
        0.0,
    ),
    "testAsymmetricWindowingBefore": (
        [
            "",
            "",
            "0:A0+b0@1000",
            "0:A0+c0@1000 1:A1+c1@1001",
            "0:A0+d0@1000 1:A1+d1@1001 2:A2+d2@1002",
            "0:A0+e0@1000 1:A1+e1@1001 2:A2+e2@1002 3:A3+e3@1003",
            "0:A0+f0@1000 1:A1+f1@1001 2:A2+f2@1002 3:A3+f3@1003",
            "1:A1+g1@1001 2:A2+g2@1002 3:A3+g3@1003",
            "2:A2+h2@1002 3:A3+h3@1003",
            "3:A3+i3@1003",
            "",
        ],
        0.0,
    ),
    "runJoin": (["A:1+1@1 B:1+2@2"], 0.0),
    "shouldLogAndMeterOnSkippedRecordsWithNullValue": ([""], 1.0),
    "shouldThrottleEmitNonJoinedOuterRecordsEvenWhenClockDrift": (
        ["", "key1:null+value1@10000", "", "key2:null+value2@13000 key3:null+value3@15000"],
        0.0,
    ),
    "left_testLeftJoinDuplicates": (
        ["0:A0+null@0 0:A0-0+null@0", "2:A2+a2@1001 2:A2-0+a2@1001", ""],
        0.0,
    ),
    "left_testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor": (
        ["", "1:A1+a1@3", "0:A0+null@1 0:A0-0+null@3", "2:dummy+dummy@401"],
        0.0,
    ),
    "left_testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor": (
        ["", "1:A1+a1@3", "0:A0+null@1 0:A0-0+null@3", "2:dummy+dummy@402"],
        0.0,
    ),
    "left_testRightNonJoinedRecordsAreNeverEmittedByTheLeftProcessor": (
        ["", "1:A1+a1@3", "", "2:dummy+dummy@402"],
        0.0,
    ),
    "left_testRightNonJoinedRecordsAreNeverEmittedByTheRightProcessor": (
        ["", "1:A1+a1@3", "", "2:dummy+dummy@402"],
        0.0,
    ),
    "left_testLeftJoinedRecordsWithZeroAfterAreEmitted": (
        [
            "0:A0+null@1000 1:A1+null@1001 2:A2+null@1002",
            "0:A0+a0@1000 1:A1+a1@1001 2:A2+a2@1002 3:A3+a3@1003",
            "0:A0+b0@1000 1:A1+b1@1001 2:A2+b2@1002 3:A3+b3@1003",
            "1:A1+c1@1001 2:A2+c2@1002 3:A3+c3@1003",
            "2:A2+d2@1002 3:A3+d3@1003",
            "3:A3+e3@1003",
            "",
        ],
        0.0,
    ),
    "left_runLeftJoin": (
        [
            "",
            "0:A0+a0@0 1:A1+a1@0",
            "0:B0+a0@0 1:B1+a1@0",
            "0:A0+b0@0 0:B0+b0@0 1:A1+b1@0 1:B1+b1@0 2:B2+b2@0",
            "0:C0+a0@0 0:C0+b0@0 1:C1+a1@0 1:C1+b1@0 2:C2+b2@0 3:C3+b3@0",
            "",
        ],
        0.0,
    ),
    "left_testOrdering": (["", "0:A0+null@0 1:A1+a1@110"], 0.0),
    "left_testGracePeriod": (["", "", "0:A0+null@0 1:A1+null@0"], 0.0),
    "left_testWindowing": (
        [
            "",
            "0:A0+a0@0 1:A1+a1@0",
            "",
            "0:B0+b0@1100 1:B1+b1@1100 2:B2+b2@1100 3:B3+b3@1100",
            "1:C1+b1@1101 2:C2+b2@1101 3:C3+b3@1101",
            "2:D2+b2@1102 3:D3+b3@1102",
            "3:E3+b3@1103",
            "",
            "0:C0+null@1101 0:D0+null@1102 1:D1+null@1102 0:E0+null@1103 1:E1+null@1103 "
            "2:E2+null@1103 0:F0+null@1104 1:F1+null@1104 2:F2+null@1104 3:F3+null@1104",
            "0:G0+null@899 1:G1+null@899 2:G2+null@899 3:G3+null@899",
            "0:H0+b0@1000 1:H1+null@900 2:H2+null@900 3:H3+null@900",
            "0:I0+b0@1000 1:I1+b1@1001 2:I2+null@901 3:I3+null@901",
            "0:J0+b0@1000 1:J1+b1@1001 2:J2+b2@1002 3:J3+null@902",
            "0:K0+b0@1000 1:K1+b1@1001 2:K2+b2@1002 3:K3+b3@1003",
            "0:dummy+null@1203",
        ],
        0.0,
    ),
    "left_shouldNotEmitLeftJoinResultForAsymmetricWindow": (
        ["", "0:A0+a0@100", "1:A1+null@1"],
        0.0,
    ),
    "outer_testOuterJoinDuplicates": (
        [
            "1:null+11@0 1:null+12@0 0:A0+null@0 0:A0-0+null@0",
            "2:A2+13@201 2:A2-0+13@201 2:A2+14@201 2:A2-0+14@201",
            "1:null+10@111 3:null+100@211",
        ],
        0.0,
    ),
    "outer_testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor": (
        ["", "1:A1+11@3", "0:A0+null@1 0:A0-0+null@3", "2:dummy+100@401"],
        0.0,
    ),
    "outer_testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor": (
        ["", "1:A1+11@3", "0:A0+null@1 0:A0-0+null@3", "2:dummy+100@402"],
        0.0,
    ),
    "outer_testRightExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor": (
        ["", "1:A1+11@3", "0:null+10@1 0:null+12@3", "2:dummy+100@402"],
        0.0,
    ),
    "outer_testRightExpiredNonJoinedRecordsAreEmittedByTheRightProcessor": (
        ["", "1:A1+11@3", "0:null+10@1 0:null+12@3", "2:dummy+100@402"],
        0.0,
    ),
    "outer_testOrdering": (["", "0:A0+null@0 1:A1+11@110"], 0.0),
    "outer_testGracePeriod": (["", "", "1:null+11@0 0:A0+null@0"], 0.0),
    "outer_testEmitAllNonJoinedResultsForAsymmetricWindow": (
        ["", "", "", "", "2:null+12@31", "0:A0+null@29 3:null+13@36 4:null+14@37"],
        0.0,
    ),
    "outer_runOuterJoin": (
        [
            "",
            "0:A0+10@0 1:A1+11@0",
            "0:B0+10@0 1:B1+11@0",
            "0:A0+20@0 0:B0+20@0 1:A1+21@0 1:B1+21@0 2:B2+22@0",
            "0:C0+10@0 0:C0+20@0 1:C1+11@0 1:C1+21@0 2:C2+22@0 3:C3+23@0",
            "",
        ],
        0.0,
    ),
    "outer_testWindowing": (
        [
            "",
            "0:A0+10@0 1:A1+11@0",
            "2:null+12@0 3:null+13@0",
            "0:B0+20@1100 1:B1+21@1100 2:B2+22@1100 3:B3+23@1100",
            "1:C1+21@1101 2:C2+22@1101 3:C3+23@1101",
            "2:D2+22@1102 3:D3+23@1102",
            "3:E3+23@1103",
            "",
            "0:C0+null@1101 0:D0+null@1102 1:D1+null@1102 0:E0+null@1103 1:E1+null@1103 "
            "2:E2+null@1103 0:F0+null@1104 1:F1+null@1104 2:F2+null@1104 3:F3+null@1104",
            "0:G0+null@899 1:G1+null@899 2:G2+null@899 3:G3+null@899",
            "0:H0+20@1000 1:H1+null@900 2:H2+null@900 3:H3+null@900",
            "0:I0+20@1000 1:I1+21@1001 2:I2+null@901 3:I3+null@901",
            "0:J0+20@1000 1:J1+21@1001 2:J2+22@1002 3:J3+null@902",
            "0:K0+20@1000 1:K1+21@1001 2:K2+22@1002 3:K3+23@1003",
            "0:dummy+null@1103",
        ],
        0.0,
    ),
    "outer_testShouldNotEmitLeftJoinResultForAsymmetricBeforeWindow": (
        ["", "0:A0+10@100", "1:A1+null@1", "1:null+11@102", "2:A2+12@103"],
        0.0,
    ),
    "outer_testShouldNotEmitLeftJoinResultForAsymmetricAfterWindow": (
        ["0:A0+null@0", "1:A1+11@1", "", "", "2:A2+12@201"],
        0.0,
    ),
    "inner_null_key_and_value": ([""], 4.0),
    "left_null_key_and_value": (["~:A+null@0"], 2.0),
    "outer_null_key": (["~:A+null@0 ~:null+a@0"], 0.0),
    "left_late_record_joined_with_null_at_once": (["0:A0+null@1000", "1:late+null@500"], 0.0),
    "inner_expired_segment": (["", "0:B+a@150"], 1.0),
    "left_throttled_by_still_wall_clock": (
        ["", "", "0:A0+null@1 1:A1+null@100 2:A2+null@200"],
        0.0,
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_as_kafka(name: str) -> None:
    batches, dropped = run(SCENARIOS[name])
    assert (as_text(batches), dropped) == EXPECTED[name]


@pytest.mark.parametrize(
    "name",
    ["outer_testOuterJoinDuplicates", "left_testWindowing", "outer_testWindowing"],
)
def test_scenario_under_exactly_once(name: str) -> None:
    """The stores under ``exactly_once_v2`` (a transaction buffer below each): the same."""
    config = {**CONFIG, "processing.guarantee": "exactly_once_v2"}
    batches, dropped = run(SCENARIOS[name], config)
    assert (as_text(batches), dropped) == EXPECTED[name]


def test_every_scenario_has_its_expected_output() -> None:
    assert sorted(SCENARIOS) == sorted(EXPECTED)


def test_current_headers_are_forwarded() -> None:
    """Kafka's ``testShouldForwardCurrentHeaders``: a result carries the headers of the record
    being processed (for records joined with ``None``: the one that moved the time on)."""
    windows = JoinWindows.of_time_difference_and_grace(100, 10)
    builder = join_program("outer", windows, emit_interval_ms=0)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        left = driver.create_input_topic("l", STRING.serializer, STRING.serializer)
        right = driver.create_input_topic("r", STRING.serializer, STRING.serializer)
        out = driver.create_output_topic("out", STRING.deserializer, STRING.deserializer)
        left.pipe_input("0", "A0", 0, headers=(("h", b"\x01"),))
        right.pipe_input("1", "10", 0, headers=(("h", b"\x02"),))
        right.pipe_input("3", "100", 211, headers=(("h", b"\x03"),))
        assert [(r.key, r.value, r.timestamp, r.headers) for r in out.read_records_to_list()] == [
            ("1", "null+10", 0, (("h", b"\x03"),)),
            ("0", "A0+null", 0, (("h", b"\x03"),)),
        ]
        left.pipe_input("2", "A2", 200, headers=(("h", b"\x04"),))
        right.pipe_input("2", "12", 200, headers=(("h", b"\x05"),))
        assert [(r.key, r.value, r.timestamp, r.headers) for r in out.read_records_to_list()] == [
            ("2", "A2+12", 200, (("h", b"\x05"),)),
        ]


def test_stores_are_kafkas_and_queryable() -> None:
    builder = join_program(
        "left", JoinWindows.of_time_difference_and_grace(100, 5), store_name="shop"
    )
    topology = builder.build()
    specs = topology.stores
    assert sorted(specs) == [
        "shop-left-shared-join-store",
        "shop-outer-other-join-store",
        "shop-this-join-store",
    ]
    this = specs["shop-this-join-store"]
    assert this.logged
    assert this.changelog_config == {
        "cleanup.policy": "delete",
        "retention.ms": str(205 + 86_400_000),
    }
    assert this.changelog_topic("app") == "app-shop-this-join-store-changelog"
    assert specs["shop-left-shared-join-store"].changelog_config is None  # compacted
    with TopologyTestDriver(topology, CONFIG) as driver:
        left = driver.create_input_topic("l", STRING.serializer, STRING.serializer)
        left.pipe_input("k", "A", 10)
        left.pipe_input("k", "A", 10)  # a duplicate: both kept
        stored = list(driver.get_window_store("shop-this-join-store").all())
        assert [(w.key, w.window.start, w.window.end, v) for w, v in stored] == [
            ("k", 10, 210, "A"),
            ("k", 10, 210, "A"),
        ]
        waiting = list(driver.get_key_value_store("shop-left-shared-join-store").all())
        assert [(k.key, k.timestamp, k.left_side, v.left_value) for k, v in waiting] == [
            ("k", 10, True, "A"),
            ("k", 10, True, "A"),
        ]


def test_logging_can_be_disabled_and_stores_kept_in_memory() -> None:
    builder = join_program(
        "outer",
        JoinWindows.of_time_difference_with_no_grace(10),
        logging_enabled=False,
        persistent=False,
    )
    specs = builder.build().stores.values()
    assert [(spec.logged, spec.persistent) for spec in specs] == [(False, False)] * 3


def test_in_memory_stores_join_as_persistent_ones() -> None:
    """Kafka's ``testLeftJoinWithInMemoryCustomSuppliers``: the same results in memory."""
    scenario = SCENARIOS["left_runLeftJoin"]
    windows = JoinWindows.of_time_difference_with_no_grace(100)
    builder = join_program("left", windows, emit_interval_ms=0, persistent=False)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topics = {
            side: driver.create_input_topic(side.lower(), STRING.serializer, STRING.serializer)
            for side in ("L", "R")
        }
        out = driver.create_output_topic("out", STRING.deserializer, STRING.deserializer)
        batches = []
        for event in expand(scenario.events):
            if event == ";":
                batches.append([[r.key, r.value, r.timestamp] for r in out.read_records_to_list()])
            else:
                side, key, value, timestamp = event.split(":")
                topics[side].pipe_input(key, value, int(timestamp))
    assert as_text(batches) == EXPECTED["left_runLeftJoin"][0]


def test_windows_must_be_join_windows() -> None:
    builder = StreamsBuilder()
    left, right = builder.stream("l"), builder.stream("r")
    with pytest.raises(TopologyError, match="JoinWindows"):
        left.join(right, lambda a, b: a, 100)


def test_two_joins_with_one_store_name_are_refused() -> None:
    builder = StreamsBuilder()
    left, right = builder.stream("l"), builder.stream("r")
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    left.join(right, lambda a, b: a, windows, store_name="s")
    nodes = str(builder.topology.describe())
    with pytest.raises(TopologyError, match="already exists"):
        left.join(right, lambda a, b: a, windows, store_name="s")
    assert str(builder.topology.describe()) == nodes  # the refused join added nothing


def test_kind_and_emit_interval_are_checked() -> None:
    builder = StreamsBuilder()
    left, right = builder.stream("l"), builder.stream("r")
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    with pytest.raises(TopologyError, match="emit_interval_ms"):
        left.left_join(right, lambda a, b: a, windows, emit_interval_ms="1s")
    with pytest.raises(TopologyError, match="store name"):
        left.left_join(right, lambda a, b: a, windows, store_name="a b")
    with pytest.raises(TopologyError, match=r"KStream.outer_join: .*\['stor_name'\]"):
        left.outer_join(right, lambda a, b: a, windows, stor_name="s")


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("inner", [("a", "a1+ra", 20)]),
        ("left", [("a", "a1+ra", 20), (None, "x3+null", 40), ("b", "b2+null", 30)]),
    ],
)
def test_a_key_changed_side_is_repartitioned_first(
    kind: str, expected: list[tuple[Any, Any, int]], explicit: bool
) -> None:
    """The side whose key changed goes through a repartition topic first (the join's, or an
    explicit ``repartition()``); before a left join its records without a key pass too, and
    are joined with ``None`` at once (both checked against Kafka 4.4's driver)."""
    builder = StreamsBuilder()
    left = builder.stream("l", key_serde=STRING, value_serde=STRING).select_key(
        lambda _k, v: None if v.startswith("x") else v[0]
    )
    if explicit:
        left = left.repartition(key_serde=STRING, value_serde=STRING)
    right = builder.stream("r", key_serde=STRING, value_serde=STRING)
    joined = getattr(left, _METHODS[kind])(
        right,
        lambda a, b: f"{_text(a)}+{_text(b)}",
        JoinWindows.of_time_difference_with_no_grace(100),
        key_serde=STRING,
        emit_interval_ms=0,
    )
    joined.to("out", key_serde=STRING, value_serde=STRING)
    topology = builder.build()
    topic = "KSTREAM-REPARTITION-0000000002" if explicit else "KSTREAM-KEY-SELECT-0000000001"
    assert f"{topic}-repartition" in str(topology.describe())
    with TopologyTestDriver(topology, CONFIG) as driver:
        lefts = driver.create_input_topic("l", STRING.serializer, STRING.serializer)
        rights = driver.create_input_topic("r", STRING.serializer, STRING.serializer)
        out = driver.create_output_topic("out", STRING.deserializer, STRING.deserializer)
        rights.pipe_input("a", "ra", 10)
        for key, value, timestamp in (("1", "a1", 20), ("2", "b2", 30), ("3", "x3", 40)):
            lefts.pipe_input(key, value, timestamp)
        lefts.pipe_input("4", "c4", 500)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == expected


def test_a_joiner_with_key_gets_the_key() -> None:
    """``with_key=True`` is Kafka's ``ValueJoinerWithKey``: ``joiner(key, left, right)``, for
    joined records and for those joined with ``None`` (a record without a key gets ``None``)."""
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    builder = StreamsBuilder()
    left = builder.stream("l", key_serde=STRING, value_serde=STRING)
    right = builder.stream("r", key_serde=STRING, value_serde=STRING)
    left.outer_join(
        right,
        lambda key, a, b: f"{key}:{_text(a)}+{_text(b)}",
        windows,
        with_key=True,
        emit_interval_ms=0,
    ).to("out", key_serde=STRING, value_serde=STRING)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        lefts = driver.create_input_topic("l", STRING.serializer, STRING.serializer)
        rights = driver.create_input_topic("r", STRING.serializer, STRING.serializer)
        out = driver.create_output_topic("out", STRING.deserializer, STRING.deserializer)
        lefts.pipe_input("a", "A", 1)
        rights.pipe_input("a", "x", 5)
        rights.pipe_input("b", "y", 6)
        lefts.pipe_input(None, "N", 7)
        lefts.pipe_input("c", "C", 100)
        assert out.read_key_values_to_list() == [
            ("a", "a:A+x"),
            (None, "None:N+null"),
            ("b", "b:null+y"),
        ]


def test_a_repartitioned_side_takes_the_other_sides_partition_count() -> None:
    """Kafka's co-partition group: the join's repartition topic has as many partitions as the
    other side's topic, not as its own input."""
    builder = StreamsBuilder()
    left = builder.stream("left").select_key(lambda _k, v: v)
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    left.join(builder.stream("right"), lambda a, b: a, windows).to("out")
    counts = builder.build().graph().repartition_partitions({"left": 2, "right": 4})
    assert counts == {"KSTREAM-KEY-SELECT-0000000001": 4}
