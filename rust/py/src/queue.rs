//! `RecordQueue` for Python: the core's queue of Python objects, filled through the core's
//! admission step.
//!
//! `add_raw_records` crosses into Rust once per batch. Records (`ConsumerRecord`s, Messages or
//! look-alikes) are read and admitted one by one with the GIL held; an Arrow batch whose
//! components are all built in is admitted with the GIL released (the core's
//! [`BuiltIn::admit_arrow`]), and otherwise goes through the record path row by row.
//!
//! [`BuiltIn::admit_arrow`]: streamstate_core::admission::BuiltIn::admit_arrow

use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use pyo3_arrow::PyRecordBatch;
use streamstate_core::admission::{drop_warning, Admitter};
use streamstate_core::arrow_decode::{timestamps_ms, BinaryColumn, KafkaColumns};
use streamstate_core::record_queue::{DropReason, Dropped, RecordQueue, Stamped};
use streamstate_core::serde::Deserializer;

use crate::admission::{Component, PyComponents, QueueComponents};
use crate::convert::{value_to_py_cached, KeyCache};
use crate::errors::{guard, to_py};
use crate::message::{RawRecord, RecordReader};
use crate::records::{StampedRecord, CREATE_TIME};

/// What the queue keeps per record until it is polled.
pub struct Held {
    key: Py<PyAny>,
    value: Py<PyAny>,
    headers: Option<Py<PyAny>>,
}

/// The `StampedRecord` of a queued record of `topic` partition `partition`.
pub fn stamped_record(
    py: Python<'_>,
    topic: &Py<PyString>,
    partition: i32,
    r: &Stamped<Held>,
) -> PyResult<Py<StampedRecord>> {
    Py::new(
        py,
        StampedRecord {
            topic: topic.clone_ref(py),
            partition,
            offset: r.offset,
            timestamp: r.timestamp,
            key: r.record.key.clone_ref(py),
            value: r.record.value.clone_ref(py),
            headers: r
                .record
                .headers
                .as_ref()
                .map_or_else(|| py.None(), |h| h.clone_ref(py)),
        },
    )
}

/// Kafka Streams' per-partition FIFO of stamped records (see `streamstate.RecordQueue`).
#[pyclass(module = "streamstate._core", name = "RecordQueue")]
pub struct PyRecordQueue {
    topic: String,
    pub(crate) topic_py: Py<PyString>,
    pub(crate) partition: i32,
    components: QueueComponents,
    logger: Py<PyAny>,
    keys: Mutex<KeyCache>,
    pub(crate) queue: RecordQueue<Held>,
}

impl PyRecordQueue {
    fn warn(&self, py: Python<'_>, message: &str) {
        // A failing logging call must not lose the record's processing.
        let _ = self
            .logger
            .bind(py)
            .call_method1(intern!(py, "warning"), (message,));
    }

    fn warn_dropped(&self, py: Python<'_>, dropped: &Dropped) {
        let extractor = self.components.extractor_name(py);
        self.warn(
            py,
            &drop_warning(&self.topic, self.partition, dropped, &extractor),
        );
    }

