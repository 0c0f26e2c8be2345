"""``streamstate restore`` and ``streamstate query``: the command line over restored stores.

``restore`` shows a progress bar (records/s and ETA over the last few seconds,
:mod:`streamstate.cli.progress`) when stdout is a terminal, one summary
line per partition otherwise, and exactly one JSON object with ``--json``. ``query`` prints
keys and values as UTF-8 text where they decode and as hex otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from streamstate.cli.progress import ProgressBar
from streamstate.state.stores import PersistentKeyValueStore
from streamstate.state.topic_restore import PartitionRestoreResult, restore_topic, store_directory

__all__ = ["ProgressBar", "add_commands"]


def _partitions(text: str) -> list[int]:
    try:
        parts = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--partitions takes partition numbers separated by commas, not {text!r}"
        ) from None
    if not parts or any(p < 0 for p in parts):
        raise argparse.ArgumentTypeError(f"--partitions needs partitions >= 0, not {text!r}")
    return parts


def _parallelism(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"--parallelism needs a number >= 1, not {text!r}")
    return n


def _not_a_file(state_dir: Path) -> None:
    if state_dir.exists() and not state_dir.is_dir():
        raise NotADirectoryError(f"--state-dir {state_dir} is a file, not a directory")


def _restore(args: argparse.Namespace) -> int:
    _not_a_file(Path(args.state_dir))
    started = time.monotonic()
    results: list[PartitionRestoreResult]
    if args.runner == "spark":
        from streamstate.spark import local_session, restore_changelogs

        spark = local_session(app_name="streamstate-restore", master=args.spark_master)
        try:
            rows = restore_changelogs(
                spark,
                bootstrap_servers=args.bootstrap_servers,
                topic=args.topic,
                state_dir=args.state_dir,
                store_name=args.store,
                partitions=args.partitions,
                eos=args.eos,
            )
        finally:
            spark.stop()
        results = [PartitionRestoreResult(**row) for row in rows]
    else:
        bar = ProgressBar(sys.stdout) if sys.stdout.isatty() and not args.json else None
        try:
            results = restore_topic(
                args.bootstrap_servers,
                args.topic,
                args.state_dir,
                store_name=args.store,
                partitions=args.partitions,
                eos=args.eos,
                restore_listener=bar,
                fetch=args.fetch,
                parallelism=args.parallelism,
            )
        finally:
            if bar is not None:
                bar.finish()
    total = sum(r.restored for r in results)
    if args.json:
        report = {"partitions": [r.to_dict() for r in results], "total_restored": total}
        print(json.dumps(report))
        return 0
    name = args.store or args.topic
    for r in results:
        print(
            f"partition {r.partition}: restored {r.restored:,} records "
            f"(offsets {r.start_offset}..{r.end_offset}) in {r.seconds:.2f} s "
            f"-> {store_directory(args.state_dir, name, r.partition)}"
        )
    print(
        f"restored {total:,} records into {len(results)} stores in "
        f"{time.monotonic() - started:.1f} s"
    )
    return 0


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.hex()


_TASK_DIRECTORY = re.compile(r"^(?:(\d+)_)?(\d+)$")


def _app_layout(state_dir: Path, store: str) -> list[tuple[int, Path]]:
    """An app's ``state.dir/<application.id>`` layout: ``<task>/<store>`` per task, the task
    ``<partition>`` (one-function form) or ``<subtopology>_<partition>`` (a graph), as
    ``(partition, directory)`` in partition order."""
    found = []
    for task in state_dir.iterdir() if state_dir.is_dir() else []:
        match = _TASK_DIRECTORY.match(task.name)
        if match is not None and (task / store).is_dir():
            found.append((int(match.group(2)), task / store))
    return sorted(found)


def _store_directories(state_dir: Path, store: str, partition: int | None) -> list[Path]:
    """The directories of ``store``'s partitions (only ``partition``'s, when given) in either
    layout: ``streamstate restore``'s ``DIR/NAME/<partition>``, or an app's
    ``DIR/<task>/NAME`` (``DIR`` being ``state.dir/<application.id>``)."""
    _not_a_file(state_dir)
    base = store_directory(state_dir, store, 0).parent  # refuses a name that is no plain one
    if base.is_dir():
        directories = sorted(
            ((int(d.name), d) for d in base.iterdir() if d.is_dir() and d.name.isdigit()),
        )
        layout = f"{base}/<partition>"
    else:
        directories = _app_layout(state_dir, store)
        layout = f"{state_dir}/<task>/{store}"
        if not directories:
            hint = ""
            if any(_app_layout(d, store) for d in _subdirectories(state_dir)):
                hint = "; for an app's stores give its directory, state.dir/<application.id>"
            raise FileNotFoundError(
                f"no store {store!r} in {state_dir} (neither {base}/<partition> as "
                f"`streamstate restore` writes it nor {layout} as an app does{hint})"
            )
    if partition is not None:
        directories = [(p, d) for p, d in directories if p == partition]
        if not directories:
            raise FileNotFoundError(
                f"no store {store!r} for partition {partition} in {state_dir} "
                f"({layout.replace('<partition>', str(partition))} does not exist)"
            )
    if not directories:
        raise FileNotFoundError(f"store {store!r} in {base} has no partitions")
    return [d for _, d in directories]


def _subdirectories(directory: Path) -> list[Path]:
    return [d for d in directory.iterdir() if d.is_dir()] if directory.is_dir() else []


def _query_key(args: argparse.Namespace) -> bytes | None:
    if args.key is None:
        return None
    if not args.hex:
        return bytes(args.key.encode("utf-8"))
    try:
        return bytes.fromhex(args.key)
    except ValueError:
        raise ValueError(f"--key {args.key!r} is not hexadecimal (--hex)") from None


def _query(args: argparse.Namespace) -> int:
    # The key first: a malformed one is refused before any store is opened.
    key = _query_key(args)
    directories = _store_directories(Path(args.state_dir), args.store, args.partition)
    found: list[tuple[bytes, bytes]] = []
    for directory in directories:
        with PersistentKeyValueStore(args.store, directory) as store:
            if key is None:
                found.extend(store.all())
            else:
                value = store.get(key)
                if value is not None:
                    found.append((key, value))
                    break
    if key is not None and not found:
        where = f"partition {args.partition}" if args.partition is not None else "any partition"
        print(
            f"streamstate: key {args.key!r} not found in store {args.store!r} ({where})",
            file=sys.stderr,
        )
        return 1
    pairs: list[dict[str, Any]] = [{"key": _text(k), "value": _text(v)} for k, v in found]
    if args.json:
        print(json.dumps(pairs[0] if key is not None else pairs))
    else:
        for pair in pairs:
            print(f"{pair['key']}\t{pair['value']}")
    return 0


def add_commands(sub: Any) -> None:
    """Adds ``restore`` and ``query`` to the ``streamstate`` subcommand parsers ``sub``."""
    restore = sub.add_parser(
        "restore",
        help="restore each partition of a changelog topic into persistent stores",
        description="Restores each partition of changelog TOPIC (key = store key, value = "
        "store value, null value = delete) into DIR/NAME/<partition>/, a persistent store "
        "plus its .checkpoint. A second run resumes from the checkpoint.",
    )
    restore.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT")
    restore.add_argument("--topic", required=True)
    restore.add_argument("--state-dir", required=True, metavar="DIR")
    restore.add_argument("--store", metavar="NAME", help="store name (default: the topic)")
    restore.add_argument(
        "--partitions", type=_partitions, metavar="0,1", help="only these partitions"
    )
    restore.add_argument(
        "--eos",
        action="store_true",
        help="read committed records only (exactly-once changelogs)",
    )
    restore.add_argument(
        "--fetch",
        choices=["rust", "confluent"],
        default=None,
        help="how changelogs are read: librdkafka from Rust (default) or confluent-kafka",
    )
    restore.add_argument(
        "--parallelism",
        type=_parallelism,
        default=None,
        metavar="N",
        help="partitions restored at once with --fetch rust (default: the number of cores)",
    )
    restore.add_argument("--runner", choices=["local", "spark"], default="local")
    restore.add_argument(
        "--spark-master", default="local[2]", metavar="URL", help="with --runner spark"
    )
    restore.add_argument("--json", action="store_true", help="print one JSON object")
    restore.set_defaults(run=_restore)

    query = sub.add_parser(
        "query",
        help="read a store restored by `streamstate restore`, or a stopped app's",
        description="Reads store NAME from DIR: DIR/NAME/<partition> as `streamstate restore` "
        "writes it, or an app's directory state.dir/<application.id> (DIR/<task>/NAME).",
    )
    query.add_argument("--state-dir", required=True, metavar="DIR")
    query.add_argument("--store", required=True, metavar="NAME")
    query.add_argument("--partition", type=int, metavar="P")
    what = query.add_mutually_exclusive_group(required=True)
    what.add_argument("--key", metavar="KEY", help="the key, as UTF-8 text (hex with --hex)")
    what.add_argument("--all", action="store_true", help="every entry, in key order")
    query.add_argument("--hex", action="store_true", help="KEY is given in hex")
    query.add_argument("--json", action="store_true", help="print JSON")
    query.set_defaults(run=_query)
