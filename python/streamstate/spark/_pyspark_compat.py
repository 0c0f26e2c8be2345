"""Fixes for PySpark releases: 4.0's ``applyInPandasWithState`` under recent pyarrow releases,
4.2's warning about pandas 3 (:func:`quiet_pandas3_warning`) and 4.2's ``to_arrow_type``
(:func:`to_arrow_type`).

The Python worker of ``applyInPandasWithState`` reads, next to the data, a struct column that
says where each group's rows start (``startOffset``) and how many there are (``numRows``); rows
past the last group are null. It converts that column with ``to_pandas()``, and pyarrow (26
here) turns the integer fields of a struct column with nulls into floats, so
``RecordBatch.slice(0.0, 2.0)`` fails with "'float' object cannot be interpreted as an integer"
as soon as an Arrow batch holds more rows than groups (several rows of one group, in practice).
Streaming ``stamp`` and ``process`` send few rows per group, but several whenever a Kafka
partition's records arrive in more than one Arrow batch, or a task reads several source topics.

:func:`install` replaces that one conversion with ``to_pylist()`` (exact ints, ``None`` for the
null rows) when, and only when, the installed pyarrow has the behaviour: it checks first.
Spark's workers run it when they import this package to unpickle a streamstate function.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

__all__ = ["install", "quiet_pandas3_warning", "state_info_ints_become_floats", "to_arrow_type"]

# PySpark 4.2 issues this FutureWarning each time it builds a UDF of its pandas family, which
# includes mapInArrow (pandas_udf underneath) and applyInPandasWithState, if pandas >= 3 is
# installed. streamstate's mapInArrow bodies never touch pandas, and its applyInPandasWithState
# bodies are tested with pandas 3 on the newest PySpark by the Spark suites; left alone, the
# warning fires on every stamp/process/restore call, and fails programs (and test suites) that
# turn warnings into errors.
_PANDAS3_WARNING = "PySpark does not yet fully support pandas >= 3.0.0"


@contextmanager
def quiet_pandas3_warning() -> Iterator[None]:
    """Around streamstate's calls that make PySpark build its UDFs: ignores PySpark 4.2's
    pandas-3 FutureWarning, and only that one."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=re.escape(_PANDAS3_WARNING), category=FutureWarning
        )
        yield


def to_arrow_type(data_type: Any, *, prefers_large_types: bool = False) -> pa.DataType:
    """The Arrow type Spark exchanges for ``data_type`` (timestamps as UTC microseconds), on
    every supported PySpark: 4.0 and 4.1 take ``timestamp_utc`` (default true), 4.2 replaced
    it with a keyword-only ``timezone`` that a timestamp requires (an ``AssertionError``
    without it). The Arrow batches of ``mapInArrow`` carry Spark timestamps as UTC on all."""
    import inspect

    from pyspark.sql.pandas import types

    # Any: mypy knows only the signature of the pyspark it checks against.
    convert: Any = types.to_arrow_type
    if "timezone" in inspect.signature(convert).parameters:
        return convert(data_type, timezone="UTC", prefers_large_types=prefers_large_types)
    return convert(data_type, prefers_large_types=prefers_large_types)


_STATE_INFO_FIELDS = frozenset({"startOffset", "numRows", "isLastChunk"})


def state_info_ints_become_floats() -> bool:
    """Whether this pyarrow converts the int fields of a struct column with null rows to
    floats (the behaviour that breaks PySpark 4.0's reader)."""
    children = [pa.array([0, None], pa.int32())]
    column = pa.StructArray.from_arrays(children, names=["n"], mask=pa.array([False, True]))
    return isinstance(column.to_pandas().iloc[0]["n"], float)


def install() -> bool:
    """Fixes ``ApplyInPandasWithStateSerializer`` in this process if needed; returns whether a
    fix is in place."""
    try:
        from pyspark.sql.pandas.serializers import ApplyInPandasWithStateSerializer
    except ImportError:  # a pyspark that moved it: nothing this fix knows how to mend
        return False
    if getattr(ApplyInPandasWithStateSerializer, "_streamstate_state_info_fix", False):
        return True
    original = getattr(ApplyInPandasWithStateSerializer, "arrow_to_pandas", None)
    if original is None or not state_info_ints_become_floats():
        return False

    def arrow_to_pandas(self: Any, arrow_column: Any, *args: Any, **kwargs: Any) -> Any:
        column_type = arrow_column.type
        if pa.types.is_struct(column_type) and _STATE_INFO_FIELDS <= {f.name for f in column_type}:
            import pandas as pd

            return pd.Series(arrow_column.to_pylist(), dtype=object)
        return original(self, arrow_column, *args, **kwargs)

    # setattr: replacing a method of a class mypy knows from pyspark's own annotations.
    setattr(ApplyInPandasWithStateSerializer, "arrow_to_pandas", arrow_to_pandas)  # noqa: B010
    setattr(ApplyInPandasWithStateSerializer, "_streamstate_state_info_fix", True)  # noqa: B010
    return True
