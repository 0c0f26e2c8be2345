"""Processor graphs: Kafka Streams' Processor API in Python's conventions.

Build a graph on a :class:`~streamstate.Topology` (``add_source``, ``add_processor``,
``add_sink``, ``add_repartition``, ``add_store``); its nodes are :class:`Processor` subclasses
that receive immutable :class:`Record` objects and a :class:`ProcessorGraphContext` to forward
them, reach stores, ``schedule`` punctuations (:class:`PunctuationType`) and ``commit``.

Modules: ``record`` (``Record``, ``RecordMetadata``), ``processor`` (the base class),
``context`` (what a processor reaches), ``punctuation`` (Kafka's ``PunctuationQueue``),
``graph`` (nodes, sub-topologies, task ids), ``description`` (``TopologyDescription``),
``processor_topology`` (one task's instance of its sub-topology), ``repartition`` (internal
topics: creation, checks, purge).
"""

from __future__ import annotations

from streamstate.processor.context import ProcessorGraphContext
from streamstate.processor.description import (
    NodeDescription,
    SubtopologyDescription,
    TopologyDescription,
)
from streamstate.processor.graph import TaskId
from streamstate.processor.processor import Processor
from streamstate.processor.punctuation import Cancellable, PunctuationType
from streamstate.processor.record import Headers, Record, RecordMetadata

__all__ = [
    "Cancellable",
    "Headers",
    "NodeDescription",
    "Processor",
    "ProcessorGraphContext",
    "PunctuationType",
    "Record",
    "RecordMetadata",
    "SubtopologyDescription",
    "TaskId",
    "TopologyDescription",
]