    fn add_list<'py>(&mut self, py: Python<'py>, records: &Bound<'py, PyAny>) -> PyResult<usize> {
        let reader = RecordReader::new(py, "record")?;
        // Records are read as they are admitted: no intermediate copy of a million-record batch.
        let read = |item: Bound<'py, PyAny>| reader.record(&item);
        if let Ok(list) = records.cast::<PyList>() {
            self.admit_all(py, list.iter().map(read))
        } else if let Ok(tuple) = records.cast::<PyTuple>() {
            self.admit_all(py, tuple.iter().map(read))
        } else {
            let items = records.try_iter()?;
            self.admit_all(py, items.map(|item| item.and_then(read)))
        }
    }

    fn admit_all<'py>(
        &mut self,
        py: Python<'py>,
        raws: impl IntoIterator<Item = PyResult<RawRecord<'py>>>,
    ) -> PyResult<usize> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let mut admitter = Admitter::new(
            &self.topic,
            self.partition,
            PyComponents {
                py,
                parts: &self.components,
                topic: &self.topic_py,
                partition: self.partition,
                keys: &mut keys,
            },
        );
        let mut dropped = Vec::new();
        let result = self.queue.add_with(
            raws,
            |raw, partition_time| {
                let raw = raw?;
                let headers = raw.headers.as_ref().map(|h| h.clone().unbind());
                admitter.admit(&raw, raw.offset, partition_time, |key, (value, _)| Held {
                    key,
                    value,
                    headers,
                })
            },
            |d| dropped.push(d),
        );
        drop(keys);
        for d in &dropped {
            self.warn_dropped(py, d);
        }
        result
    }

    fn add_arrow(&mut self, py: Python<'_>, batch: RecordBatch) -> PyResult<usize> {
        self.check_partition(&batch)?;
        let Some(built_in) = self.components.built_in() else {
            return self.add_arrow_slow(py, &batch);
        };
        let batch = Arc::new(batch);
        let shared = Arc::clone(&batch);
        let (topic, partition) = (self.topic.clone(), self.partition);
        let partition_time = self.queue.partition_time();
        let mut out =
            py.detach(move || built_in.admit_arrow(&shared, &topic, partition, partition_time));
        // Everything admitted before a failure is kept, as with the other input forms.
        let raw_values = matches!(
            self.components.value,
            Component::Native(Deserializer::Bytes)
        );
        let values = BinaryColumn::new(
            batch
                .column_by_name("value")
                .expect("checked by admit_arrow")
                .as_ref(),
        )
        .map_err(|e| to_py(py, e))?;
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(Stamped {
            offset,
            timestamp,
            record: (row, k, v),
        }) = out.admitted.poll()
        {
            let key = value_to_py_cached(py, &k, &mut keys)?.unbind();
            let value = if raw_values {
                match values.get(row) {
                    Some(b) => PyBytes::new(py, b).into_any().unbind(),
                    None => py.None(),
                }
            } else {
                value_to_py_cached(py, &v, &mut keys)?.unbind()
            };
            self.queue.push(
                offset,
                timestamp,
                Held {
                    key,
                    value,
                    headers: None,
                },
            );
        }
        drop(keys);
        self.queue.add_drops(out.admitted.dropped());
        for d in &out.dropped {
            self.warn_dropped(py, d);
        }
        match out.error {
            None => Ok(self.queue.len()),
            Some(e) => Err(to_py(py, e)),
        }
    }

    /// Arrow input with a Python component: rows become Python objects, then the record path.
    fn add_arrow_slow(&mut self, py: Python<'_>, batch: &RecordBatch) -> PyResult<usize> {
        let cols = KafkaColumns::from_batch(batch).map_err(|e| to_py(py, e))?;
        let keys = BinaryColumn::new(cols.key).map_err(|e| to_py(py, e))?;
        let values = BinaryColumn::new(cols.value).map_err(|e| to_py(py, e))?;
        let timestamps = timestamps_ms(cols.timestamp).map_err(|e| to_py(py, e))?;
        let bytes_or_none = |b: Option<&[u8]>| match b {
            Some(b) => PyBytes::new(py, b).into_any(),
            None => py.None().into_bound(py),
        };
        let raws = (0..batch.num_rows()).map(|row| {
            Ok(RawRecord {
                offset: cols.offset.value(row),
                timestamp: timestamps.value(row),
                timestamp_type: CREATE_TIME,
                key: bytes_or_none(keys.get(row)),
                value: bytes_or_none(values.get(row)),
                headers: None,
            })
        });
        self.admit_all(py, raws)
    }

    fn check_partition(&self, batch: &RecordBatch) -> PyResult<()> {
        if let Some(col) = batch.column_by_name("partition") {
            if let Some(parts) = col.as_any().downcast_ref::<arrow_array::Int32Array>() {
                if let Some(other) = parts.iter().flatten().find(|p| *p != self.partition) {
                    return Err(PyValueError::new_err(format!(
                        "the batch holds records of partition {other}, but this queue is for \
                         topic '{}' partition {}",
                        self.topic, self.partition
                    )));
                }
            }
        }
        Ok(())
    }

    fn stamped(&self, py: Python<'_>, r: &Stamped<Held>) -> PyResult<Py<StampedRecord>> {
        stamped_record(py, &self.topic_py, self.partition, r)
    }

    fn poll_one(&mut self, py: Python<'_>) -> PyResult<Option<Py<StampedRecord>>> {
        match self.queue.poll() {
            Some(r) => Ok(Some(self.stamped(py, &r)?)),
            None => Ok(None),
        }
    }
}

