"""``FetchControl``'s back-pressure: how many records a stream thread's next poll may take.

A held partition (its queue past ``buffered.records.per.partition``) limits polls to one record,
which keeps memory bounded; but a task waiting (KIP-695) for another partition's records, which
librdkafka queues behind the held partition's, then needs one loop per record ahead of them
(a stream-table join of 1M records, ``benches/bench_join.py``: 47 s before, 22.6 s after). A
starving task lifts the limit until a held queue holds 100k records, what librdkafka prefetches
per partition by default.
"""

from __future__ import annotations

from typing import Any, cast

from streamstate.app.fetch_control import FetchControl
from streamstate.records import TopicPartition

LIMIT = 100
STREAM = TopicPartition("orders", 0)


def control() -> FetchControl:
    # The back-pressure calls never touch the consumer.
    return FetchControl(cast(Any, None), LIMIT, name="test")


def test_a_poll_takes_what_it_wants_while_nothing_is_held() -> None:
    fetch = control()
    fetch.added(STREAM, LIMIT)
    assert fetch.records_to_poll(500) == 500
    assert fetch.records_to_poll(500, starving=True) == 500


def test_a_held_partition_limits_polls_to_one_record() -> None:
    fetch = control()
    fetch.added(STREAM, LIMIT + 1)
    assert fetch.records_to_poll(500) == 1


def test_a_starving_task_takes_full_polls_while_a_partition_is_held() -> None:
    fetch = control()
    fetch.added(STREAM, LIMIT + 1)
    assert fetch.records_to_poll(500, starving=True) == 500


def test_starving_polls_stop_at_librdkafkas_prefetch_per_partition() -> None:
    fetch = control()
    fetch.added(STREAM, LIMIT + 1)
    fetch.added(STREAM, 99_999)
    assert fetch.records_to_poll(500, starving=True) == 500
    fetch.added(STREAM, 100_000)
    assert fetch.records_to_poll(500, starving=True) == 1


def test_a_drained_partition_is_released() -> None:
    fetch = control()
    fetch.added(STREAM, LIMIT + 1)
    fetch.release_drained(lambda _key: LIMIT)
    assert fetch.records_to_poll(500) == 500
    fetch.added(STREAM, LIMIT + 1)
    fetch.release_drained(lambda _key: None)  # no task owns it any more: forgotten
    assert not fetch.held
