"""The fix for PySpark 4.0's ``applyInPandasWithState`` reader under recent pyarrow."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.serializers import ApplyInPandasWithStateSerializer

from streamstate.spark._pyspark_compat import install, state_info_ints_become_floats


def _state_info_column() -> pa.ChunkedArray:
    """A state-info column as the JVM writes it: one group of two rows, then a null row."""
    fields = {
        "properties": pa.array(["{}", None], pa.string()),
        "keyRowAsUnsafe": pa.array([b"k", None], pa.binary()),
        "object": pa.array([None, None], pa.binary()),
        "startOffset": pa.array([0, None], pa.int32()),
        "numRows": pa.array([2, None], pa.int32()),
        "isLastChunk": pa.array([True, None], pa.bool_()),
    }
    column = pa.StructArray.from_arrays(
        list(fields.values()), names=list(fields), mask=pa.array([False, True])
    )
    return pa.chunked_array([column])


def test_the_state_info_is_read_with_exact_ints() -> None:
    assert install()
    serializer = ApplyInPandasWithStateSerializer("UTC", False, True, None, 10_000, False)
    info = serializer.arrow_to_pandas(_state_info_column())
    first = info.iloc[0]
    assert (first["startOffset"], first["numRows"], first["isLastChunk"]) == (0, 2, True)
    assert isinstance(first["startOffset"], int)
    assert info.iloc[1] is None  # the end of the groups, as the reader expects


def test_the_fix_is_needed_with_this_pyarrow() -> None:
    # If pyarrow stops turning these ints into floats, install() does nothing and this module's
    # reason to exist is gone: this test then says so.
    assert state_info_ints_become_floats()
    first = _state_info_column().to_pandas().iloc[0]
    assert isinstance(first["startOffset"], float)


def test_other_columns_are_converted_as_before() -> None:
    install()
    serializer = ApplyInPandasWithStateSerializer("UTC", False, True, None, 10_000, False)
    values = serializer.arrow_to_pandas(pa.chunked_array([pa.array(["a", None, "c"])]))
    assert values.tolist()[::2] == ["a", "c"]  # (pandas 3 shows the null as NaN)
