"""``streamstate reset``: Kafka's application reset tool (``kafka-streams-application-reset``)
with Kafka's option names, over :func:`streamstate.tools.reset_application`.

Prints the plan (each partition's committed offset and its new one, the internal topics to
delete), then what it did. Refusals (active members, an unknown topic, an unreachable broker)
print one line on stderr and exit 1 with nothing changed; ``--dry-run`` prints the plan only.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from streamstate.tools.reset import parse_datetime, parse_duration, reset_application

__all__ = ["add_command", "read_properties"]

_DESCRIPTION = """\
Resets Kafka Streams application APP (its consumer group APP) so that its next run reprocesses
its input from scratch: sets the group's offsets of the input topics to the earliest offset (by
default) or another position, the offsets of intermediate topics to their end, and deletes the
application's internal topics (APP-...-changelog, APP-...-repartition and the foreign-key
join's subscription topics). Output topics are not touched. Refuses while the group has active
members (--force removes them). The local state of the instances is kept unless --state-dir
is given: call StreamsApp.clean_up() before the next start, or delete
state.dir/<application.id>. Run once with --dry-run to see the plan first."""


def _topics(text: str) -> list[str]:
    topics = [t.strip() for t in text.split(",") if t.strip()]
    if not topics:
        raise argparse.ArgumentTypeError(f"expected topic names separated by commas, not {text!r}")
    return topics


def _datetime(text: str) -> str:
    try:
        parse_datetime(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _duration(text: str) -> str:
    try:
        parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file's ``key=value`` (or ``key: value``) lines, ``#``/``!`` comments
    skipped: Kafka's ``--command-config`` file of client settings."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise FileNotFoundError(f"cannot read the config file {path!r}: {exc.strerror}") from None
    settings = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise ValueError(f"line {number} of {path} is not key=value: {raw!r}")
        settings[line[:cut].strip()] = line[cut + 1 :].strip()
    return settings


def _reset(args: argparse.Namespace) -> int:
    config: dict[str, Any] = {}
    if args.command_config:
        config.update(read_properties(args.command_config))
    if not args.debug:
        # librdkafka would print a line per failed connection attempt; the error says it once.
        config.setdefault("log_level", 0)
    reset_application(
        args.bootstrap_server,
        args.application_id,
        input_topics=args.input_topics or (),
        intermediate_topics=args.intermediate_topics or (),
        internal_topics=args.internal_topics,
        to_earliest=args.to_earliest,
        to_latest=args.to_latest,
        to_offset=args.to_offset,
        to_datetime=args.to_datetime,
        by_duration=args.by_duration,
        shift_by=args.shift_by,
        from_file=args.from_file,
        dry_run=args.dry_run,
        force=args.force,
        state_dir=args.state_dir,
        config=config,
        timeout=args.timeout,
        progress=lambda line: print(line, flush=True),
    )
    return 0


def add_command(sub: Any) -> None:
    """Adds ``reset`` to the ``streamstate`` subcommand parsers ``sub``."""
    reset = sub.add_parser(
        "reset",
        help="reset an application to reprocess its input (Kafka's application reset tool)",
        description=_DESCRIPTION,
    )
    reset.add_argument(
        "--application-id", required=True, metavar="APP", help="the application.id (REQUIRED)"
    )
    reset.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",
        dest="bootstrap_server",
        default="localhost:9092",
        metavar="HOST:PORT",
        help="the broker(s) to connect to, HOST1:PORT1,HOST2:PORT2 (default: localhost:9092)",
    )
    reset.add_argument(
        "--input-topics",
        type=_topics,
        metavar="T1,T2",
        help="input topics: their offsets are reset (to the earliest offset unless another "
        "position is given)",
    )
    reset.add_argument(
        "--intermediate-topics",
        type=_topics,
        metavar="T1,T2",
        help="intermediate user topics (written and read by the app): skipped to their end",
    )
    reset.add_argument(
        "--internal-topics",
        type=_topics,
        metavar="T1,T2",
        help="delete only these internal topics (a subset of those a dry run lists)",
    )
    position = reset.add_mutually_exclusive_group()
    position.add_argument(
        "--to-earliest", action="store_true", help="reset to the earliest offset (default)"
    )
    position.add_argument("--to-latest", action="store_true", help="reset to the latest offset")
    position.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    position.add_argument(
        "--to-datetime",
        type=_datetime,
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="reset to the first offset at or after this time (UTC unless a zone is given)",
    )
    position.add_argument(
        "--by-duration",
        type=_duration,
        metavar="PnDTnHnMnS",
        help="reset to the first offset at or after this long ago",
    )
    position.add_argument(
        "--shift-by", type=int, metavar="N", help="move the committed offset by N (may be < 0)"
    )
    position.add_argument(
        "--from-file", metavar="CSV", help="reset to the offsets of TOPIC,PARTITION,OFFSET lines"
    )
    reset.add_argument(
        "--command-config",
        "--config-file",
        dest="command_config",
        metavar="FILE",
        help="properties file of client settings (security.protocol, sasl.*, ssl.* ...)",
    )
    reset.add_argument(
        "--force",
        action="store_true",
        help="remove the active members of the group first (stopped instances whose session "
        "has not expired yet); stop every instance before using it",
    )
    reset.add_argument(
        "--dry-run", action="store_true", help="print the actions without performing them"
    )
    reset.add_argument(
        "--state-dir",
        metavar="DIR",
        help="also delete this machine's local state of the app, DIR/<application.id> "
        "(the app's state.dir)",
    )
    reset.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for the broker per step (default: 30)",
    )
    reset.set_defaults(run=_reset)
