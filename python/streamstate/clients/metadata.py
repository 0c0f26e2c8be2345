"""Reading the cluster's metadata without waiting out a refusal of the credentials.

librdkafka retries a failed SASL authentication like a broker that is down: an admin client's
``list_topics`` with a wrong password waits its whole timeout (30 s for ``start()`` and
``restore``), then says only that it timed out. It does report the refusal at once, as an
error event (``_AUTHENTICATION``) to the client's ``error_cb``, served by ``poll``. So the
metadata is asked for in short slices, polling between them, and a refusal ends the wait with
librdkafka's own words (the mechanism and the broker's message) as a typed error:
:class:`~streamstate.errors.SaslAuthenticationError`. A failed TLS handshake ends it the same
way, as an :class:`~streamstate.errors.SslAuthenticationError`: librdkafka reports an untrusted
broker certificate as ``_SSL``, and a listener's refusal of the client's certificate (a TLS
alert that, under TLS 1.3, arrives after the client's side of the handshake) as ``_TRANSPORT``
with OpenSSL's account of the alert.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from streamstate.errors import (
    AuthenticationError,
    SaslAuthenticationError,
    SslAuthenticationError,
)

__all__ = ["MetadataClient", "refusal"]

# A slice long enough for a healthy cluster to answer in one, short enough that a refusal is
# noticed within about a second.
_SLICE_S = 1.0


def refusal(error: KafkaError, config: Mapping[str, Any]) -> AuthenticationError | None:
    """The typed error for a librdkafka error event that is the cluster refusing this client's
    credentials (SASL) or a TLS handshake failing, naming ``bootstrap.servers`` (and
    ``sasl.mechanism``); ``None`` for any other error."""
    servers = config.get("bootstrap.servers")
    code, text = error.code(), error.str()
    if code == KafkaError._AUTHENTICATION:
        mechanism = config.get("sasl.mechanism", config.get("sasl.mechanisms", "GSSAPI"))
        return SaslAuthenticationError(
            f"SASL authentication at bootstrap.servers={servers} failed "
            f"(sasl.mechanism={mechanism}): {text}"
        )
    # A TLS alert from the broker is a refusal too (a transient drop carries none); librdkafka
    # has no code of its own for it, so OpenSSL's words are the only sign.
    if code == KafkaError._SSL or (
        code == KafkaError._TRANSPORT and "SSL routines" in text and "alert" in text
    ):
        return SslAuthenticationError(
            f"TLS handshake with the broker at bootstrap.servers={servers} failed: {text}"
        )
    return None


class MetadataClient:
    """An ``AdminClient`` (:attr:`admin`, for the caller's other requests) whose
    :meth:`list_topics` fails as soon as the cluster refuses the credentials. An ``error_cb``
    in ``config`` still gets every error."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        refusals: list[AuthenticationError] = []
        user_error_cb = config.get("error_cb")

        # A closure, not a bound method: the client must not hold itself through its own
        # callback, or a dropped client would live (and reconnect) until a full collection.
        def on_error(error: KafkaError) -> None:
            refused = refusal(error, config)
            if refused is not None:
                refusals.append(refused)
            if user_error_cb is not None:
                user_error_cb(error)

        self._refusals = refusals
        settings: dict[str, Any] = {**config, "error_cb": on_error}
        self.admin = AdminClient(settings)

    def list_topics(self, timeout_s: float, topic: str | None = None) -> ClusterMetadata:
        """The cluster's metadata (of ``topic`` alone when given). Raises the
        :class:`~streamstate.errors.AuthenticationError` (a ``StreamsError``) as soon as a
        refusal is reported, else librdkafka's ``KafkaException`` once ``timeout_s`` has
        passed."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = max(deadline - time.monotonic(), 0.0)
            try:
                if topic is None:
                    return self.admin.list_topics(timeout=min(_SLICE_S, remaining))
                return self.admin.list_topics(topic=topic, timeout=min(_SLICE_S, remaining))
            except KafkaException as exc:
                self.admin.poll(0)  # serves error_cb (and hands queued log lines on)
                if self._refusals:
                    raise self._refusals[0] from exc
                if time.monotonic() >= deadline:
                    raise
