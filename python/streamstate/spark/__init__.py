"""streamstate on Spark: the Rust record path in Arrow UDFs over Spark's Kafka source.

Batch and streaming: ``stamp`` (Kafka Streams' record-queue admission; on streams with the
partition time carried in Spark's state store) and ``process`` (a topology's processor with its
stores in Spark's state store). Importing this package needs the ``spark`` extra
(``pip install streamstate[spark]``) and Java 17+.
"""

from __future__ import annotations

from streamstate.spark._decode import decode_kafka_columns, kafka_source_schema
from streamstate.spark._hand_over import hand_over
from streamstate.spark._process import process
from streamstate.spark._pyspark_compat import install as _install_pyspark_fix
from streamstate.spark._restore import restore_changelogs
from streamstate.spark._session import kafka_connector_jars, local_session
from streamstate.spark._stamp import stamp

# Spark's Python workers import this package whenever they unpickle one of its functions: the
# place to mend PySpark 4.0's applyInPandasWithState reader (see _pyspark_compat).
_install_pyspark_fix()

__all__ = [
    "decode_kafka_columns",
    "hand_over",
    "kafka_connector_jars",
    "kafka_source_schema",
    "local_session",
    "process",
    "restore_changelogs",
    "stamp",
]
