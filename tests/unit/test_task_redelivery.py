"""A stream task takes each record of a source partition once: records a consumer hands over
again (at or below the highest offset the task has taken) are dropped with a warning, not
processed twice. CI's exactly-once scale-out case saw a member count a contiguous range of a
partition it owned throughout twice, and commit both."""

from __future__ import annotations

import logging

import pytest

from streamstate.dsl import StreamsBuilder
from streamstate.records import TopicPartition
from streamstate.serde import Serdes, StringSerializer
from streamstate.testing import TopologyTestDriver

CONFIG = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
TEXT = StringSerializer()


def test_records_delivered_again_are_dropped_not_counted_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = StreamsBuilder()
    builder.stream("input").group_by_key().count(materialized="counts")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("input", TEXT, TEXT)
        for i in range(10):
            topic.pipe_input(f"k{i % 2}", "v", i)
        # The next hand-over starts again at the partition's first record, as a consumer that
        # fetched a range twice would deliver it.
        driver._fed["input"] = 0
        with caplog.at_level(logging.WARNING, logger="streamstate.app"):
            topic.pipe_input("k0", "v", 10)
        counts = dict(driver.get_key_value_store("counts").all())
    assert counts == {"k0": 6, "k1": 5}
    assert "10 records of input-0 at offsets 0..9 were delivered again" in caplog.text


def test_after_an_offset_reset_lower_offsets_are_new_records() -> None:
    builder = StreamsBuilder()
    builder.stream("input").group_by_key().count(materialized="counts")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("input", TEXT, TEXT)
        for i in range(4):
            topic.pipe_input("k", "v", i)
        # auto.offset.reset moved the consumer back to the start (a re-created topic, say).
        (task,) = driver._tasks.values()
        task.offset_reset(TopicPartition("input", 0))
        driver._fed["input"] = 0
        topic.pipe_input("k", "v", 4)
        counts = dict(driver.get_key_value_store("counts").all())
    assert counts == {"k": 9}  # the 4 first records taken again, then the 5th
