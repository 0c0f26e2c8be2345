"""Sink records whose timestamp the broker would refuse, refused before they are sent.

A broker refuses a record whose ``CreateTime`` lies further ahead of its clock than the topic's
``message.timestamp.after.max.ms`` (one hour by default since Kafka 4.0, KIP-937), or further
behind than ``message.timestamp.before.max.ms`` (``message.timestamp.difference.max.ms`` on
older brokers): ``INVALID_TIMESTAMP``. librdkafka then fails *every* record of the produce
batch with that error, the valid ones too (it cannot tell them apart), and under exactly-once
the failure makes the transaction abortable, so even a ``"continue"`` from the production
exception handler could never commit: the task would abort and retry the same record forever.

Kafka Streams hands a send failure to the production exception handler record by record, and
applies its answer before the transaction is doomed (``RecordCollectorImpl.send``). So a stream
thread reads each sink topic's limits once (:class:`SinkTimestampLimits`, through the admin
client, at the first record to it) and :class:`TimestampCheckedProducer` checks each sink
record against them with the local clock: a record the broker would refuse is not produced;
its delivery callback gets an :class:`~streamstate.errors.InvalidTimestampError` naming the
topic, the broker's error and the limit, which the production exception handler decides on
like any refused record. A record within a few seconds of a limit is sent as it is (the broker's
clock decides): clock skew between client and broker is the one case left to the broker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from streamstate.clients.producer_proxy import ProducerProxy, UnsentMessage
from streamstate.errors import InvalidTimestampError

__all__ = ["SinkTimestampLimits", "TimestampCheckedProducer"]

_log = logging.getLogger("streamstate.app")

# Records this close to a limit are left to the broker's clock (see the module doc).
_SKEW_MS = 5_000
_NO_LIMIT = (None, None)


class SinkTimestampLimits:
    """The ``(after_max_ms, before_max_ms)`` of each sink topic (``None``: no limit, as under
    ``LogAppendTime``), read once per topic with ``admin``; thread-safe."""

    def __init__(self, admin: Callable[[], AdminClient], *, timeout_s: float = 10.0) -> None:
        """``admin`` makes the admin client, at the first topic asked for."""
        self._make_admin = admin
        self._admin: AdminClient | None = None
        self._timeout = timeout_s
        self._limits: dict[str, tuple[int | None, int | None]] = {}
        self._lock = threading.Lock()

    def of(self, topic: str) -> tuple[int | None, int | None]:
        """``topic``'s limits; none when they cannot be read (the broker then decides)."""
        limits = self._limits.get(topic)
        if limits is None:
            with self._lock:
                limits = self._limits.get(topic)
                if limits is None:
                    limits = self._limits[topic] = self._read(topic)
        return limits

    def close(self) -> None:
        """Lets go of the admin client: librdkafka destroys a client only with its last
        reference, and a closed thread is often kept (by its app) long after it stopped."""
        with self._lock:
            self._admin = None

    def _read(self, topic: str) -> tuple[int | None, int | None]:
        try:
            if self._admin is None:
                self._admin = self._make_admin()
            resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
            future = self._admin.describe_configs([resource], request_timeout=self._timeout)
            entries = future[resource].result(timeout=self._timeout)
        except (KafkaException, RuntimeError, TimeoutError, ValueError) as exc:
            _log.debug("the timestamp limits of sink topic %s are unknown: %s", topic, exc)
            return _NO_LIMIT
        values = {name: entry.value for name, entry in entries.items()}
        if values.get("message.timestamp.type") == "LogAppendTime":
            return _NO_LIMIT  # the broker stamps the record itself
        difference = _limit(values.get("message.timestamp.difference.max.ms"))
        after = _limit(values.get("message.timestamp.after.max.ms"))
        before = _limit(values.get("message.timestamp.before.max.ms"))
        return (
            after if after is not None else difference,
            before if before is not None else difference,
        )


def _limit(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        limit = int(value)
    except ValueError:
        return None
    return limit if limit < 2**62 else None  # Long.MAX_VALUE: no limit


class TimestampCheckedProducer(ProducerProxy):
    """A stream thread's producer as a task's sinks see it: ``produce`` does not send a record
    whose timestamp the sink topic's limits refuse, and calls its ``on_delivery`` with an
    :class:`~streamstate.errors.InvalidTimestampError` instead (see the module doc); everything
    else is the producer's."""

    def __init__(self, producer: Any, limits: SinkTimestampLimits) -> None:
        """Checks ``producer``'s sink records against ``limits``."""
        super().__init__(producer)
        self._limits = limits
        # The limits by topic, as `limits` gives them (read once, never changed): one dict
        # read per record on the sink path instead of two calls.
        self._known: dict[str, tuple[int | None, int | None]] = {}

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        """``Producer.produce``, after the check."""
        timestamp = kwargs.get("timestamp")
        if timestamp is not None and timestamp > 0:
            limits = self._known.get(topic)
            if limits is None:
                limits = self._known[topic] = self._limits.of(topic)
            after, before = limits
            # The refusal's test inlined (the common case passes it); _refusal decides.
            now = int(time.time() * 1000)
            if (after is not None and timestamp - now > after + _SKEW_MS) or (
                before is not None and now - timestamp > before + _SKEW_MS
            ):
                refusal = self._refusal(topic, int(timestamp))
            else:
                refusal = None
            if refusal is not None:
                on_delivery = kwargs.get("on_delivery")
                if on_delivery is None:
                    raise refusal
                on_delivery(refusal, UnsentMessage(topic, kwargs.get("partition")))
                return
        self._producer.produce(topic, value, key, **kwargs)

    def inline_limits(self, topic: str) -> tuple[int | None, int | None]:
        """``(latest, earliest)``: a record to ``topic`` with a timestamp above 0 passes
        :meth:`produce`'s test when ``timestamp - now <= latest`` and ``now - timestamp <=
        earliest`` (``now`` the epoch ms; ``None``: no such limit), for a sink that inlines the
        test over a run of records (``StreamTableJoinProcessor.run_handler``) and sends a
        record failing it through :meth:`produce`. Reads the limits as :meth:`produce` would."""
        limits = self._known.get(topic)
        if limits is None:
            limits = self._known[topic] = self._limits.of(topic)
        after, before = limits
        return (
            None if after is None else after + _SKEW_MS,
            None if before is None else before + _SKEW_MS,
        )

    @property
    def unchecked_produce(self) -> Callable[..., None]:
        """The wrapped producer's ``produce``: for a record that passed the inlined test."""
        produce: Callable[..., None] = self._producer.produce
        return produce

    def _refusal(self, topic: str, timestamp: int) -> InvalidTimestampError | None:
        after, before = self._limits.of(topic)
        if after is None and before is None:
            return None
        now = int(time.time() * 1000)
        if after is not None and timestamp - now > after + _SKEW_MS:
            return InvalidTimestampError(
                f"the broker refuses this record (INVALID_TIMESTAMP): its timestamp {timestamp} "
                f"is {timestamp - now} ms ahead of now, more than the topic's "
                f"message.timestamp.after.max.ms ({after})",
                topic=topic,
            )
        if before is not None and now - timestamp > before + _SKEW_MS:
            return InvalidTimestampError(
                f"the broker refuses this record (INVALID_TIMESTAMP): its timestamp {timestamp} "
                f"is {now - timestamp} ms behind now, more than the topic's "
                f"message.timestamp.before.max.ms ({before})",
                topic=topic,
            )
        return None
