//! Reading raw records — `ConsumerRecord`s, `confluent_kafka.Message`s or look-alikes — for
//! `RecordQueue` and `process_next`, with fast reads of `Message` fields.
//!
//! `msg.key()` through the limited API (abi3, Python 3.10) means a lookup that allocates a
//! bound method, then a call with an argument tuple; calling the type's unbound method
//! descriptor with `PyObject_CallFunctionObjArgs` goes through vectorcall with no allocation.
//! These are the hot loops over consumer messages.

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use streamstate_core::timestamp::NOT_KNOWN;

use crate::records::{ConsumerRecord, CREATE_TIME, NO_TIMESTAMP_TYPE};

static MESSAGE_CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static MESSAGE_METHODS: PyOnceLock<MessageMethods> = PyOnceLock::new();

/// The method descriptors of `confluent_kafka.Message`.
pub struct MessageMethods {
    pub key: Py<PyAny>,
    pub value: Py<PyAny>,
    pub timestamp: Py<PyAny>,
    pub offset: Py<PyAny>,
    pub headers: Py<PyAny>,
    pub error: Py<PyAny>,
    pub topic: Py<PyAny>,
    pub partition: Py<PyAny>,
}

impl MessageMethods {
    fn new(cls: &Bound<'_, PyType>) -> PyResult<Self> {
        Ok(MessageMethods {
            key: cls.getattr("key")?.unbind(),
            value: cls.getattr("value")?.unbind(),
            timestamp: cls.getattr("timestamp")?.unbind(),
            offset: cls.getattr("offset")?.unbind(),
            headers: cls.getattr("headers")?.unbind(),
            error: cls.getattr("error")?.unbind(),
            topic: cls.getattr("topic")?.unbind(),
            partition: cls.getattr("partition")?.unbind(),
        })
    }

    /// `confluent_kafka.Message` and its descriptors, or `None` when confluent-kafka cannot be
    /// imported (records then come as `ConsumerRecord`s or plain objects).
    pub fn get(py: Python<'_>) -> PyResult<Option<(&Bound<'_, PyType>, &MessageMethods)>> {
        let Ok(cls) = MESSAGE_CLASS.import(py, "confluent_kafka", "Message") else {
            return Ok(None);
        };
        let methods = MESSAGE_METHODS.get_or_try_init(py, || MessageMethods::new(cls))?;
        Ok(Some((cls, methods)))
    }

    /// Calls one descriptor (`&self.key`, ...) on `msg`, which must be a `Message`.
    pub fn call<'py>(
        &self,
        py: Python<'py>,
        method: &Py<PyAny>,
        msg: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: both pointers are live objects held by the caller, the argument list is
        // NULL-terminated, and the result is a new reference (or NULL with an exception set).
        unsafe {
            let out = pyo3::ffi::PyObject_CallFunctionObjArgs(
                method.as_ptr(),
                msg.as_ptr(),
                std::ptr::null_mut::<pyo3::ffi::PyObject>(),
            );
            Bound::from_owned_ptr_or_err(py, out)
        }
    }
}

/// Kafka's timestamp-type id (Java's `TimestampType.id`: -1 none, 0 create time, 1 log-append
/// time) of confluent-kafka's number for it (0 none, 1 create time, 2 log-append time).
pub fn timestamp_type_id_from_confluent(kind: i32) -> i32 {
    kind - 1
}

/// `timestamp_type_id_from_confluent` for Python (`streamstate.records` uses it).
#[pyfunction(name = "timestamp_type_id_from_confluent")]
fn py_timestamp_type_id_from_confluent(kind: i32) -> i32 {
    timestamp_type_id_from_confluent(kind)
}

/// One raw record's fields as Python objects, read from whatever form it came in.
pub struct RawRecord<'py> {
    pub offset: i64,
    /// The record's timestamp; `NOT_KNOWN` when the record has none.
    pub timestamp: i64,
    /// Kafka's timestamp-type id.
    pub timestamp_type: i32,
    pub key: Bound<'py, PyAny>,
    pub value: Bound<'py, PyAny>,
    pub headers: Option<Bound<'py, PyAny>>,
}

/// Reads records that come as `ConsumerRecord`s, `confluent_kafka.Message`s (through their
/// method descriptors), or any objects with the same attributes: the one reader of
/// `RecordQueue.add_raw_records` and `process_next`.
pub struct RecordReader<'py> {
    py: Python<'py>,
    message: Option<(&'py Bound<'py, PyType>, &'py MessageMethods)>,
    /// What a record is called in errors ("record", "changelog record").
    what: &'static str,
}

