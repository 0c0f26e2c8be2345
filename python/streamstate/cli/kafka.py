"""``streamstate kafka start|stop|status``: the local single-node broker from the command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from streamstate.testing.broker import KAFKA_VERSION, LocalKafka, LocalKafkaError, resolve_kafka

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamstate kafka",
        description="Run a local single-node Kafka broker (KRaft) for demos and tests.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{start,stop,status}")

    def instance_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--instance-dir",
            type=Path,
            default=None,
            help="the broker's directory (default: <cache>/instances/default)",
        )

    start = commands.add_parser("start", help="start the broker and print its address")
    instance_option(start)
    start.add_argument("--fresh", action="store_true", help="delete all data before starting")
    start.add_argument("--timeout", type=float, default=90.0, help="seconds to wait (90)")
    start.add_argument("--heap-mb", type=int, default=1024, help="JVM max heap in MB (1024)")
    start.add_argument("--kafka-version", default=KAFKA_VERSION, help=f"({KAFKA_VERSION})")

    stop = commands.add_parser("stop", help="stop the broker")
    instance_option(stop)
    stop.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL (30)")

    status = commands.add_parser("status", help="report whether the broker runs")
    instance_option(status)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``start|stop|status`` as ``streamstate kafka`` does; return the exit code.

    ``start`` prints the bootstrap address (and nothing else) on stdout. ``stop`` prints
    ``stopped`` or ``not running``. ``status`` prints ``running pid=<pid> bootstrap=<address>``
    or ``not running``, or with ``--json`` the :meth:`LocalKafka.status` dictionary; it exits 0
    either way. Failures print one line to stderr and exit 1.
    """
    args = _parser().parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        if args.command == "start":
            if args.instance_dir is not None and args.instance_dir.is_file():
                raise NotADirectoryError(
                    f"--instance-dir {args.instance_dir} is a file, not a directory"
                )
            kafka = LocalKafka(args.instance_dir, version=args.kafka_version, heap_mb=args.heap_mb)
            if not kafka.status()["running"]:
                # Resolve first, so a slow first download says what it is doing.
                resolve_kafka(kafka.version, progress=None if args.verbose else progress)
            print(kafka.start(fresh=args.fresh, timeout=args.timeout), flush=True)
        elif args.command == "stop":
            kafka = LocalKafka(args.instance_dir)
            print("stopped" if kafka.stop(timeout=args.timeout) else "not running", flush=True)
        else:
            kafka = LocalKafka(args.instance_dir)
            state = kafka.status()
            if args.json:
                print(json.dumps(state, sort_keys=True), flush=True)
            elif state["running"]:
                print(f"running pid={state['pid']} bootstrap={state['bootstrap_servers']}")
            else:
                print("not running", flush=True)
    except LocalKafkaError as exc:
        print(f"error: {exc.message}", file=sys.stderr, flush=True)
        return 1
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
