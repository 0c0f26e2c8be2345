"""The consumer group metadata streamstate writes for a streams member's transactional
offset commits (``app/streams_transaction.py``) is librdkafka's own format, read back by
confluent-kafka's producer; another version is refused, by librdkafka and by the check
``StreamsApp`` makes at construction. On the broker:
``tests/integration/test_streams_exactly_once.py``.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from streamstate.app.streams_transaction import (
    check_group_metadata_format,
    decode_group_metadata,
    encode_group_metadata,
)
from streamstate.errors import StreamsError


def test_the_group_metadata_blob_is_librdkafkas_and_a_wrong_version_is_refused() -> None:
    group = f"cgmd-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"group.id": group})
    try:
        theirs = consumer.consumer_group_metadata()
    finally:
        consumer.close()
    assert encode_group_metadata(group, "", -1) == theirs
    check_group_metadata_format(group)  # the same check, with librdkafka's own blob
    blob = encode_group_metadata(group, "member-1", 7, "instance-a")
    assert decode_group_metadata(blob) == (group, "member-1", 7, "instance-a")
    assert decode_group_metadata(encode_group_metadata(group, "m", 2**31 - 1)) == (
        group,
        "m",
        2**31 - 1,
        None,
    )
    # Another version of the format: librdkafka itself refuses to read it, and the check
    # streamstate makes before its first commit names both formats.
    other = b"CGMDv3:" + blob[len(b"CGMDv2:") :]
    producer = Producer({"transactional.id": f"t-{group}"})
    try:
        with pytest.raises(KafkaException, match="not a serialized consumer group metadata"):
            producer.send_offsets_to_transaction([KafkaTopicPartition("t", 0, 1)], other, 1)
    finally:
        producer.close()
    with pytest.raises(StreamsError, match=r"CGMDv3.*format changed.*group.protocol=classic"):
        check_group_metadata_format(group, other)
    with pytest.raises(StreamsError, match="not librdkafka's consumer group metadata v2"):
        decode_group_metadata(other)
    with pytest.raises(StreamsError, match="not printable"):
        encode_group_metadata(group, "bad\nid", 1)
