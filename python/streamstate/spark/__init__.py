"""streamstate on Spark: the Rust record path in Arrow UDFs over Spark's Kafka source.

Importing this package needs the ``spark`` extra (``pip install streamstate[spark]``) and Java 17+.
"""

from __future__ import annotations

from streamstate.spark._decode import decode_kafka_columns, kafka_source_schema
from streamstate.spark._restore import restore_changelogs
from streamstate.spark._session import kafka_connector_jars, local_session
from streamstate.spark._stamp import stamp

__all__ = [
    "decode_kafka_columns",
    "kafka_connector_jars",
    "kafka_source_schema",
    "local_session",
    "restore_changelogs",
    "stamp",
]
