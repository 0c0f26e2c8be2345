"""``Processor``: the base class of a processor graph's nodes (Kafka's ``api.Processor``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamstate.processor.context import ProcessorGraphContext
    from streamstate.processor.record import Record

__all__ = ["Processor"]


class Processor:
    """Subclass it and override :meth:`process`; :meth:`init` and :meth:`close` are optional.

    Each task makes its own instance (``add_processor(name, factory, ...)`` calls
    ``factory()``; a subclass is its own factory), so attributes set in ``init`` belong to one
    task. ``init`` receives the node's context: keep it to ``forward`` records, reach stores,
    ``schedule`` punctuations and ``commit``.
    """

    def init(self, context: ProcessorGraphContext) -> None:
        """Called once per task before any record; the default does nothing."""

    def process(self, record: Record) -> None:
        """Called with each record the node's parents forward."""
        raise NotImplementedError(f"{type(self).__name__} must override process(record)")

    def close(self) -> None:
        """Called once when the task closes; the default does nothing."""
