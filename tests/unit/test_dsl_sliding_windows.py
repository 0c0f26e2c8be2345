"""Sliding-window aggregations (KIP-450) through the DSL and the ``TopologyTestDriver``.

Ports of Kafka's ``KStreamSlidingWindowAggregateTest`` (each case under both emit strategies
and with and without the record cache, as Kafka runs it; the expected results are Kafka's,
compared as Kafka compares them: as a set, or sorted by key and window start) and of
``SlidingWindowedKStreamIntegrationTest`` (whose results are compared in order: the order
Kafka forwards updates in, latest window first). Kafka's update-mode cases give their store
a retention of 50 000 ms (500 ms in the large no-grace cases); its emit-final cases keep the
default (twice the time difference plus grace), and so do these.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from streamstate.dsl import (
    EmitStrategy,
    Materialized,
    SlidingWindows,
    StreamsBuilder,
    Window,
    Windowed,
)
from streamstate.dsl.stores import ValueAndTimestamp
from streamstate.dsl.windowed_serde import TimeWindowedDeserializer
from streamstate.serde import (
    LongDeserializer,
    Serdes,
    StringDeserializer,
    StringSerializer,
)
from streamstate.testing import TopologyTestDriver

CONFIG = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
TEXT = StringSerializer()
READ_TEXT = StringDeserializer()
UPDATE = EmitStrategy.on_window_update()
FINAL = EmitStrategy.on_window_close()
STRATEGIES = pytest.mark.parametrize("emit", [UPDATE, FINAL], ids=["on-update", "on-close"])
CACHING = pytest.mark.parametrize("caching", [False, True], ids=["uncached", "cached"])

Out = tuple[str, int, int, Any, int]  # key, window start, window end, value, timestamp
In = tuple[Any, Any, int]  # key, value, timestamp

_WINDOW = re.compile(r"(\w+)\[(\d+),(\d+)\]=(\S*)@(\d+)")
_RECORD = re.compile(r"(\w+):(\w+)@(\d+)")


def _windows(text: str) -> list[Out]:
    """``key[start,end]=value@timestamp`` entries, in order."""
    return [(k, int(s), int(e), v, int(t)) for k, s, e, v, t in _WINDOW.findall(text)]


def _records(text: str) -> list[In]:
    """``key:value@timestamp`` entries, in order."""
    return [(k, v, int(t)) for k, v, t in _RECORD.findall(text)]


def string_adder(_key: Any, value: Any, aggregate: Any) -> str:
    """Kafka's ``MockAggregator.TOSTRING_ADDER``."""
    return f"{aggregate}+{value}"


def topology(
    windows: SlidingWindows,
    emit: EmitStrategy,
    *,
    caching: bool = False,
    retention: int | None = None,
    reduce: bool = False,
    count: bool = False,
    initial: str = "0",
    aggregator: Any = string_adder,
) -> Any:
    """``topic`` aggregated over ``windows`` into store ``store``, results to ``output``;
    Kafka's ``MockInitializer.STRING_INIT`` and ``TOSTRING_ADDER`` by default."""
    builder = StreamsBuilder()
    windowed = (
        builder.stream("topic", key_serde=Serdes.String(), value_serde=Serdes.String())
        .group_by_key()
        .windowed_by(windows)
        .emit_strategy(emit)
    )
    store = Materialized.as_("store", caching=caching, retention=retention)
    if count:
        table = windowed.count(materialized=store)
    elif reduce:
        table = windowed.reduce(lambda a, b: f"{a}+{b}", materialized=store)
    else:
        table = windowed.aggregate(lambda: initial, aggregator, materialized=store)
    table.to_stream().to("output")
    return builder.build()


@dataclass
class Run:
    """What a driver run left: the output records, the drop count and the store."""

    output: list[Out]
    headers: list[Any]
    dropped: int
    store: dict[Windowed[Any], Any]


