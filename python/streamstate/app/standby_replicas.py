"""``num.standby.replicas`` under ``group.protocol="streams"``: applied to the group.

Under the Streams rebalance protocol (KIP-1071) the broker assigns standby tasks, and how many
it assigns is a setting of the group, not of its members: the group config
``streams.num.standby.replicas`` (set with IncrementalAlterConfigs on the ``GROUP`` resource
named after the ``application.id``), falling back to the broker config
``group.streams.num.standby.replicas`` (default 0), and capped by the broker's
``group.streams.max.standby.replicas`` (default 2). Kafka Streams 4.4 ignores its own
``num.standby.replicas`` under this protocol (its upgrade notes say to set the group config
with ``kafka-configs.sh``); streamstate does better: a ``num.standby.replicas`` given in the
config is set on the group when :meth:`~streamstate.StreamsApp.start` runs, before any member
joins, and a value the broker refuses (above its maximum, say) fails ``start()`` with the
broker's reason. Left out of the config, the group's setting is not touched.
"""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from streamstate.app.config import StreamsConfig
from streamstate.clients.config import admin_config
from streamstate.clients.kafka_errors import error_text
from streamstate.errors import StreamsError

__all__ = ["GROUP_STANDBY_REPLICAS", "apply_standby_replicas"]

GROUP_STANDBY_REPLICAS = "streams.num.standby.replicas"
"""The group config the broker reads the number of standby replicas from."""


def apply_standby_replicas(config: StreamsConfig, *, timeout: float = 30.0) -> None:
    """Sets the group config ``streams.num.standby.replicas`` of the group ``application.id``
    to ``num.standby.replicas`` (streams protocol, when the setting is given); raises
    :class:`~streamstate.errors.StreamsError` with the broker's reason when refused."""
    replicas = config.num_standby_replicas
    if config.group_protocol != "streams" or replicas is None:
        return
    admin = AdminClient(admin_config(config.bootstrap_servers, overrides=config.overrides))
    resource = ConfigResource(
        ResourceType.GROUP,
        config.application_id,
        incremental_configs=[
            ConfigEntry(
                GROUP_STANDBY_REPLICAS,
                str(replicas),
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    try:
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=timeout)
    except KafkaException as exc:
        raise StreamsError(
            f"setting num.standby.replicas={replicas} on the streams group "
            f"{config.application_id!r} (group config {GROUP_STANDBY_REPLICAS}) failed: "
            f"{error_text(exc)}; the broker caps it at group.streams.max.standby.replicas"
        ) from exc
