//! Arrow kernels exposed to Python: one call per batch, the GIL released while Rust works.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3_arrow::{PyArray, PyRecordBatch};
use streamstate_core::arrow_decode::{
    decode_column as core_decode_column, decode_kafka_batch as core_decode_kafka_batch,
};
use streamstate_core::serde::Deserializer;

use crate::errors::{guard, IntoPyResult};
use crate::serde::deserializer_from_spec;

/// Resolves a built-in deserializer by its short name (`"long"`, `"string"`, ...).
pub fn deserializer_by_name(py: Python<'_>, name: &str) -> PyResult<Deserializer> {
    let unknown = || {
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown deserializer {name:?}; expected one of bytes, string, short, integer, \
             long, float, double, uuid, json"
        ))
    };
    if name == "avro" {
        return Err(unknown()); // needs a schema: only through a spec with one
    }
    deserializer_from_spec(&PyTuple::new(py, [name])?).map_err(|_| unknown())
}

/// Deserializes a column of raw Kafka bytes (binary, large_binary or binary_view) into a
/// typed pyarrow array with Kafka's wire formats.
#[pyfunction]
fn decode_column(py: Python<'_>, array: PyArray, deserializer: &str) -> PyResult<Py<PyAny>> {
    guard(py, || {
        let de = deserializer_by_name(py, deserializer)?;
        let (array, _field) = array.into_inner();
        let decoded = py
            .detach(|| core_decode_column(array.as_ref(), &de))
            .py_err(py)?;
        to_pyarrow_array(py, PyArray::from_array_ref(decoded))
    })
}

/// Deserializes the key and value of a batch in Spark's Kafka source schema; the output has
/// topic, partition, offset, timestamp (epoch ms), key and value. Errors name the record.
#[pyfunction]
fn decode_kafka_batch(
    py: Python<'_>,
    batch: PyRecordBatch,
    key: &str,
    value: &str,
) -> PyResult<Py<PyAny>> {
    guard(py, || {
        let key = deserializer_by_name(py, key)?;
        let value = deserializer_by_name(py, value)?;
        let batch = batch.into_inner();
        let decoded = py
            .detach(|| core_decode_kafka_batch(&batch, &key, &value))
            .py_err(py)?;
        Ok(PyRecordBatch::new(decoded).into_pyarrow(py)?.unbind())
    })
}

/// Hands an Arrow array to pyarrow through the PyCapsule interface (no copy).
pub fn to_pyarrow_array(py: Python<'_>, array: PyArray) -> PyResult<Py<PyAny>> {
    let capsule_holder = array.into_pyobject(py)?;
    let out = py
        .import(intern!(py, "pyarrow"))?
        .getattr(intern!(py, "array"))?
        .call1((capsule_holder,))?;
    Ok(out.unbind())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_column, m)?)?;
    m.add_function(wrap_pyfunction!(decode_kafka_batch, m)?)?;
    Ok(())
}