def run(
    built: Any,
    records: Iterable[In],
    difference: int,
    *,
    headers: Any = (),
    value_deserializer: Any = READ_TEXT,
) -> Run:
    """Pipes ``records`` to ``topic``; reads ``output`` and the store ``store``."""
    with TopologyTestDriver(built, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        for key, value, timestamp in records:
            topic.pipe_input(key, value, timestamp, headers=headers)
        out = driver.create_output_topic(
            "output", TimeWindowedDeserializer(READ_TEXT, difference), value_deserializer
        )
        read = out.read_records_to_list()
        return Run(
            [(r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp) for r in read],
            [r.headers for r in read],
            driver.metrics()["dropped-records-total"],
            dict(driver.get_window_store("store").all()),
        )


def by_key_and_start(output: list[Out]) -> list[Out]:
    """Kafka's comparator: by key, then window start (stable: updates stay in order)."""
    return sorted(output, key=lambda o: (o[0], o[1]))


def last_per_window(output: list[Out]) -> dict[Windowed[Any], Any]:
    """The latest result of each window."""
    return {Windowed(k, Window(s, e)): v for k, s, e, v, _ in output}


# -- KStreamSlidingWindowAggregateTest --------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One of Kafka's cases: its windows, input and expected results per strategy."""

    difference: int
    grace: tuple[int, int]  # (on update, on close): some cases differ
    records: str
    update: str
    final: str
    sort: bool  # compared sorted by key and start (else as a set, Kafka's gatherOutput)
    update_retention: int | None = 50_000  # Kafka's store supplier in update mode
    reduce: bool = False


CASES = {
    "testAggregateSmallInput": Case(
        10,
        (5, 5),
        "A:1@10 A:2@10 A:3@14 A:4@15 A:5@20 A:6@22 A:7@30",
        """A[0,10]=0+1@10 A[0,10]=0+1+2@10 A[4,14]=0+1+2+3@14 A[5,15]=0+1+2+3+4@15
        A[10,20]=0+1+2+3+4+5@20 A[11,21]=0+3@14 A[11,21]=0+3+4@15 A[11,21]=0+3+4+5@20
        A[12,22]=0+3+4+5+6@22 A[15,25]=0+4@15 A[15,25]=0+4+5@20 A[15,25]=0+4+5+6@22
        A[16,26]=0+5@20 A[16,26]=0+5+6@22 A[20,30]=0+5+6+7@30 A[21,31]=0+6@22 A[21,31]=0+6+7@30
        A[23,33]=0+7@30""",
        """A[0,10]=0+1+2@10 A[4,14]=0+1+2+3@14 A[5,15]=0+1+2+3+4@15 A[10,20]=0+1+2+3+4+5@20
        A[11,21]=0+3+4+5@20 A[12,22]=0+3+4+5+6@22""",
        sort=False,
    ),
    "testReduceSmallInput": Case(
        10,
        (5, 5),
        "A:1@10 A:2@14 A:3@15 A:4@22 A:5@26 A:6@30",
        """A[0,10]=1@10 A[4,14]=1+2@14 A[5,15]=1+2+3@15 A[11,21]=2@14 A[11,21]=2+3@15
        A[12,22]=2+3+4@22 A[15,25]=3@15 A[15,25]=3+4@22 A[16,26]=4@22 A[16,26]=4+5@26
        A[20,30]=4+5+6@30 A[23,33]=5@26 A[23,33]=5+6@30 A[27,37]=6@30""",
        """A[0,10]=1@10 A[4,14]=1+2@14 A[5,15]=1+2+3@15 A[11,21]=2+3@15 A[12,22]=2+3+4@22""",
        sort=False,
        reduce=True,
    ),
    "testAggregateLargeInput": Case(
        10,
        (50, 10),
        """A:1@10 A:2@20 A:3@22 A:4@15 B:1@12 B:2@13 B:3@18 B:4@19 B:5@25 B:6@14 C:1@11 C:2@15
        C:3@16 C:4@21 C:5@23 D:4@11 D:2@12 D:3@29 D:5@16""",
        """A[0,10]=0+1@10 A[5,15]=0+1+4@15 A[10,20]=0+1+2@20 A[10,20]=0+1+2+4@20 A[11,21]=0+2@20
        A[11,21]=0+2+4@20 A[12,22]=0+2+3@22 A[12,22]=0+2+3+4@22 A[16,26]=0+2+3@22
        A[21,31]=0+3@22 B[2,12]=0+1@12 B[3,13]=0+1+2@13 B[4,14]=0+1+2+6@14 B[8,18]=0+1+2+3@18
        B[8,18]=0+1+2+3+6@18 B[9,19]=0+1+2+3+4@19 B[9,19]=0+1+2+3+4+6@19 B[13,23]=0+2@13
        B[13,23]=0+2+3@18 B[13,23]=0+2+3+4@19 B[13,23]=0+2+3+4+6@19 B[14,24]=0+3@18
        B[14,24]=0+3+4@19 B[14,24]=0+3+4+6@19 B[15,25]=0+3+4+5@25 B[19,29]=0+4@19
        B[19,29]=0+4+5@25 B[20,30]=0+5@25 C[1,11]=0+1@11 C[5,15]=0+1+2@15 C[6,16]=0+1+2+3@16
        C[11,21]=0+1+2+3+4@21 C[12,22]=0+2@15 C[12,22]=0+2+3@16 C[12,22]=0+2+3+4@21
        C[13,23]=0+2+3+4+5@23 C[16,26]=0+3@16 C[16,26]=0+3+4@21 C[16,26]=0+3+4+5@23
        C[17,27]=0+4@21 C[17,27]=0+4+5@23 C[22,32]=0+5@23 D[1,11]=0+4@11 D[2,12]=0+4+2@12
        D[6,16]=0+4+2+5@16 D[12,22]=0+2@12 D[12,22]=0+2+5@16 D[13,23]=0+5@16 D[19,29]=0+3@29""",
        """A[0,10]=0+1@10 A[5,15]=0+1+4@15 B[2,12]=0+1@12 B[3,13]=0+1+2@13 B[8,18]=0+1+2+3+6@18
        C[5,15]=0+2@15 C[6,16]=0+2+3@16""",
        sort=True,
    ),
    "testEarlyRecordsSmallInput": Case(
        50,
        (0, 0),
        "A:1@0 A:2@5 A:3@6 A:4@3 A:5@13 A:6@10 A:7@70",
        """A[0,50]=0+1@0 A[0,50]=0+1+2@5 A[0,50]=0+1+2+3@6 A[0,50]=0+1+2+3+4@6
        A[0,50]=0+1+2+3+4+5@13 A[0,50]=0+1+2+3+4+5+6@13 A[1,51]=0+2@5 A[1,51]=0+2+3@6
        A[1,51]=0+2+3+4@6 A[1,51]=0+2+3+4+5@13 A[1,51]=0+2+3+4+5+6@13 A[4,54]=0+2+3@6
        A[4,54]=0+2+3+5@13 A[4,54]=0+2+3+5+6@13 A[6,56]=0+3@6 A[6,56]=0+3+5@13
        A[6,56]=0+3+5+6@13 A[7,57]=0+5@13 A[7,57]=0+5+6@13 A[11,61]=0+5@13 A[20,70]=0+7@70""",
        """A[0,50]=0+1+2+3+4+5+6@13 A[1,51]=0+2+3+4+5+6@13 A[4,54]=0+2+3+5+6@13
        A[6,56]=0+3+5+6@13 A[7,57]=0+5+6@13 A[11,61]=0+5@13""",
        sort=False,
        update_retention=None,
    ),
    "testEarlyRecordsRepeatedInput": Case(
        5,
        (0, 0),
        "A:1@0 A:2@2 A:3@4 A:4@0 A:5@2 A:6@2 A:7@0 A:8@7",
        """A[0,5]=0+1@0 A[0,5]=0+1+2@2 A[0,5]=0+1+2+3@4 A[0,5]=0+1+2+3+4@4 A[0,5]=0+1+2+3+4+5@4
        A[0,5]=0+1+2+3+4+5+6@4 A[0,5]=0+1+2+3+4+5+6+7@4 A[1,6]=0+2@2 A[1,6]=0+2+3@4
        A[1,6]=0+2+3+5@4 A[1,6]=0+2+3+5+6@4 A[2,7]=0+2+3+5+6+8@7 A[3,8]=0+3@4 A[3,8]=0+3+8@7
        A[5,10]=0+8@7""",
        "A[0,5]=0+1+2+3+4+5+6+7@4 A[1,6]=0+2+3+5+6@4",
        sort=False,
        update_retention=None,
    ),
    "testEarlyRecordsLargeInput": Case(
        10,
        (50, 1),
        "E:1@0 E:3@5 E:4@6 E:2@3 E:6@13 E:5@10 E:7@4 E:8@2 E:9@15",
        """E[0,10]=0+1@0 E[0,10]=0+1+3@5 E[0,10]=0+1+3+4@6 E[0,10]=0+1+3+4+2@6
        E[0,10]=0+1+3+4+2+5@10 E[0,10]=0+1+3+4+2+5+7@10 E[0,10]=0+1+3+4+2+5+7+8@10
        E[1,11]=0+3@5 E[1,11]=0+3+4@6 E[1,11]=0+3+4+2@6 E[1,11]=0+3+4+2+5@10
        E[1,11]=0+3+4+2+5+7@10 E[1,11]=0+3+4+2+5+7+8@10 E[3,13]=0+3+4+2+6@13
        E[3,13]=0+3+4+2+6+5@13 E[3,13]=0+3+4+2+6+5+7@13 E[4,14]=0+3+4@6 E[4,14]=0+3+4+6@13
        E[4,14]=0+3+4+6+5@13 E[4,14]=0+3+4+6+5+7@13 E[5,15]=0+3+4+6+5@13 E[5,15]=0+3+4+6+5+9@15
        E[6,16]=0+4@6 E[6,16]=0+4+6@13 E[6,16]=0+4+6+5@13 E[6,16]=0+4+6+5+9@15 E[7,17]=0+6@13
        E[7,17]=0+6+5@13 E[7,17]=0+6+5+9@15 E[11,21]=0+6@13 E[11,21]=0+6+9@15 E[14,24]=0+9@15""",
        "E[0,10]=0+1+3+4+2@6 E[1,11]=0+3+4+2@6 E[3,13]=0+3+4+2+6+5+7@13",
        sort=True,
    ),
    "testEarlyNoGracePeriodSmallInput": Case(
        50,
        (0, 0),
        "A:1@0 A:2@5 A:3@6 A:4@3 A:5@13 A:6@10 A:6@70",
        """A[0,50]=0+1@0 A[0,50]=0+1+2@5 A[0,50]=0+1+2+3@6 A[0,50]=0+1+2+3+4@6
        A[0,50]=0+1+2+3+4+5@13 A[0,50]=0+1+2+3+4+5+6@13 A[1,51]=0+2@5 A[1,51]=0+2+3@6
        A[1,51]=0+2+3+4@6 A[1,51]=0+2+3+4+5@13 A[1,51]=0+2+3+4+5+6@13 A[4,54]=0+2+3@6
        A[4,54]=0+2+3+5@13 A[4,54]=0+2+3+5+6@13 A[6,56]=0+3@6 A[6,56]=0+3+5@13
        A[6,56]=0+3+5+6@13 A[7,57]=0+5@13 A[7,57]=0+5+6@13 A[11,61]=0+5@13 A[20,70]=0+6@70""",
        """A[0,50]=0+1+2+3+4+5+6@13 A[1,51]=0+2+3+4+5+6@13 A[4,54]=0+2+3+5+6@13
        A[6,56]=0+3+5+6@13 A[7,57]=0+5+6@13 A[11,61]=0+5@13""",
        sort=False,
        update_retention=None,
    ),
    "testNoGracePeriodSmallInput": Case(
        50,
        (0, 0),
        "A:1@100 A:2@105 A:3@106 A:4@103 A:5@113 A:6@110",
        """A[50,100]=0+1@100 A[55,105]=0+1+2@105 A[56,106]=0+1+2+3@106 A[56,106]=0+1+2+3+4@106
        A[63,113]=0+1+2+3+4+5@113 A[63,113]=0+1+2+3+4+5+6@113 A[101,151]=0+2@105
        A[101,151]=0+2+3@106 A[101,151]=0+2+3+4@106 A[101,151]=0+2+3+4+5@113
        A[101,151]=0+2+3+4+5+6@113 A[104,154]=0+2+3@106 A[104,154]=0+2+3+5@113
        A[104,154]=0+2+3+5+6@113 A[106,156]=0+3@106 A[106,156]=0+3+5@113
        A[106,156]=0+3+5+6@113 A[107,157]=0+5@113 A[107,157]=0+5+6@113 A[111,161]=0+5@113""",
        "A[50,100]=0+1@100 A[55,105]=0+1+2@105 A[56,106]=0+1+2+3+4@106",
        sort=False,
        update_retention=None,
    ),
    "testEarlyNoGracePeriodLargeInput": Case(
        10,
        (0, 0),
        "E:1@0 E:3@5 E:4@6 E:2@3 E:6@13 E:5@10 E:7@4 E:8@2 E:9@15",
        """E[0,10]=0+1@0 E[0,10]=0+1+3@5 E[0,10]=0+1+3+4@6 E[0,10]=0+1+3+4+2@6 E[1,11]=0+3@5
        E[1,11]=0+3+4@6 E[1,11]=0+3+4+2@6 E[3,13]=0+3+4+2+6@13 E[3,13]=0+3+4+2+6+5@13
        E[3,13]=0+3+4+2+6+5+7@13 E[4,14]=0+3+4@6 E[4,14]=0+3+4+6@13 E[4,14]=0+3+4+6+5@13
        E[4,14]=0+3+4+6+5+7@13 E[5,15]=0+3+4+6+5@13 E[5,15]=0+3+4+6+5+9@15 E[6,16]=0+4@6
        E[6,16]=0+4+6@13 E[6,16]=0+4+6+5@13 E[6,16]=0+4+6+5+9@15 E[7,17]=0+6@13
        E[7,17]=0+6+5@13 E[7,17]=0+6+5+9@15 E[11,21]=0+6@13 E[11,21]=0+6+9@15 E[14,24]=0+9@15""",
        """E[0,10]=0+1+3+4+2@6 E[1,11]=0+3+4+2@6 E[3,13]=0+3+4+2+6+5+7@13
        E[4,14]=0+3+4+6+5+7@13""",
        sort=True,
        update_retention=500,
    ),
    "testNoGracePeriodLargeInput": Case(
        10,
        (0, 0),
        "E:1@100 E:3@105 E:4@106 E:2@103 E:6@113 E:5@110 E:7@104 E:8@102 E:9@115",
        """E[90,100]=0+1@100 E[95,105]=0+1+3@105 E[96,106]=0+1+3+4@106 E[96,106]=0+1+3+4+2@106
        E[101,111]=0+3@105 E[101,111]=0+3+4@106 E[101,111]=0+3+4+2@106
        E[103,113]=0+3+4+2+6@113 E[103,113]=0+3+4+2+6+5@113 E[103,113]=0+3+4+2+6+5+7@113
        E[104,114]=0+3+4@106 E[104,114]=0+3+4+6@113 E[104,114]=0+3+4+6+5@113
        E[104,114]=0+3+4+6+5+7@113 E[105,115]=0+3+4+6+5@113 E[105,115]=0+3+4+6+5+9@115
        E[106,116]=0+4@106 E[106,116]=0+4+6@113 E[106,116]=0+4+6+5@113
        E[106,116]=0+4+6+5+9@115 E[107,117]=0+6@113 E[107,117]=0+6+5@113
        E[107,117]=0+6+5+9@115 E[111,121]=0+6@113 E[111,121]=0+6+9@115 E[114,124]=0+9@115""",
        """E[90,100]=0+1@100 E[95,105]=0+1+3@105 E[96,106]=0+1+3+4+2@106 E[101,111]=0+3+4+2@106
        E[103,113]=0+3+4+2+6+5+7@113 E[104,114]=0+3+4+6+5+7@113""",
        sort=True,
        update_retention=500,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
@STRATEGIES
@CACHING
def test_kafka_sliding_window_aggregate_cases(name: str, emit: EmitStrategy, caching: bool) -> None:
    case = CASES[name]
    final = emit == FINAL
    windows = SlidingWindows.of_time_difference_and_grace(
        case.difference, case.grace[1] if final else case.grace[0]
    )
    built = topology(
        windows,
        emit,
        caching=caching,
        retention=None if final else case.update_retention,
        reduce=case.reduce,
    )
    result = run(built, _records(case.records), case.difference)
    expected = _windows(case.final if final else case.update)
    if case.sort:
        assert by_key_and_start(result.output) == expected
    else:
        assert set(result.output) == set(expected)
    # The store holds each window's latest aggregate: the last result forwarded (on update),
    # or at least every window emitted once closed.
    if final:
        assert len(result.output) == len(set(result.output))
        assert last_per_window(result.output).items() <= result.store.items()
    else:
        assert result.store == last_per_window(result.output)


def test_store_holds_every_window_with_its_latest_timestamp() -> None:
    # testAggregateSmallInput's input; the store as Kafka's test store would hold it.
    built = topology(SlidingWindows.of_time_difference_and_grace(10, 5), UPDATE, retention=50_000)
    records = _records("A:1@10 A:2@10 A:3@14 A:4@15 A:5@20 A:6@22 A:7@30")
    with TopologyTestDriver(built, CONFIG) as driver:
        topic = driver.create_input_topic("topic", TEXT, TEXT)
        for key, value, timestamp in records:
            topic.pipe_input(key, value, timestamp)
        store = driver.get_window_store("store")
        assert list(store.fetch("A", 0, 100)) == [
            (0, "0+1+2"),
            (4, "0+1+2+3"),
            (5, "0+1+2+3+4"),
            (10, "0+1+2+3+4+5"),
            (11, "0+3+4+5"),
            (12, "0+3+4+5+6"),
            (15, "0+4+5+6"),
            (16, "0+5+6"),
            (20, "0+5+6+7"),
            (21, "0+6+7"),
            (23, "0+7"),
        ]
        assert list(store.fetch("A", 11, 15)) == [
            (11, "0+3+4+5"),
            (12, "0+3+4+5+6"),
            (15, "0+4+5+6"),
        ]
        assert store.fetch_with_timestamp("A", 11) == ValueAndTimestamp("0+3+4+5", 20)
        assert store.fetch_with_timestamp("A", 23) == ValueAndTimestamp("0+7", 30)
        assert store.fetch_with_timestamp("A", 1) is None
        assert list(store.fetch("B", 0, 100)) == []


@STRATEGIES
def test_join_inputs_in_kafka_forwarding_order(emit: EmitStrategy) -> None:
    # testJoin's first table, in the order Kafka's checkAndClearProcessResult asserts (the
    # join of two windowed tables is not part of this port).
    final = emit == FINAL
    built = topology(SlidingWindows.of_time_difference_and_grace(10, 0 if final else 100), emit)
    first = run(built, _records("A:1@10 B:2@11 C:3@12"), 10)
    both = run(built, _records("A:1@10 B:2@11 C:3@12 A:1@15 B:2@16 C:3@19"), 10)
    if final:
        assert first.output == _windows("A[0,10]=0+1@10 B[1,11]=0+2@11")
        assert both.output[2:] == _windows("C[2,12]=0+3@12 A[5,15]=0+1+1@15 B[6,16]=0+2+2@16")
    else:
        assert first.output == _windows("A[0,10]=0+1@10 B[1,11]=0+2@11 C[2,12]=0+3@12")
        assert both.output[3:] == _windows(
            """A[11,21]=0+1@15 A[5,15]=0+1+1@15 B[12,22]=0+2@16 B[6,16]=0+2+2@16
            C[13,23]=0+3@19 C[9,19]=0+3+3@19"""
        )
    assert both.output[: len(first.output)] == first.output


@STRATEGIES
def test_null_key_and_null_value_are_dropped_and_counted(
    emit: EmitStrategy, caplog: pytest.LogCaptureFixture
) -> None:
    # shouldLogAndMeterWhenSkippingNullKey; Kafka's sliding aggregation drops a null value
    # too (the same check, the same message).
    built = topology(SlidingWindows.of_time_difference_and_grace(10, 100), emit)
    with caplog.at_level(logging.WARNING):
        result = run(built, [(None, "1", 0), ("A", None, 5)], 10)
    assert result.dropped == 2
    assert result.output == []
    assert result.store == {}
    messages = [r.getMessage() for r in caplog.records]
    assert "Skipping record due to null key or value. topic=[topic] partition=[0] offset=[0]" in (
        messages
    )
    assert "Skipping record due to null key or value. topic=[topic] partition=[0] offset=[1]" in (
        messages
    )


@STRATEGIES
@CACHING
def test_records_for_expired_windows_are_dropped_and_counted(
    emit: EmitStrategy, caching: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # shouldLogAndMeterWhenSkippingExpiredWindowByGrace: k@100..105 only create their left
    # windows, every one closed at stream time 200 (close time 110): one drop each; k@15's
    # own window ends before the close time: dropped whole. 7 in all, as Kafka counts.
    final = emit == FINAL
    built = topology(
        SlidingWindows.of_time_difference_and_grace(10, 90),
        emit,
        caching=caching,
        retention=None if final else 50_000,
    )
    records = _records(
        "k:100@200 k:0@100 k:1@101 k:2@102 k:3@103 k:4@104 k:5@105 k:6@15 k:101@300 k:102@400"
    )
    with caplog.at_level(logging.WARNING):
        result = run(built, records, 10)
    assert result.dropped == 7
    messages = [r.getMessage() for r in caplog.records]
    for offset, timestamp, window in [
        (1, 100, "[90,100]"),
        (2, 101, "[91,101]"),
        (3, 102, "[92,102]"),
        (4, 103, "[93,103]"),
        (5, 104, "[94,104]"),
        (6, 105, "[95,105]"),
        (7, 15, "[15,25]"),
    ]:
        assert (
            f"Skipping record for expired window. topic=[topic] partition=[0] offset=[{offset}] "
            f"timestamp=[{timestamp}] window={window} expiration=[110] streamTime=[200]"
        ) in messages
    expected = "k[190,200]=0+100@200 k[290,300]=0+101@300"
    assert result.output == _windows(expected if final else f"{expected} k[390,400]=0+102@400")


def _sorted_chars(_key: Any, value: Any, aggregate: Any) -> str:
    return "".join(sorted(aggregate + value))


RANDOM_VALUES = [
    ("A", 10), ("B", 15), ("C", 16), ("D", 18), ("E", 30), ("F", 40), ("G", 55), ("H", 56),
    ("I", 58), ("J", 58), ("K", 62), ("L", 63), ("M", 63), ("N", 63), ("O", 76), ("P", 77),
    ("Q", 80), ("R", 2), ("S", 3), ("T", 5), ("U", 8),
]  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
@STRATEGIES
def test_random_input_order_gives_kafkas_windows(emit: EmitStrategy, seed: int) -> None:
    # testAggregateRandomInput: the input shuffled (seeded), then V@181; the aggregator sorts
    # its characters so that every order gives the same final windows. On close, only the
    # windows still within the store's retention (2 * 10 + 100 ms) when V arrives are
    # emitted: the store hides older ones, as Kafka's does.
    final = emit == FINAL
    built = topology(
        SlidingWindows.of_time_difference_and_grace(10, 100),
        emit,
        retention=None if final else 50_000,
        initial="",
        aggregator=_sorted_chars,
    )
    shuffled = list(RANDOM_VALUES)
    random.Random(seed).shuffle(shuffled)
    result = run(built, [("A", v, t) for v, t in [*shuffled, ("V", 181)]], 10)
    latest = {start: (value, timestamp) for _, start, _, value, timestamp in result.output}
    closed = {
        52: ("GHIJK", 62), 53: ("GHIJKLMN", 63), 56: ("HIJKLMN", 63), 57: ("IJKLMN", 63),
        59: ("KLMN", 63), 63: ("LMN", 63), 66: ("O", 76), 67: ("OP", 77), 70: ("OPQ", 80),
    }  # fmt: skip
    if final:
        assert latest == closed
        return
    assert latest == {
        0: ("ARSTU", 10), 3: ("ASTU", 10), 4: ("ATU", 10), 5: ("ABTU", 15), 6: ("ABCU", 16),
        8: ("ABCDU", 18), 9: ("ABCD", 18), 11: ("BCD", 18), 16: ("CD", 18), 17: ("D", 18),
        20: ("E", 30), 30: ("EF", 40), 31: ("F", 40), 45: ("G", 55), 46: ("GH", 56),
        48: ("GHIJ", 58), **closed, 77: ("PQ", 80), 78: ("Q", 80), 171: ("V", 181),
    }  # fmt: skip


# -- SlidingWindowedKStreamIntegrationTest ----------------------------------------------------


@STRATEGIES
def test_aggregate_windowed_with_no_grace(emit: EmitStrategy) -> None:
    # shouldAggregateWindowedWithNoGrace: B@6 and B@11 are late (each counted once).
    built = topology(SlidingWindows.of_time_difference_with_no_grace(10), emit)
    records = _records("A:1@0 A:2@5 A:3@10 A:4@17 B:5@6 B:6@11 B:7@18 C:8@25")
    result = run(built, records, 10)
    if emit == FINAL:
        expected = """A[0,10]=0+1+2+3@10 A[1,11]=0+2+3@10 A[6,16]=0+3@10 A[7,17]=0+3+4@17
            B[8,18]=0+7@18 A[11,21]=0+4@17"""
    else:
        expected = """A[0,10]=0+1@0 A[1,11]=0+2@5 A[0,10]=0+1+2@5 A[1,11]=0+2+3@10
            A[0,10]=0+1+2+3@10 A[6,16]=0+3@10 A[11,21]=0+4@17 A[7,17]=0+3+4@17 B[8,18]=0+7@18
            C[15,25]=0+8@25"""
    assert result.output == _windows(expected)
    assert result.dropped == 2


@STRATEGIES
def test_aggregate_windowed_with_grace(emit: EmitStrategy) -> None:
    # shouldAggregateWindowedWithGrace. A@27 makes the previous record's right window and its
    # own left window, both [17,27]: Kafka forwards that window twice, so does this.
    built = topology(SlidingWindows.of_time_difference_and_grace(10, 5), emit)
    records = _records("A:1@0 A:2@5 A:3@10 A:4@6 A:5@11 A:6@16 A:7@27 A:8@11")
    result = run(built, records, 10)
    if emit == FINAL:
        expected = """A[0,10]=0+1+2+3+4@10 A[1,11]=0+2+3+4+5@11 A[6,16]=0+3+4+5+6@16
            A[7,17]=0+3+5+6@16 A[11,21]=0+5+6@16"""
    else:
        expected = """A[0,10]=0+1@0 A[1,11]=0+2@5 A[0,10]=0+1+2@5 A[1,11]=0+2+3@10
            A[0,10]=0+1+2+3@10 A[6,16]=0+3@10 A[1,11]=0+2+3+4@10 A[6,16]=0+3+4@10
            A[7,17]=0+3@10 A[0,10]=0+1+2+3+4@10 A[7,17]=0+3+5@11 A[6,16]=0+3+4+5@11
            A[1,11]=0+2+3+4+5@11 A[11,21]=0+5@11 A[11,21]=0+5+6@16 A[7,17]=0+3+5+6@16
            A[6,16]=0+3+4+5+6@16 A[12,22]=0+6@16 A[17,27]=0+7@27 A[17,27]=0+7@27"""
    assert result.output == _windows(expected)
    assert result.dropped == 1  # A@11, its window [11,21] closed at 22


@STRATEGIES
def test_aggregate_of_join_results(emit: EmitStrategy) -> None:
    # shouldRestoreAfterJoinRestart, before the restart, fed the join's results directly.
    built = topology(SlidingWindows.of_time_difference_with_no_grace(10), emit)
    records = [
        ("A", "L1,R1", 0), ("A", "L2,R2", 5), ("B", "L3,R3", 11), ("B", "L4,R4", 15),
        ("C", "L5,R5", 25),
    ]  # fmt: skip
    result = run(built, records, 10)
    if emit == FINAL:
        expected = """A[0,10]=0+L1,R1+L2,R2@5 A[1,11]=0+L2,R2@5 B[1,11]=0+L3,R3@11
            B[5,15]=0+L3,R3+L4,R4@15 B[12,22]=0+L4,R4@15"""
    else:
        expected = """A[0,10]=0+L1,R1@0 A[1,11]=0+L2,R2@5 A[0,10]=0+L1,R1+L2,R2@5
            B[1,11]=0+L3,R3@11 B[12,22]=0+L4,R4@15 B[5,15]=0+L3,R3+L4,R4@15
            C[15,25]=0+L5,R5@25"""
    assert result.output == _windows(expected)


# -- beyond Kafka's tests ---------------------------------------------------------------------


@STRATEGIES
def test_results_carry_the_headers_of_the_record_that_made_them(emit: EmitStrategy) -> None:
    built = topology(SlidingWindows.of_time_difference_with_no_grace(10), emit)
    headers = (("trace", b"t1"),)
    result = run(built, _records("A:1@0 A:2@5 A:3@30"), 10, headers=headers)
    assert result.output
    assert result.headers == [headers] * len(result.output)


def test_count_over_sliding_windows() -> None:
    built = topology(SlidingWindows.of_time_difference_with_no_grace(10), UPDATE, count=True)
    result = run(built, _records("A:a@10 A:b@15 A:c@30"), 10, value_deserializer=LongDeserializer())
    # A@30 is more than 10 after A@15: A@15's right window would be empty, so none is made.
    assert result.output == [
        ("A", 0, 10, 1, 10),
        ("A", 11, 21, 1, 15),
        ("A", 5, 15, 2, 15),
        ("A", 20, 30, 1, 30),
    ]


def _oracle(records: list[In], difference: int) -> dict[Windowed[Any], tuple[str, int]]:
    """Every sliding window the records define, by brute force: each record's left window
    (``[0, d]`` for an early one) and its right window when some later record falls in it;
    its aggregate is every record inside, both ends included, and its latest timestamp."""
    result: dict[Windowed[Any], tuple[str, int]] = {}
    for key in {k for k, _, _ in records}:
        mine = [(v, t) for k, v, t in records if k == key]
        starts = {max(0, t - difference) for _, t in mine}
        starts |= {t + 1 for _, t in mine if any(t < u <= t + 1 + difference for _, u in mine)}
        for start in starts:
            inside = [(v, t) for v, t in mine if start <= t <= start + difference]
            value = "".join(sorted("".join(v for v, _ in inside)))
            result[Windowed(key, Window(start, start + difference))] = (
                value,
                max(t for _, t in inside),
            )
    return result


@pytest.mark.parametrize("seed", range(12))
@STRATEGIES
@CACHING
def test_any_arrival_order_builds_the_windows_brute_force_finds(
    seed: int, emit: EmitStrategy, caching: bool
) -> None:
    # A grace longer than the input's span: no record is late, so whatever the order the
    # records arrive in, the store ends up with exactly the windows the records define.
    rng = random.Random(seed)
    difference = rng.randint(1, 12)
    records = [(rng.choice("XY"), rng.choice("abcdefgh"), rng.randint(0, 60)) for _ in range(25)]
    built = topology(
        SlidingWindows.of_time_difference_and_grace(difference, 1_000),
        emit,
        caching=caching,
        retention=100_000,
        initial="",
        aggregator=_sorted_chars,
    )
    # On close, one more record far ahead closes every window (under another key).
    flush = [("Z", "z", 5_000)] if emit == FINAL else []
    result = run(built, records + flush, difference)
    expected = _oracle(records, difference)
    store = {w: v for w, v in result.store.items() if w.key != "Z"}
    assert store == {w: v for w, (v, _) in expected.items()}
    produced = {Windowed(k, Window(s, e)): (v, t) for k, s, e, v, t in result.output if k != "Z"}
    assert produced == expected
    if emit == FINAL:  # each window once, in order of window start
        assert len(result.output) == len(expected)
        starts = [s for _, s, _, _, _ in result.output]
        assert starts == sorted(starts)
