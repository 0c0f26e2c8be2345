"""Operator tools over a Kafka cluster, as library calls (Kafka's ``org.apache.kafka.tools``).

``reset`` is Kafka's application reset tool (``kafka-streams-application-reset``):
:func:`reset_application` rewinds an application's input topics, skips its intermediate topics
to their end and deletes its internal topics, so that the next run reprocesses its input from
scratch. The ``streamstate reset`` command (``streamstate.cli.reset``) is a thin shell over it;
the library never imports the command line.
"""

from __future__ import annotations

from streamstate.tools.reset import (
    PartitionReset,
    ResetPlan,
    is_internal_topic,
    matches_internal_topic_format,
    parse_datetime,
    parse_duration,
    parse_reset_plan,
    reset_application,
)

__all__ = [
    "PartitionReset",
    "ResetPlan",
    "is_internal_topic",
    "matches_internal_topic_format",
    "parse_datetime",
    "parse_duration",
    "parse_reset_plan",
    "reset_application",
]
