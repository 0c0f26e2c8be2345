"""A local Spark session wired with Spark's own Kafka connector."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamstate._maven import MavenError, cache_dir, resolve_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["TESTED_SPARK_VERSIONS", "kafka_connector_jars", "local_session"]

# The pyspark versions CI runs the Spark suites with: the two ends of the `spark` extra's range
# (the oldest in the main venv, the newest in the Makefile's second one). The newest is the last
# whose Kafka connector resolves from Maven Central as reached from the project's machines: of
# the 4.x releases, 4.0.0, 4.1.1 and 4.2.0 resolve; 4.0.1-4.0.5, 4.1.0, 4.1.2+, 4.2.1 and 4.3.0
# do not (spark-token-provider-kafka-0-10 or the connector itself is missing there).
TESTED_SPARK_VERSIONS = ("4.0.0", "4.2.0")


def _spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def kafka_connector_jars(spark_version: str | None = None) -> list[Path]:
    """Jars of ``spark-sql-kafka-0-10_2.13`` matching the installed pyspark, fetched with Maven
    into the streamstate cache (once).

    Raises :class:`~streamstate._maven.MavenError` naming the fix when Maven cannot resolve the
    connector of that version (Spark needs the connector of exactly its own version).
    """
    import pyspark

    version = spark_version or _spark_version()
    coordinate = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"
    try:
        jars = resolve_jars([coordinate], cache_dir() / "spark-kafka" / version)
    except MavenError as exc:
        raise MavenError(
            f"{exc}\n\nSpark's Kafka connector must be the installed pyspark's own version "
            f"({version}), and Maven could not resolve it. Fix: install a pyspark whose "
            f"connector resolves — streamstate tests pyspark {', '.join(TESTED_SPARK_VERSIONS)} "
            f"(pip install 'pyspark=={TESTED_SPARK_VERSIONS[-1]}', or pip install "
            f"'streamstate[spark]', which allows {TESTED_SPARK_VERSIONS[0]} up to "
            f"{TESTED_SPARK_VERSIONS[-1]}) — or make the artifact reachable "
            f"to Maven (a repository or mirror in ~/.m2/settings.xml), or give Spark the "
            f"connector jars yourself (spark.jars)."
        ) from exc
    # Maven also copies what Spark itself ships (scala-library, slf4j, hadoop client, ...), in
    # other versions; two copies of one library on the classpath is a conflict waiting to
    # happen, so keep only the artifacts Spark lacks.
    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [p for p in jars if _artifact(p.name) not in shipped]


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.0.jar`` -> ``kafka-clients``."""
    stem = jar_name.removesuffix(".jar")
    parts = stem.split("-")
    while len(parts) > 1 and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def local_session(
    master: str = "local[2]",
    *,
    app_name: str = "streamstate",
    extra_conf: dict[str, Any] | None = None,
    shuffle_partitions: int | None = None,
) -> SparkSession:
    """A ``SparkSession`` on this machine, configured for streamstate.

    It carries the Kafka connector, runs Python workers with *this* interpreter (otherwise Spark
    starts the system ``python3``, which lacks the extension) and keeps logs quiet.

    ``shuffle_partitions`` sets ``spark.sql.shuffle.partitions``; by default it is left as it is
    (Spark's 200, or what ``extra_conf`` or the session already has). It matters to a streaming
    query: the partitions of ``process()``'s stateful operator are fixed in the checkpoint when
    the query first starts, so they bound its parallelism for good; the number of the source's
    Kafka partitions suits it (``docs/spark-streaming.md``, "Parallelism").
    """
    if shuffle_partitions is not None and shuffle_partitions < 1:
        raise ValueError(f"shuffle_partitions must be at least 1, not {shuffle_partitions}")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Loopback only: the machine's other interfaces may be unroutable from the workers.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jars = ",".join(str(p) for p in kafka_connector_jars())
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", jars)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dderby.system.home={cache_dir() / 'spark-derby'}",
        )
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
