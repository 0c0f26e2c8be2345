"""Memory of a RecordQueue holding N records, in a fresh interpreter (run as a script).

Prints one JSON object: the raw bytes the queue holds (key + value lengths) and the queue's
footprint: the growth of the resident set while it admits the records (its Rust FIFO and the
deserialized keys) plus the value ``bytes`` objects it keeps — the very objects the consumer
produced, shared rather than copied, counted in full as if the consumer had let go of them.
"""

from __future__ import annotations

import gc
import json
import resource
import struct
import sys

from confluent_kafka import Message

from streamstate import RecordQueue
from streamstate.serde import LongDeserializer


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize()


def main(n: int) -> dict[str, float]:
    messages = [
        Message(
            topic="events",
            partition=0,
            offset=i,
            key=struct.pack(">q", i),
            value=i.to_bytes(8, "big") * 12 + b"tail",  # 100 distinct bytes
            timestamp=(1, 1_700_000_000_000 + i),
        )
        for i in range(n)
    ]
    raw = sum(len(m.key()) + len(m.value()) for m in messages)
    # The value objects the queue will share with the messages (it keeps them, no copy).
    shared = sum(sys.getsizeof(m.value()) for m in messages)
    gc.collect()
    before = rss_bytes()
    q = RecordQueue("events", 0, key_deserializer=LongDeserializer())
    q.add_raw_records(messages)
    gc.collect()
    growth = rss_bytes() - before
    assert len(q) == n
    footprint = growth + shared
    return {
        "records": n,
        "raw_bytes": raw,
        "queue_bytes": footprint,
        "rss_growth_bytes": growth,
        "shared_value_bytes": shared,
        "ratio": footprint / raw,
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]))))
