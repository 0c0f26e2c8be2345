"""Which join a ``join`` / ``left_join`` / ``outer_join`` call is, by what it joins with
(Kafka's overloads of ``KStream.join`` and ``KTable.join``, told apart by argument types).

- ``KStream`` with a ``KTable``: ``(joiner(v1, v2), *, name=None, ...)``, a lookup of the
  table's current value (or its value as of the record's time, with a versioned table);
  ``streamstate.dsl.stream_table_join``.
- ``KStream`` with a ``GlobalKTable``: ``(key_selector(k, v), joiner(v1, v2), *, name=None)``;
  ``streamstate.dsl.stream_table_join``.
- ``KStream`` with a ``KStream``: ``(joiner(v1, v2), JoinWindows, *, other_value_serde=None,
  ...)``, a windowed join; ``streamstate.dsl.stream_stream_join``.
- ``KTable`` with a ``KTable``: ``(joiner(v1, v2), *, materialized=None, ...)``, a join on the
  primary key (``streamstate.dsl.table_table_join``), or ``(foreign_key_extractor(v),
  joiner(v1, v2), *, materialized=None, ...)``, a foreign-key join (KIP-213,
  ``streamstate.dsl.foreign_key_join``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamstate.errors import TopologyError

if TYPE_CHECKING:
    from streamstate.dsl.stream import KStream
    from streamstate.dsl.table import KTable

__all__ = ["stream_join", "table_join"]

_KINDS = {"inner": "join", "left": "left_join", "outer": "outer_join"}


def stream_join(
    stream: KStream, kind: str, other: Any, args: tuple[Any, ...], options: dict[str, Any]
) -> KStream:
    """``stream.<kind>_join(other, *args, **options)``; see the module doc."""
    # Imported here: these modules build on KStream and KTable, which import this one.
    from streamstate.dsl.stream import KStream  # noqa: PLC0415
    from streamstate.dsl.table import GlobalKTable, KTable  # noqa: PLC0415

    operation = f"KStream.{_KINDS[kind]}"
    if isinstance(other, KStream):
        from streamstate.dsl.stream_stream_join import join_streams  # noqa: PLC0415

        _same_builder(stream, other, operation)
        joiner, windows = _positional(args, 2, operation, "(other, joiner, JoinWindows)")
        return join_streams(stream, other, joiner, windows, kind=kind, **options)
    if kind == "outer":
        raise TopologyError(
            f"{operation}: an outer join is between two KStreams (windowed) or two KTables, "
            f"not a KStream and a {type(other).__name__}"
        )
    if isinstance(other, KTable):
        from streamstate.dsl.stream_table_join import join_table  # noqa: PLC0415

        _same_builder(stream, other, operation)
        (joiner,) = _positional(args, 1, operation, "(table, joiner)")
        return join_table(stream, other, joiner, left=kind == "left", **options)
    if isinstance(other, GlobalKTable):
        from streamstate.dsl.stream_table_join import join_global  # noqa: PLC0415

        selector, joiner = _positional(args, 2, operation, "(global_table, key_selector, joiner)")
        return join_global(stream, other, selector, joiner, left=kind == "left", **options)
    raise TopologyError(
        f"{operation}: joins a KStream, a KTable or a GlobalKTable, not {type(other).__name__}"
    )


def table_join(
    table: KTable, kind: str, other: Any, args: tuple[Any, ...], options: dict[str, Any]
) -> KTable:
    """``table.<kind>_join(other, *args, **options)``; see the module doc."""
    from streamstate.dsl.table import KTable  # noqa: PLC0415 - builds on this module

    operation = f"KTable.{_KINDS[kind]}"
    if not isinstance(other, KTable):
        raise TopologyError(f"{operation}: joins another KTable, not {type(other).__name__}")
    _same_builder(table, other, operation)
    if len(args) == 2:
        from streamstate.dsl.foreign_key_join import join_foreign_key  # noqa: PLC0415

        if kind == "outer":
            raise TopologyError(
                f"{operation}: a foreign-key join is inner or left, as in Kafka (KIP-213)"
            )
        extractor, joiner = args
        _callable(extractor, operation, "foreign_key_extractor")
        _callable(joiner, operation, "joiner")
        return join_foreign_key(table, other, extractor, joiner, left=kind == "left", **options)
    from streamstate.dsl.table_table_join import join_tables  # noqa: PLC0415

    (joiner,) = _positional(args, 1, operation, "(other, joiner) or (other, extractor, joiner)")
    return join_tables(table, other, joiner, kind=kind, **options)


def _positional(args: tuple[Any, ...], count: int, operation: str, form: str) -> tuple[Any, ...]:
    """``args`` if there are ``count`` of them; the first is always a function."""
    if len(args) != count:
        raise TopologyError(
            f"{operation}: called as {operation}{form}, not with {len(args) + 1} arguments"
        )
    _callable(args[0], operation, "the first argument after the other side")
    return args


def _callable(function: Any, operation: str, what: str) -> None:
    if not callable(function):
        raise TopologyError(
            f"{operation}: {what} must be a function, not {type(function).__name__}"
        )


def _same_builder(one: Any, other: Any, operation: str) -> None:
    if other.builder is not one.builder:
        raise TopologyError(f"{operation}: both sides must come from the same StreamsBuilder")
