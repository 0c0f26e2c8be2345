"""``streamstate.checkpoint``: ``OffsetCheckpoint``, documented in
:mod:`streamstate.state.checkpoint`, where it lives; this path keeps working."""

from __future__ import annotations

from streamstate.state.checkpoint import OffsetCheckpoint

__all__ = ["OffsetCheckpoint"]
