"""The restore consumer itself: librdkafka driven from Rust, or a confluent-kafka ``Consumer``.

:class:`~streamstate.StoreChangelogReader` reads changelogs through either. The Rust one,
:class:`streamstate._core.ChangelogFetcher`, reads and applies records without making them Python
objects, on up to one librdkafka consumer and thread per core; a setting it cannot honour (a
Python callback, a property or value its librdkafka refuses, a SASL mechanism it was built
without) falls back to confluent-kafka with a WARNING naming the setting, never silently.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer

from streamstate._core import ChangelogFetcher

__all__ = ["FETCH_ENV", "FETCH_PATHS", "RestoreConsumer", "open_restore_consumer"]

# Named as the reader's logger: restore messages are configured under one name.
_log = logging.getLogger("streamstate.changelog")

FETCH_PATHS = ("rust", "confluent")
"""The restore consumer's read paths: ``"rust"`` (librdkafka driven from Rust) or
``"confluent"`` (a confluent-kafka ``Consumer``)."""

FETCH_ENV = "STREAMSTATE_RESTORE_FETCH"
"""The environment variable that sets the default read path."""

RestoreConsumer = Consumer | ChangelogFetcher
"""What :func:`open_restore_consumer` returns and ``StoreChangelogReader`` reads with."""


def open_restore_consumer(
    config: Mapping[str, Any], *, fetch: str | None = None, parallelism: int | None = None
) -> RestoreConsumer:
    """The restore consumer :class:`~streamstate.StoreChangelogReader` reads with, made from
    ``config`` (see :func:`~streamstate.clients.config.restore_consumer_config`).

    ``fetch="rust"`` (the default, or what the ``STREAMSTATE_RESTORE_FETCH`` environment
    variable says) gives a :class:`streamstate._core.ChangelogFetcher`: librdkafka read from
    Rust, each batch applied to its store in Rust, up to ``parallelism`` partitions at once
    (default: the number of cores). A setting it cannot honour makes it fall back to a
    confluent-kafka ``Consumer`` with a WARNING naming the setting. ``fetch="confluent"`` gives
    the ``Consumer`` directly. Raises ``ValueError`` for another ``fetch`` or a ``parallelism``
    below 1.
    """
    path = fetch or os.environ.get(FETCH_ENV) or "rust"
    if path not in FETCH_PATHS:
        raise ValueError(f"fetch must be one of {FETCH_PATHS}, not {path!r}")
    if parallelism is not None and parallelism < 1:
        raise ValueError(f"parallelism must be at least 1, not {parallelism}")
    settings = dict(config)
    if path == "rust":
        rejected = ChangelogFetcher.rejected_setting(settings)
        if rejected is None:
            return ChangelogFetcher(settings, parallelism)
        _log.warning(
            "The Rust changelog fetcher cannot honour the restore consumer setting %r (%s); "
            "restoring through confluent-kafka instead",
            *rejected,
        )
    return Consumer(settings)
