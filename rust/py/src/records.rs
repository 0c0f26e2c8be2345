//! `ConsumerRecord` and `StampedRecord`: the record classes users see.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple, PyType};

static TIMESTAMP_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Kafka's Java timestamp-type ids: -1 none, 0 create time, 1 log-append time.
pub const NO_TIMESTAMP_TYPE: i32 = -1;
pub const CREATE_TIME: i32 = 0;

fn timestamp_type_enum<'py>(py: Python<'py>, id: i32) -> PyResult<Bound<'py, PyAny>> {
    TIMESTAMP_TYPE
        .import(py, "streamstate.records", "TimestampType")?
        .call1((id,))
}

/// A raw Kafka record: `key` and `value` are `bytes` or `None`.
#[pyclass(frozen, module = "streamstate._core")]
pub struct ConsumerRecord {
    #[pyo3(get)]
    pub topic: Py<PyString>,
    #[pyo3(get)]
    pub partition: i32,
    #[pyo3(get)]
    pub offset: i64,
    #[pyo3(get)]
    pub timestamp: i64,
    #[pyo3(get)]
    pub key: Py<PyAny>,
    #[pyo3(get)]
    pub value: Py<PyAny>,
    #[pyo3(get)]
    pub headers: Py<PyAny>,
    pub timestamp_type_id: i32,
}

#[pymethods]
impl ConsumerRecord {
    #[new]
    #[pyo3(signature = (topic, partition, offset, timestamp, key, value, headers=None, timestamp_type=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        topic: Bound<'_, PyString>,
        partition: i32,
        offset: i64,
        timestamp: i64,
        key: Py<PyAny>,
        value: Py<PyAny>,
        headers: Option<Py<PyAny>>,
        timestamp_type: Option<i32>,
    ) -> Self {
        ConsumerRecord {
            topic: topic.unbind(),
            partition,
            offset,
            timestamp,
            key,
            value,
            headers: headers.unwrap_or_else(|| py.None()),
            timestamp_type_id: timestamp_type.unwrap_or(CREATE_TIME),
        }
    }

    /// `TimestampType` of the record's timestamp.
    #[getter]
    fn timestamp_type<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        timestamp_type_enum(py, self.timestamp_type_id)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        record_repr("ConsumerRecord", &self.args(py)?)
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        match other.cast::<ConsumerRecord>() {
            Ok(o) => self.args(py)?.eq(o.get().args(py)?),
            Err(_) => Ok(false),
        }
    }

    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
        Ok((py.get_type::<ConsumerRecord>(), self.args(py)?))
    }
}

impl ConsumerRecord {
    /// The constructor's arguments: what equality, pickling and `repr` are made of.
    fn args<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (
            self.topic.clone_ref(py),
            self.partition,
            self.offset,
            self.timestamp,
            self.key.clone_ref(py),
            self.value.clone_ref(py),
            self.headers.clone_ref(py),
            self.timestamp_type_id,
        )
            .into_pyobject(py)
    }
}

/// `Name(topic=..., partition=..., offset=..., timestamp=..., key=..., value=...)` from the
/// first six constructor arguments (headers are left out: they are rarely what one looks for).
fn record_repr(name: &str, args: &Bound<'_, PyTuple>) -> PyResult<String> {
    let mut parts = Vec::with_capacity(6);
    for (label, item) in ["topic", "partition", "offset", "timestamp", "key", "value"]
        .iter()
        .zip(args.iter())
    {
        parts.push(format!("{label}={}", item.repr()?));
    }
    Ok(format!("{name}({})", parts.join(", ")))
}

/// A deserialized record with the timestamp its extractor gave it.
#[pyclass(frozen, module = "streamstate._core")]
pub struct StampedRecord {
    #[pyo3(get)]
    pub topic: Py<PyString>,
    #[pyo3(get)]
    pub partition: i32,
    #[pyo3(get)]
    pub offset: i64,
    #[pyo3(get)]
    pub timestamp: i64,
    #[pyo3(get)]
    pub key: Py<PyAny>,
    #[pyo3(get)]
    pub value: Py<PyAny>,
    #[pyo3(get)]
    pub headers: Py<PyAny>,
}

#[pymethods]
impl StampedRecord {
    #[new]
    #[pyo3(signature = (topic, partition, offset, timestamp, key, value, headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        topic: Bound<'_, PyString>,
        partition: i32,
        offset: i64,
        timestamp: i64,
        key: Py<PyAny>,
        value: Py<PyAny>,
        headers: Option<Py<PyAny>>,
    ) -> Self {
        StampedRecord {
            topic: topic.unbind(),
            partition,
            offset,
            timestamp,
            key,
            value,
            headers: headers.unwrap_or_else(|| py.None()),
        }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        record_repr("StampedRecord", &self.args(py)?)
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        match other.cast::<StampedRecord>() {
            Ok(o) => self.args(py)?.eq(o.get().args(py)?),
            Err(_) => Ok(false),
        }
    }

    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
        Ok((py.get_type::<StampedRecord>(), self.args(py)?))
    }
}

impl StampedRecord {
    /// The constructor's arguments: what equality, pickling and `repr` are made of.
    fn args<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (
            self.topic.clone_ref(py),
            self.partition,
            self.offset,
            self.timestamp,
            self.key.clone_ref(py),
            self.value.clone_ref(py),
            self.headers.clone_ref(py),
        )
            .into_pyobject(py)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ConsumerRecord>()?;
    m.add_class::<StampedRecord>()?;
    Ok(())
}
