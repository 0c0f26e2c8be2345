"""Diagnostic for per-key state on Spark (issue "Spark at production scale", point 1): what one
``MapState`` point operation costs on PySpark's state socket, synchronous (PySpark's own
client: one round trip per call) and pipelined (a window of requests written, then their
responses read, through the client's private methods).

Run with a PySpark >= 4.1 that has ``transformWithStateInPandas`` and ``protobuf`` (its state
client needs it; streamstate's venvs do not install it), e.g.::

    .venv-spark-4.2.0/bin/pip install protobuf
    PYSPARK_PYTHON=.venv-spark-4.2.0/bin/python .venv-spark-4.2.0/bin/python \\
        -m benches.diag_spark_map_state 20000

One streaming micro-batch (a file source of one row, ``local[1]``, RocksDB state) whose single
group writes N/2 keys and reads them back synchronously, then N/2 more pipelined; it prints
microseconds per operation, and what building a request costs in Python alone.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyspark.sql.streaming.proto.StateMessage_pb2 as sm
from pyspark.sql import SparkSession
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, DoubleType, StringType, StructField, StructType

KEY = StructType([StructField("k", BinaryType())])
VALUE = StructType([StructField("v", BinaryType())])
# Requests in flight at once: their responses (tens of bytes each) must fit the socket's
# buffers, or the server blocks writing them while this side blocks writing requests.
WINDOW = 512


class MapStateProbe(StatefulProcessor):
    """Times ``n`` point operations on a ``MapState`` of binary keys and values."""

    def __init__(self, n: int) -> None:
        self.n = n

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getMapState("m", KEY, VALUE)
        self.api = self.state._mapStateClient._stateful_processor_api_client

    def _request(self, call: Any) -> bytes:
        variable = sm.StateVariableRequest(mapStateCall=call)
        return bytes(sm.StateRequest(stateVariableRequest=variable).SerializeToString())

    def _update(self, key: bytes, value: bytes) -> bytes:
        update = sm.UpdateValue(
            userKey=self.api._serialize_to_bytes(KEY, (key,)),
            value=self.api._serialize_to_bytes(VALUE, (value,)),
        )
        return self._request(sm.MapStateCall(stateName="m", updateValue=update))

    def _get(self, key: bytes) -> bytes:
        get = sm.GetValue(userKey=self.api._serialize_to_bytes(KEY, (key,)))
        return self._request(sm.MapStateCall(stateName="m", getValue=get))

    def _pipelined(self, requests: list[bytes]) -> list[tuple[int, str, bytes]]:
        responses = []
        for i in range(0, len(requests), WINDOW):
            window = requests[i : i + WINDOW]
            for request in window:
                self.api._send_proto_message(request)
            responses.extend(self.api._receive_proto_message() for _ in window)
        return responses

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        for _ in rows:
            pass
        half = self.n // 2
        keys = [b"key-%08d" % i for i in range(self.n)]
        value = b"x" * 16
        per_op: dict[str, float] = {}

        def timed(name: str, count: int, work: Any) -> Any:
            started = time.perf_counter()
            result = work()
            per_op[name] = (time.perf_counter() - started) / count * 1e6
            return result

        timed(
            "sync update",
            half,
            lambda: [self.state.updateValue((k,), (value,)) for k in keys[:half]],
        )
        timed("sync get", half, lambda: [self.state.getValue((k,)) for k in keys[:half]])
        rest = keys[half:]
        timed("build update (Python)", len(rest), lambda: [self._update(k, value) for k in rest])
        updated = timed(
            "pipelined update",
            len(rest),
            lambda: self._pipelined([self._update(k, value) for k in rest]),
        )
        assert all(status == 0 for status, _, _ in updated)
        got = timed(
            "pipelined get",
            len(rest),
            lambda: [
                self.api._deserialize_from_bytes(raw)
                for _, _, raw in self._pipelined([self._get(k) for k in rest])
            ],
        )
        assert all(row is not None and row[0] == value for row in got)
        # The socket is still in step: a synchronous call after the pipeline reads its own answer.
        assert self.state.getValue((keys[0],))[0] == value
        yield pd.DataFrame({"operation": list(per_op), "us": list(per_op.values())})

    def close(self) -> None:
        pass


def main(n: int) -> None:
    spark = (
        SparkSession.builder.master("local[1]")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    with tempfile.TemporaryDirectory(prefix="diag-map-state-") as directory:
        spark.createDataFrame(pd.DataFrame({"g": ["a"], "x": [1]})).write.parquet(f"{directory}/in")
        schema = StructType(
            [StructField("operation", StringType()), StructField("us", DoubleType())]
        )
        out = (
            spark.readStream.schema("g string, x long")
            .parquet(f"{directory}/in")
            .groupBy("g")
            .transformWithStateInPandas(MapStateProbe(n), schema, "Append", "None")
        )
        query = (
            out.writeStream.format("memory")
            .queryName("probe")
            .outputMode("append")
            .option("checkpointLocation", f"{directory}/checkpoint")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        for row in spark.sql("select * from probe").collect():
            print(f"{row.operation:24} {row.us:8.1f} us per operation")
    spark.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
