"""``streamstate.spark.process`` runs the one-function form and graphs of one sub-topology; a
graph Spark cannot run is refused with a ``TopologyError`` that says why, before anything
touches Spark."""

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


def test_a_graph_of_two_sub_topologies_is_refused_naming_their_sources() -> None:
    topology = (
        Topology()
        .add_source("a", "clicks")
        .add_processor("fa", Forward, "a")
        .add_source("b", "views")
        .add_processor("fb", Forward, "b")
    )
    config = {"application.id": "app", "bootstrap.servers": "127.0.0.1:9"}
    # df is None: the refusal must come before process() looks at the DataFrame.
    with pytest.raises(TopologyError, match=r"2 sub-topologies .*clicks.*views"):
        process(cast(Any, None), topology, config)
