"""``streamstate run APP.py``: runs the ``StreamsApp`` an app file defines, until interrupted.

The file is executed as a script (``runpy``) and must leave a :class:`~streamstate.StreamsApp`
in a module-level variable ``app``. ``--bootstrap-servers`` and ``--state-dir`` are passed to it
as ``STREAMSTATE_BOOTSTRAP_SERVERS`` / ``STREAMSTATE_STATE_DIR`` environment variables (read
them in the file). State transitions and restoration progress are printed; Ctrl-C or SIGTERM
closes the app cleanly (commit, checkpoint, leave the group); ``--seconds N`` stops after N s.
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import time
from typing import Any

from streamstate.app import State, StreamsApp
from streamstate.cli.signals import StopRequest

__all__ = ["add_command"]


def _run(args: argparse.Namespace) -> int:
    if args.bootstrap_servers:
        os.environ["STREAMSTATE_BOOTSTRAP_SERVERS"] = args.bootstrap_servers
    if args.state_dir:
        os.environ["STREAMSTATE_STATE_DIR"] = args.state_dir
    if not os.path.isfile(args.app_file):
        raise FileNotFoundError(f"no app file {args.app_file!r}")
    namespace = runpy.run_path(args.app_file, run_name="__streamstate_app__")
    app = namespace.get("app")
    if not isinstance(app, StreamsApp):
        raise TypeError(
            f"{args.app_file} must define a module-level `app = StreamsApp(...)`, "
            f"found {type(app).__name__}"
        )
    for name in ("streamstate.app", "streamstate.changelog"):
        logging.getLogger(name).setLevel(logging.INFO)
    app.set_state_listener(lambda new, old: print(f"state: {old.value} -> {new.value}", flush=True))
    print(f"running {args.app_file} (application.id {app.config.application_id!r}); Ctrl-C stops")
    deadline = time.monotonic() + args.seconds if args.seconds else None
    # Not a threading.Event: its set() can deadlock inside a signal handler (cli/signals.py).
    try:
        with StopRequest().installed() as stop:
            app.start()
            while not stop.is_set() and app.state not in (State.ERROR, State.NOT_RUNNING):
                if deadline is not None and time.monotonic() >= deadline:
                    break
                stop.wait(0.2)
    finally:
        # With the previous handlers back: a second Ctrl-C interrupts a close that hangs.
        app.close(60)
    if app.fatal_error is not None:
        raise app.fatal_error
    return 0


def add_command(sub: Any) -> None:
    """Adds ``run`` to the ``streamstate`` subcommand parsers ``sub``."""
    run = sub.add_parser("run", help="run the StreamsApp an app file defines")
    run.add_argument("app_file", metavar="APP.py")
    run.add_argument("--bootstrap-servers", metavar="HOST:PORT")
    run.add_argument("--state-dir", metavar="DIR")
    run.add_argument("--seconds", type=float, help="stop after this many seconds")
    run.set_defaults(run=_run)
