//! `ConsumerRecord` and `StampedRecord`: the record classes users see.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyType};

static TIMESTAMP_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Kafka's Java timestamp-type ids: -1 none, 0 create time, 1 log-append time.
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
        Ok(format!(
            "ConsumerRecord(topic={}, partition={}, offset={}, timestamp={}, key={}, value={})",
            self.topic.bind(py).repr()?,
            self.partition,
            self.offset,
            self.timestamp,
            self.key.bind(py).repr()?,
            self.value.bind(py).repr()?,
        ))
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(other) = other.cast::<ConsumerRecord>() else {
            return Ok(false);
        };
        let o = other.get();
        Ok(self.partition == o.partition
            && self.offset == o.offset
            && self.timestamp == o.timestamp
            && self.timestamp_type_id == o.timestamp_type_id
            && PyAnyMethods::eq(self.topic.bind(py).as_any(), o.topic.bind(py))?
            && PyAnyMethods::eq(self.key.bind(py), o.key.bind(py))?
            && PyAnyMethods::eq(self.value.bind(py), o.value.bind(py))?
            && PyAnyMethods::eq(self.headers.bind(py), o.headers.bind(py))?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cls = py.get_type::<ConsumerRecord>();
        let args = (
            self.topic.clone_ref(py),
            self.partition,
            self.offset,
            self.timestamp,
            self.key.clone_ref(py),
            self.value.clone_ref(py),
            self.headers.clone_ref(py),
            self.timestamp_type_id,
        );
        (cls, args).into_pyobject(py).map(|t| t.into_any())
    }
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
        Ok(format!(
            "StampedRecord(topic={}, partition={}, offset={}, timestamp={}, key={}, value={})",
            self.topic.bind(py).repr()?,
            self.partition,
            self.offset,
            self.timestamp,
            self.key.bind(py).repr()?,
            self.value.bind(py).repr()?,
        ))
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(other) = other.cast::<StampedRecord>() else {
            return Ok(false);
        };
        let o = other.get();
        Ok(self.partition == o.partition
            && self.offset == o.offset
            && self.timestamp == o.timestamp
            && PyAnyMethods::eq(self.topic.bind(py).as_any(), o.topic.bind(py))?
            && PyAnyMethods::eq(self.key.bind(py), o.key.bind(py))?
            && PyAnyMethods::eq(self.value.bind(py), o.value.bind(py))?
            && PyAnyMethods::eq(self.headers.bind(py), o.headers.bind(py))?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cls = py.get_type::<StampedRecord>();
        let args = (
            self.topic.clone_ref(py),
            self.partition,
            self.offset,
            self.timestamp,
            self.key.clone_ref(py),
            self.value.clone_ref(py),
            self.headers.clone_ref(py),
        );
        (cls, args).into_pyobject(py).map(|t| t.into_any())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ConsumerRecord>()?;
    m.add_class::<StampedRecord>()?;
    Ok(())
}
