"""``streamstate.spark.process`` runs the one-function form; a processor graph is refused with a
``TopologyError`` that says where graphs run, before anything touches Spark."""

from __future__ import annotations

from typing import Any, cast

import pytest

from streamstate import Processor, Record
from streamstate.app import Topology
from streamstate.errors import TopologyError
from streamstate.spark import process


class Forward(Processor):
    def process(self, record: Record) -> None:
        pass


def test_a_processor_graph_is_refused_naming_where_graphs_run() -> None:
    topology = Topology().add_source("src", "clicks").add_processor("fwd", Forward, "src")
    config = {"application.id": "app", "bootstrap.servers": "127.0.0.1:9"}
    with pytest.raises(TopologyError, match=r"processor graphs .* run in a StreamsApp"):
        process(cast(Any, None), topology, config)
