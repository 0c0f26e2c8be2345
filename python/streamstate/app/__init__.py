"""The streams runtime: ``StreamsApp`` (the client), its topology, threads, tasks and queries.

Modules: ``state`` (the client state machine), ``config`` (Kafka Streams' config names),
``topology`` (what the app reads, keeps and writes), ``context`` (what a processor sees),
``task`` (one partition's processing and commits), ``coordinator`` (the member's view of the
group), ``stream_thread`` (the poll loop and rebalance callbacks), ``global_thread`` (global
stores, KIP-406), ``queries`` (interactive queries, KIP-216), ``streams_app`` (the client),
``handlers`` (the exception handlers), ``fetch_control`` (back-pressure and lags), ``metrics``;
under ``group.protocol="streams"`` (KIP-1071): ``streams_group`` (the member),
``streams_membership`` (a thread's membership), ``task_assignment``, ``key_metadata``.
"""

from __future__ import annotations

from streamstate.app.context import ProcessorContext
from streamstate.app.coordinator import MemberState
from streamstate.app.handlers import StreamThreadExceptionResponse
from streamstate.app.key_metadata import HostInfo, KeyQueryMetadata, StreamsMetadata
from streamstate.app.queries import ReadOnlyKeyValueStore
from streamstate.app.state import IllegalStateTransitionError, State
from streamstate.app.streams_app import StreamsApp
from streamstate.app.topology import Topology, TopologyError

__all__ = [
    "HostInfo",
    "IllegalStateTransitionError",
    "KeyQueryMetadata",
    "MemberState",
    "ProcessorContext",
    "ReadOnlyKeyValueStore",
    "State",
    "StreamThreadExceptionResponse",
    "StreamsApp",
    "StreamsMetadata",
    "Topology",
    "TopologyError",
]
