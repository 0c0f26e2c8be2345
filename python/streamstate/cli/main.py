"""The ``streamstate`` command.

Subcommands: ``kafka start|stop|status`` (a local single-node Kafka), ``demo`` (the
end-to-end tour on that broker), ``restore`` (a changelog topic into persistent stores),
``query`` (a restored store), ``run`` (an app file's ``StreamsApp``) and ``reset``
(Kafka's application reset tool). Errors print one line on stderr and exit non-zero;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from confluent_kafka.admin import AdminClient

from streamstate.cli.kafka import main as kafka_main
from streamstate.cli.reset import add_command as add_reset
from streamstate.cli.restore import add_commands as add_restore_and_query
from streamstate.cli.run import add_command as add_run
from streamstate.clients.config import admin_config

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    # Imported here: Spark and pyarrow would slow every other command's start.
    from streamstate.cli.demo import run_end_to_end
    from streamstate.cli.tour import run_tour
    from streamstate.spark import local_session
    from streamstate.testing import KafkaTestCluster, LocalKafka

    broker: LocalKafka | None = None
    if args.bootstrap_servers:
        cluster = KafkaTestCluster(args.bootstrap_servers)
        _check_reachable(cluster.bootstrap_servers)
    else:
        broker = LocalKafka()
        print("starting the local Kafka broker (first run downloads it with Maven) ...")
        cluster = KafkaTestCluster(broker.start(), broker=None)
        print(f"  Kafka {broker.version} at {cluster.bootstrap_servers}")
    print("starting a local Spark session (local[2]) with Spark's Kafka connector ...")
    # The tour's topics have two partitions: one stateful task each (docs/spark-streaming.md).
    spark = local_session(app_name="streamstate-demo", shuffle_partitions=2)
    try:
        print(f"  Spark {spark.version}")
        if args.end_to_end:
            print(f"end to end: produce {args.records} records → Spark Kafka source → Rust decode")
            result = run_end_to_end(cluster, spark, count=args.records)
            print(result.summary())
            ok = result.ok
        else:
            tour = run_tour(cluster, spark, clicks=args.records)
            ok = tour.ok
            print(
                f"tour {'passed' if ok else 'FAILED'}: {tour.clicks:,} clicks, the restored app "
                f"counted {tour.counted_by_app:,}, Spark restored {tour.spark_restored:,} "
                "changelog records" + ("".join(f"\n  mismatch: {m}" for m in tour.mismatches))
            )
    finally:
        spark.stop()
        cluster.close()
        if broker is not None and not args.keep_kafka:
            broker.stop()
            print("stopped the local Kafka broker (--keep-kafka leaves it running)")
    return 0 if ok else 1


def _check_reachable(bootstrap_servers: str, timeout: float = 10.0) -> None:
    """Fails fast, before Spark starts, when no broker answers at ``bootstrap_servers``."""
    admin = AdminClient(admin_config(bootstrap_servers, log_level=0))
    try:
        admin.list_topics(timeout=timeout)
    except Exception as exc:
        raise ConnectionError(
            f"no Kafka broker answered at {bootstrap_servers} within {timeout:.0f} s ({exc})"
        ) from None


def _kafka(args: argparse.Namespace) -> int:
    return kafka_main(list(args.kafka_args))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamstate", description="Kafka Streams' state and record machinery for Python."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    kafka = sub.add_parser(
        "kafka",
        help="run a local single-node Apache Kafka (KRaft) for demos and tests",
        add_help=False,
    )
    kafka.add_argument("kafka_args", nargs=argparse.REMAINDER)
    kafka.set_defaults(run=_kafka)

    demo = sub.add_parser(
        "demo",
        help="the tour on the local Kafka and Spark: a stateful app, a crash, its restore, "
        "queries, and the changelog restored on Spark",
    )
    demo.add_argument("--bootstrap-servers", help="use this broker instead of the local one")
    demo.add_argument("--records", type=int, default=50_000, help="records (clicks) to produce")
    demo.add_argument(
        "--end-to-end",
        action="store_true",
        help="only the record-path thread: Kafka → Spark's Kafka source → Rust decode",
    )
    demo.add_argument(
        "--keep-kafka", action="store_true", help="leave the local broker running afterwards"
    )
    demo.set_defaults(run=_demo)

    add_restore_and_query(sub)
    add_run(sub)
    add_reset(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"streamstate: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
