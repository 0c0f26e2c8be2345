//! `Stamper`: the `stamp` kernel of `streamstate-core` with its partition state, for Python.
//!
//! One `Stamper` per Spark task (or per group): it keeps partition time across the batches
//! handed to `stamp`, so a Kafka partition split over several batches is stamped as one.

use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3_arrow::{PyDataType, PyRecordBatch, PySchema};
use streamstate_core::record_queue::DropCounts;
use streamstate_core::stamp::{Handler, PartitionState, StampState, Stamper as CoreStamper};

use crate::errors::{guard, IntoPyResult};
use crate::serde::{deserializer_from_spec, extractor_from_spec};

/// Deserializes, timestamps and admits Kafka-source Arrow batches with Kafka Streams'
/// record-queue rules, keeping each partition's time across calls.
#[pyclass(frozen, module = "streamstate._core")]
pub struct Stamper {
    inner: CoreStamper,
    state: Mutex<StampState>,
}

fn handler(name: &str) -> PyResult<Handler> {
    match name {
        "fail" => Ok(Handler::Fail),
        "continue" => Ok(Handler::Continue),
        other => Err(PyValueError::new_err(format!(
            "deserialization_exception_handler must be 'fail' or 'continue', got {other:?}"
        ))),
    }
}

#[pymethods]
impl Stamper {
    /// `key_spec`/`value_spec`/`extractor_spec` are the `_spec` tuples of the built-in serdes
    /// and extractors; `value_type` any object exporting an Arrow type or field through the
    /// PyCapsule interface (e.g. a `pyarrow.DataType`).
    #[new]
    #[pyo3(signature = (key_spec, value_spec, extractor_spec, handler="fail", value_type=None))]
    fn new(
        py: Python<'_>,
        key_spec: &Bound<'_, PyTuple>,
        value_spec: &Bound<'_, PyTuple>,
        extractor_spec: &Bound<'_, PyTuple>,
        handler: &str,
        value_type: Option<PyDataType>,
    ) -> PyResult<Self> {
        guard(py, || {
            let inner = CoreStamper::new(
                deserializer_from_spec(key_spec)?,
                deserializer_from_spec(value_spec)?,
                extractor_from_spec(extractor_spec)?,
                self::handler(handler)?,
                value_type.map(PyDataType::into_inner),
            )
            .py_err(py)?;
            Ok(Stamper {
                inner,
                state: Mutex::new(StampState::new()),
            })
        })
    }

    /// Stamps one batch in Spark's Kafka source schema; returns a `pyarrow.RecordBatch` with
    /// topic, partition, offset, timestamp, key, value, partition_time (admitted records only).
    fn stamp(&self, py: Python<'_>, batch: PyRecordBatch) -> PyResult<Py<PyAny>> {
        guard(py, || {
            let batch = batch.into_inner();
            let out = py
                .detach(|| {
                    let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    self.inner.stamp(&batch, &mut state)
                })
                .py_err(py)?;
            Ok(PyRecordBatch::new(out).into_pyarrow(py)?.unbind())
        })
    }

    /// The schema of the batches `stamp` returns (a `pyarrow.Schema`).
    #[getter]
    fn schema(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        guard(py, || {
            Ok(PySchema::new(self.inner.schema())
                .into_pyarrow(py)?
                .unbind())
        })
    }

    /// The partition time of `(topic, partition)`: the highest timestamp admitted so far,
    /// `-1` (`NOT_KNOWN`) before any.
    fn partition_time(&self, py: Python<'_>, topic: &str, partition: i32) -> PyResult<i64> {
        guard(py, || {
            let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            Ok(state
                .get(&(topic.to_owned(), partition))
                .map_or(streamstate_core::timestamp::NOT_KNOWN, |s| {
                    s.partition_time()
                }))
        })
    }

    /// The offset of the last record of `(topic, partition)` stamped (admitted or dropped),
    /// `None` before any.
    fn last_offset(&self, py: Python<'_>, topic: &str, partition: i32) -> PyResult<Option<i64>> {
        guard(py, || {
            let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            Ok(state
                .get(&(topic.to_owned(), partition))
                .and_then(PartitionState::last_offset))
        })
    }

    /// Continues `(topic, partition)` from a state handed out earlier (`partition_time`,
    /// `last_offset`, `dropped_records`), replacing what this stamper knew of it: Spark's
    /// streaming `stamp` carries these in its state store from one micro-batch to the next.
    #[pyo3(signature = (topic, partition, partition_time, last_offset=None, *, deserialization_error=0, negative_timestamp=0))]
    #[allow(clippy::too_many_arguments)]
    fn resume(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        partition_time: i64,
        last_offset: Option<i64>,
        deserialization_error: u64,
        negative_timestamp: u64,
    ) -> PyResult<()> {
        guard(py, || {
            let dropped = DropCounts {
                deserialization_error,
                negative_timestamp,
            };
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.insert(
                (topic.to_owned(), partition),
                PartitionState::resumed(partition_time, last_offset, dropped),
            );
            Ok(())
        })
    }

    /// Dropped records so far: `{(topic, partition): {"deserialization_error": n,
    /// "negative_timestamp": n}}` for every partition seen.
    fn dropped_records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guard(py, || {
            let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let out = PyDict::new(py);
            for ((topic, partition), s) in state.iter() {
                let counts = PyDict::new(py);
                let d = s.dropped();
                counts.set_item("deserialization_error", d.deserialization_error)?;
                counts.set_item("negative_timestamp", d.negative_timestamp)?;
                out.set_item((topic.as_str(), *partition), counts)?;
            }
            Ok(out)
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Stamper>()?;
    Ok(())
}
