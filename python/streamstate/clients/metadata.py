"""Reading the cluster's metadata without waiting out a refusal of the credentials.

librdkafka retries a failed SASL authentication like a broker that is down: an admin client's
``list_topics`` with a wrong password waits its whole timeout (30 s for ``start()`` and
``restore``), then says only that it timed out. It does report the refusal at once, as an
error event (``_AUTHENTICATION``) to the client's ``error_cb``, served by ``poll``. So the
metadata is asked for in short slices, polling between them, and a refusal ends the wait with
librdkafka's own words (the mechanism and the broker's message).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

__all__ = ["MetadataClient"]

# A slice long enough for a healthy cluster to answer in one, short enough that a refusal is
# noticed within about a second.
_SLICE_S = 1.0


class MetadataClient:
    """An ``AdminClient`` (:attr:`admin`, for the caller's other requests) whose
    :meth:`list_topics` fails as soon as the cluster refuses the credentials. An ``error_cb``
    in ``config`` still gets every error."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        refusals: list[KafkaError] = []
        user_error_cb = config.get("error_cb")

        # A closure, not a bound method: the client must not hold itself through its own
        # callback, or a dropped client would live (and reconnect) until a full collection.
        def on_error(error: KafkaError) -> None:
            if error.code() == KafkaError._AUTHENTICATION:
                refusals.append(error)
            if user_error_cb is not None:
                user_error_cb(error)

        self._refusals = refusals
        settings: dict[str, Any] = {**config, "error_cb": on_error}
        self.admin = AdminClient(settings)

    def list_topics(self, timeout_s: float, topic: str | None = None) -> ClusterMetadata:
        """The cluster's metadata (of ``topic`` alone when given); raises ``KafkaException``
        with the authentication error as soon as one is reported, else librdkafka's own once
        ``timeout_s`` has passed."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = max(deadline - time.monotonic(), 0.0)
            try:
                if topic is None:
                    return self.admin.list_topics(timeout=min(_SLICE_S, remaining))
                return self.admin.list_topics(topic=topic, timeout=min(_SLICE_S, remaining))
            except KafkaException:
                self.admin.poll(0)  # serves error_cb (and hands queued log lines on)
                if self._refusals:
                    raise KafkaException(self._refusals[0]) from None
                if time.monotonic() >= deadline:
                    raise