#[pymethods]
impl PyRecordQueue {
    #[new]
    #[pyo3(signature = (topic, partition, *, key_deserializer=None, value_deserializer=None, timestamp_extractor=None, deserialization_exception_handler=None))]
    fn new(
        py: Python<'_>,
        topic: Bound<'_, PyString>,
        partition: i32,
        key_deserializer: Option<Bound<'_, PyAny>>,
        value_deserializer: Option<Bound<'_, PyAny>>,
        timestamp_extractor: Option<Bound<'_, PyAny>>,
        deserialization_exception_handler: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let components = QueueComponents::new(
            key_deserializer.as_ref(),
            value_deserializer.as_ref(),
            timestamp_extractor.as_ref(),
            deserialization_exception_handler.as_ref(),
        )?;
        let logger = py
            .import("logging")?
            .call_method1("getLogger", ("streamstate.record_queue",))?
            .unbind();
        Ok(PyRecordQueue {
            topic: topic.to_str()?.to_owned(),
            topic_py: topic.unbind(),
            partition,
            components,
            logger,
            keys: Mutex::new(KeyCache::default()),
            queue: RecordQueue::new(),
        })
    }

    /// The topic this queue buffers.
    #[getter]
    fn topic(&self, py: Python<'_>) -> Py<PyString> {
        self.topic_py.clone_ref(py)
    }

    /// The partition this queue buffers.
    #[getter]
    fn partition(&self) -> i32 {
        self.partition
    }

    /// Deserializes, stamps and queues a batch eagerly, in order; returns the queue's size.
    pub(crate) fn add_raw_records(
        &mut self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        guard(py, || {
            if records.hasattr(intern!(py, "__arrow_c_array__"))? {
                let batch: PyRecordBatch = records.extract()?;
                return self.add_arrow(py, batch.into_inner());
            }
            if records.hasattr(intern!(py, "__arrow_c_stream__"))?
                && !records.is_instance_of::<PyList>()
            {
                let table: pyo3_arrow::PyTable = records.extract()?;
                let (batches, _schema) = table.into_inner();
                let mut size = self.queue.len();
                for batch in batches {
                    size = self.add_arrow(py, batch)?;
                }
                return Ok(size);
            }
            self.add_list(py, records)
        })
    }

    /// The next record in offset order, or `None` when empty.
    fn poll(&mut self, py: Python<'_>) -> PyResult<Option<Py<StampedRecord>>> {
        guard(py, || self.poll_one(py))
    }

    /// Up to `max_records` records at once (all when `None`): fewer boundary crossings.
    #[pyo3(signature = (max_records=None))]
    fn poll_batch(&mut self, py: Python<'_>, max_records: Option<usize>) -> PyResult<Py<PyList>> {
        guard(py, || {
            let n = max_records.unwrap_or(usize::MAX).min(self.queue.len());
            let list = PyList::empty(py);
            for _ in 0..n {
                if let Some(r) = self.poll_one(py)? {
                    list.append(r)?;
                }
            }
            Ok(list.unbind())
        })
    }

    /// The record `poll()` would return next, without removing it.
    #[getter]
    fn head_record(&self, py: Python<'_>) -> PyResult<Option<Py<StampedRecord>>> {
        self.queue.head().map(|r| self.stamped(py, r)).transpose()
    }

    /// Timestamp of the head record; `NOT_KNOWN` (-1) when empty.
    #[getter]
    fn head_timestamp(&self) -> i64 {
        self.queue.head_timestamp()
    }

    /// Offset of the head record, `None` when empty.
    #[getter]
    fn head_offset(&self) -> Option<i64> {
        self.queue.head_offset()
    }

    /// The highest timestamp admitted so far; `NOT_KNOWN` (-1) before any.
    #[getter]
    fn partition_time(&self) -> i64 {
        self.queue.partition_time()
    }

    /// Sets partition time (as restored from commit metadata), unconditionally.
    fn set_partition_time(&mut self, t: i64) {
        self.queue.set_partition_time(t);
    }

    fn size(&self) -> usize {
        self.queue.len()
    }

    fn __len__(&self) -> usize {
        self.queue.len()
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Empties the queue and resets partition time to `NOT_KNOWN`.
    fn clear(&mut self) {
        self.queue.clear();
    }

    /// Records dropped so far, by reason.
    #[getter]
    fn dropped_records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = self.queue.dropped();
        let out = PyDict::new(py);
        out.set_item(
            DropReason::DeserializationError.as_str(),
            d.deserialization_error,
        )?;
        out.set_item(DropReason::NegativeTimestamp.as_str(), d.negative_timestamp)?;
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "RecordQueue(topic={:?}, partition={}, size={}, partition_time={})",
            self.topic,
            self.partition,
            self.queue.len(),
            self.queue.partition_time()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRecordQueue>()?;
    Ok(())
}