impl<'py> RecordReader<'py> {
    pub fn new(py: Python<'py>, what: &'static str) -> PyResult<Self> {
        Ok(RecordReader {
            py,
            message: MessageMethods::get(py)?,
            what,
        })
    }

    /// The descriptors when `item` is exactly a `confluent_kafka.Message`.
    fn methods(&self, item: &Bound<'py, PyAny>) -> Option<&'py MessageMethods> {
        self.message
            .filter(|(cls, _)| item.is_exact_instance(cls))
            .map(|(_, m)| m)
    }

    /// A message that carries a consumer error instead of a record is a `ValueError`.
    fn check_error(&self, m: &MessageMethods, item: &Bound<'py, PyAny>) -> PyResult<()> {
        let error = m.call(self.py, &m.error, item)?;
        if error.is_none() {
            return Ok(());
        }
        Err(PyValueError::new_err(format!(
            "a consumer message carries an error, not a {}: {}",
            self.what,
            error.str()?
        )))
    }

    /// Every field of one record.
    pub fn record(&self, item: &Bound<'py, PyAny>) -> PyResult<RawRecord<'py>> {
        let py = self.py;
        if let Ok(rec) = item.cast::<ConsumerRecord>() {
            let r = rec.get();
            return Ok(RawRecord {
                offset: r.offset,
                timestamp: r.timestamp,
                timestamp_type: r.timestamp_type_id,
                key: r.key.bind(py).clone(),
                value: r.value.bind(py).clone(),
                headers: (!r.headers.is_none(py)).then(|| r.headers.bind(py).clone()),
            });
        }
        if let Some(m) = self.methods(item) {
            self.check_error(m, item)?;
            let (kind, timestamp): (i32, i64) = m.call(py, &m.timestamp, item)?.extract()?;
            let timestamp_type = timestamp_type_id_from_confluent(kind);
            let headers = m.call(py, &m.headers, item)?;
            return Ok(RawRecord {
                offset: m.call(py, &m.offset, item)?.extract()?,
                timestamp: if timestamp_type == NO_TIMESTAMP_TYPE {
                    NOT_KNOWN
                } else {
                    timestamp
                },
                timestamp_type,
                key: m.call(py, &m.key, item)?,
                value: m.call(py, &m.value, item)?,
                headers: (!headers.is_none()).then_some(headers),
            });
        }
        let headers = item
            .getattr(intern!(py, "headers"))
            .ok()
            .filter(|h| !h.is_none());
        Ok(RawRecord {
            offset: item.getattr(intern!(py, "offset"))?.extract()?,
            timestamp: item.getattr(intern!(py, "timestamp"))?.extract()?,
            timestamp_type: CREATE_TIME,
            key: item.getattr(intern!(py, "key"))?,
            value: item.getattr(intern!(py, "value"))?,
            headers,
        })
    }

    /// The offset alone (records past an end offset need nothing else).
    pub fn offset(&self, item: &Bound<'py, PyAny>) -> PyResult<i64> {
        if let Ok(rec) = item.cast::<ConsumerRecord>() {
            return Ok(rec.get().offset);
        }
        if let Some(m) = self.methods(item) {
            self.check_error(m, item)?;
            return m.call(self.py, &m.offset, item)?.extract();
        }
        item.getattr(intern!(self.py, "offset"))?.extract()
    }

    /// Key and value, not yet copied.
    pub fn key_value(
        &self,
        item: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let py = self.py;
        if let Ok(rec) = item.cast::<ConsumerRecord>() {
            let r = rec.get();
            return Ok((r.key.bind(py).clone(), r.value.bind(py).clone()));
        }
        if let Some(m) = self.methods(item) {
            return Ok((m.call(py, &m.key, item)?, m.call(py, &m.value, item)?));
        }
        Ok((
            item.getattr(intern!(py, "key"))?,
            item.getattr(intern!(py, "value"))?,
        ))
    }

    /// Topic and partition, each `None` where it cannot be read.
    pub fn topic_partition(&self, item: &Bound<'py, PyAny>) -> (Option<String>, Option<i32>) {
        let py = self.py;
        if let Ok(rec) = item.cast::<ConsumerRecord>() {
            let r = rec.get();
            return (r.topic.bind(py).extract().ok(), Some(r.partition));
        }
        let (topic, partition) = match self.methods(item) {
            Some(m) => (
                m.call(py, &m.topic, item).ok(),
                m.call(py, &m.partition, item).ok(),
            ),
            None => (
                item.getattr(intern!(py, "topic")).ok(),
                item.getattr(intern!(py, "partition")).ok(),
            ),
        };
        (
            topic.and_then(|t| t.extract().ok()),
            partition.and_then(|p| p.extract().ok()),
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(py_timestamp_type_id_from_confluent, m)?)?;
    Ok(())
}
