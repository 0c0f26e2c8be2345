"""The one boundary to Kafka: every client's configuration, what Kafka's errors mean, and one
consumer poll split by partition.

Modules: ``config`` (the main consumer, producer, restore consumer, global consumer and admin
configurations, with the user's overrides merged in one place), ``kafka_errors`` (the
classification every caller uses: fatal, end of partition, invalid offset, task migrated,
retriable), ``poll`` (``split_poll``: the records of each partition, split in Rust, and the
error events), ``restore_consumer`` (``open_restore_consumer``: the changelog fetch in Rust, or
confluent-kafka's consumer). The runtime (``streamstate.app``), the state package and Spark use
these; this package imports none of them.
"""
