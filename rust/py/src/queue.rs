//! `RecordQueue` and `PartitionGroup` for Python, over the core's admission rules.
//!
//! `add_raw_records` crosses into Rust once per batch. Built-in serdes and extractors (the
//! classes of `streamstate.serde` / `streamstate.timestamps`, which carry a Rust `_native`
//! object) run without calling back into Python; any other object works through its Python
//! method (the slow path) with the same semantics. An Arrow batch handled entirely by built-in
//! components is decoded with the GIL released.

use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};
use pyo3_arrow::PyRecordBatch;
use streamstate_core::arrow_decode::{timestamps_ms, BinaryColumn, KafkaColumns};
use streamstate_core::error::{CoreError, ErrorKind, Location};
use streamstate_core::partition_group::PartitionGroup as CorePartitionGroup;
use streamstate_core::record_queue::{Admission, DropReason, Dropped, RecordQueue, Stamped};
use streamstate_core::serde::Deserializer;
use streamstate_core::timestamp::{ExtractInput, TimestampExtractor, NOT_KNOWN};
use streamstate_core::value::Value;

use crate::convert::{value_to_py_cached, KeyCache};
use crate::errors::{guard, streams_error, to_py};
use crate::message::MessageMethods;
use crate::records::{ConsumerRecord, StampedRecord, CREATE_TIME};
use crate::serde::{NativeDeserializer, NativeExtractor};

static STREAMS_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// A serde or extractor: the core's own, or a Python object whose method is called.
enum Component<T> {
    Native(T),
    Python(Py<PyAny>),
}

/// A key or value deserializer: the core's, or a Python object's `deserialize`.
type Deser = Component<Deserializer>;

/// A timestamp extractor: the core's, or a Python object's `extract`.
type Extract = Component<TimestampExtractor>;

/// What to do with a record that fails to deserialize.
enum Handler {
    Fail,
    Continue,
    Python(Py<PyAny>),
}

/// What the queue keeps per record until it is polled.
struct Held {
    key: Py<PyAny>,
    value: Py<PyAny>,
    headers: Option<Py<PyAny>>,
}

/// One raw record, whichever form it came in.
struct Raw<'py> {
    offset: i64,
    timestamp: i64,
    timestamp_type: i32,
    key: Bound<'py, PyAny>,
    value: Bound<'py, PyAny>,
    headers: Option<Bound<'py, PyAny>>,
}

/// The core object inside a built-in component (its `_native` attribute is an `N`), or else
/// the Python object itself, which must have the method the queue will call.
fn component_from<N, T>(
    obj: &Bound<'_, PyAny>,
    core: impl Fn(&N) -> T,
    what: &str,
    method: &str,
    params: &str,
) -> PyResult<Component<T>>
where
    N: pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync,
{
    let py = obj.py();
    if let Ok(native) = obj.getattr(intern!(py, "_native")) {
        if let Ok(n) = native.cast::<N>() {
            return Ok(Component::Native(core(n.get())));
        }
    }
    if !obj.hasattr(method)? {
        return Err(PyTypeError::new_err(format!(
            "a {what} needs a {method}({params}) method; got {}",
            obj.repr()?
        )));
    }
    Ok(Component::Python(obj.clone().unbind()))
}

fn deser_from(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Deser> {
    match obj.filter(|o| !o.is_none()) {
        None => Ok(Deser::Native(Deserializer::Bytes)),
        Some(obj) => component_from(
            obj,
            |n: &NativeDeserializer| n.inner.clone(),
            "deserializer",
            "deserialize",
            "topic, data",
        ),
    }
}

fn extract_from(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Extract> {
    match obj.filter(|o| !o.is_none()) {
        None => Ok(Extract::Native(TimestampExtractor::RecordTimestamp(
            streamstate_core::timestamp::OnInvalid::Fail,
        ))),
        Some(obj) => component_from(
            obj,
            |n: &NativeExtractor| n.inner.clone(),
            "timestamp extractor",
            "extract",
            "record, partition_time",
        ),
    }
}

fn handler_from(obj: &Bound<'_, PyAny>) -> PyResult<Handler> {
    if let Ok(s) = obj.cast::<PyString>() {
        return match s.to_str()? {
            "fail" => Ok(Handler::Fail),
            "continue" => Ok(Handler::Continue),
            other => Err(PyValueError::new_err(format!(
                "deserialization_exception_handler must be 'fail', 'continue' or a callable, \
                 got {other:?}"
            ))),
        };
    }
    if obj.is_callable() {
        return Ok(Handler::Python(obj.clone().unbind()));
    }
    Err(PyTypeError::new_err(
        "deserialization_exception_handler must be 'fail', 'continue' or a callable",
    ))
}

fn describe_deser(d: &Deser, py: Python<'_>) -> String {
    match d {
        Deser::Native(n) => n.name().to_owned(),
        Deser::Python(o) => o
            .bind(py)
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into()),
    }
}

/// Everything a queue needs to admit records; kept apart from the FIFO itself so admission
/// (which reads this) and the FIFO (which it writes) can be borrowed at once.
struct Ctx {
    topic: String,
    topic_py: Py<PyString>,
    partition: i32,
    key: Deser,
    value: Deser,
    extractor: Extract,
    handler: Handler,
    logger: Py<PyAny>,
    keys: Mutex<KeyCache>,
}

/// Kafka Streams' per-partition FIFO of stamped records (see `streamstate.RecordQueue`).
#[pyclass(module = "streamstate._core", name = "RecordQueue")]
pub struct PyRecordQueue {
    ctx: Ctx,
    queue: RecordQueue<Held>,
}

impl Ctx {
    fn location(&self, offset: i64) -> Location {
        Location::record(&self.topic, self.partition, offset)
    }

    /// Deserializes one key or value. Returns the Python object and, when asked, the decoded
    /// `Value` (for a native extractor that reads the value).
    fn decode<'py>(
        &self,
        py: Python<'py>,
        which: &Deser,
        raw: &Bound<'py, PyAny>,
        keep_value: bool,
        keys: &mut KeyCache,
    ) -> Result<(Py<PyAny>, Option<Value>), String> {
        match which {
            Deser::Native(Deserializer::Bytes) => {
                // Bytes stay the very object the client handed over: no copy.
                if raw.is_none() || raw.cast::<PyBytes>().is_ok() {
                    Ok((raw.clone().unbind(), None))
                } else {
                    let copied: Vec<u8> = raw
                        .extract()
                        .map_err(|_| format!("expected bytes, got {}", type_name(raw)))?;
                    Ok((PyBytes::new(py, &copied).into_any().unbind(), None))
                }
            }
            Deser::Native(de) => {
                let decoded = if raw.is_none() {
                    de.deserialize(None)
                } else if let Ok(b) = raw.cast::<PyBytes>() {
                    de.deserialize(Some(b.as_bytes()))
                } else {
                    let copied: Vec<u8> = raw
                        .extract()
                        .map_err(|_| format!("expected bytes, got {}", type_name(raw)))?;
                    de.deserialize(Some(&copied))
                }
                .map_err(|e| format!("{}: {}", de.name(), e))?;
                let obj = value_to_py_cached(py, &decoded, keys).map_err(|e| e.to_string())?;
                Ok((obj.unbind(), keep_value.then_some(decoded)))
            }
            Deser::Python(obj) => {
                let out = obj
                    .bind(py)
                    .call_method1(intern!(py, "deserialize"), (self.topic_py.bind(py), raw))
                    .map_err(|e| {
                        format!(
                            "{}: {}",
                            describe_deser(which, py),
                            e.value(py).str().map(|s| s.to_string()).unwrap_or_default()
                        )
                    })?;
                Ok((out.unbind(), None))
            }
        }
    }

    /// Deserialization failed: ask the handler. `Ok(())` means drop the record.
    fn on_deserialization_error(
        &self,
        py: Python<'_>,
        raw: &Raw<'_>,
        what: &str,
        reason: &str,
    ) -> PyResult<()> {
        let err = streams_error(
            py,
            "DeserializationError",
            &format!("could not deserialize the {what}: {reason}"),
            &self.location(raw.offset),
        );
        let decision = match &self.handler {
            Handler::Fail => return Err(err),
            Handler::Continue => "continue".to_owned(),
            Handler::Python(handler) => {
                let record = self.consumer_record(py, raw)?;
                let answer = handler
                    .bind(py)
                    .call1((record, err.value(py)))
                    .map_err(|e| {
                        let wrapped = streams_error(
                            py,
                            "StreamsError",
                            &format!("the deserialization exception handler failed: {}", e),
                            &self.location(raw.offset),
                        );
                        wrapped.set_cause(py, Some(e));
                        wrapped
                    })?;
                let answer = answer
                    .extract::<String>()
                    .or_else(|_| answer.getattr("value").and_then(|v| v.extract::<String>()))
                    .unwrap_or_default();
                answer.to_lowercase()
            }
        };
        match decision.as_str() {
            "continue" => {
                self.warn(
                    py,
                    &format!(
                        "Skipping record due to deserialization error. topic=[{}] partition=[{}] \
                         offset=[{}]: could not deserialize the {what}: {reason}",
                        self.topic, self.partition, raw.offset
                    ),
                );
                Ok(())
            }
            "fail" => Err(err),
            other => Err(streams_error(
                py,
                "StreamsError",
                &format!(
                    "the deserialization exception handler returned {other:?}; expected \
                     'continue' or 'fail'"
                ),
                &self.location(raw.offset),
            )),
        }
    }

    fn consumer_record(&self, py: Python<'_>, raw: &Raw<'_>) -> PyResult<Py<ConsumerRecord>> {
        Py::new(
            py,
            ConsumerRecord {
                topic: self.topic_py.clone_ref(py),
                partition: self.partition,
                offset: raw.offset,
                timestamp: raw.timestamp,
                key: raw.key.clone().unbind(),
                value: raw.value.clone().unbind(),
                headers: raw
                    .headers
                    .as_ref()
                    .map_or_else(|| py.None(), |h| h.clone().unbind()),
                timestamp_type_id: raw.timestamp_type,
            },
        )
    }

    fn warn(&self, py: Python<'_>, message: &str) {
        // A failing logging call must not lose the record's processing.
        let _ = self
            .logger
            .bind(py)
            .call_method1(intern!(py, "warning"), (message,));
    }

    /// Deserializes, stamps and decides for one raw record.
    fn admit(
        &self,
        py: Python<'_>,
        raw: Raw<'_>,
        partition_time: i64,
        keys: &mut KeyCache,
    ) -> PyResult<Admission<Held>> {
        let (key, _) = match self.decode(py, &self.key, &raw.key, false, keys) {
            Ok(k) => k,
            Err(reason) => {
                self.on_deserialization_error(py, &raw, "key", &reason)?;
                return Ok(Admission::Dropped {
                    offset: raw.offset,
                    reason: DropReason::DeserializationError,
                });
            }
        };
        let keep_value = matches!(
            self.extractor,
            Extract::Native(TimestampExtractor::JsonField { .. })
        );
        let (value, decoded) = match self.decode(py, &self.value, &raw.value, keep_value, keys) {
            Ok(v) => v,
            Err(reason) => {
                self.on_deserialization_error(py, &raw, "value", &reason)?;
                return Ok(Admission::Dropped {
                    offset: raw.offset,
                    reason: DropReason::DeserializationError,
                });
            }
        };
        let timestamp = match &self.extractor {
            Extract::Native(extractor) => {
                let raw_bytes = raw.value.cast::<PyBytes>().ok();
                let placeholder = if raw_bytes.is_some() {
                    Value::Bytes(Vec::new())
                } else {
                    Value::Null
                };
                let input = ExtractInput {
                    record_timestamp: raw.timestamp,
                    value: decoded.as_ref().unwrap_or(&placeholder),
                    raw_value: raw_bytes.as_ref().map(|b| b.as_bytes()),
                };
                extractor.extract(&input, partition_time).map_err(|e| {
                    to_py(
                        py,
                        CoreError::new(ErrorKind::InvalidTimestamp, e.reason).at_record(
                            &self.topic,
                            self.partition,
                            raw.offset,
                        ),
                    )
                })?
            }
            Extract::Python(extractor) => {
                let record = Py::new(
                    py,
                    ConsumerRecord {
                        topic: self.topic_py.clone_ref(py),
                        partition: self.partition,
                        offset: raw.offset,
                        timestamp: raw.timestamp,
                        key: key.clone_ref(py),
                        value: value.clone_ref(py),
                        headers: raw
                            .headers
                            .as_ref()
                            .map_or_else(|| py.None(), |h| h.clone().unbind()),
                        timestamp_type_id: raw.timestamp_type,
                    },
                )?;
                let out = extractor
                    .bind(py)
                    .call_method1(intern!(py, "extract"), (record, partition_time))
                    .map_err(|e| self.wrap_user_error(py, e, raw.offset))?;
                out.extract::<i64>().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "the timestamp extractor returned {}, not an int (topic '{}', \
                         partition {}, offset {})",
                        out.repr().map(|r| r.to_string()).unwrap_or_default(),
                        self.topic,
                        self.partition,
                        raw.offset
                    ))
                })?
            }
        };
        Ok(Admission::Stamped {
            offset: raw.offset,
            timestamp,
            record: Held {
                key,
                value,
                headers: raw.headers.map(Bound::unbind),
            },
        })
    }

    /// A user extractor's exception: `StreamsError`s pass unchanged (as in Kafka); anything
    /// else is wrapped so the message names the record.
    fn wrap_user_error(&self, py: Python<'_>, e: PyErr, offset: i64) -> PyErr {
        let streams_error_cls = STREAMS_ERROR.import(py, "streamstate.errors", "StreamsError");
        if let Ok(cls) = streams_error_cls {
            if e.is_instance(py, cls) {
                return e;
            }
        }
        let wrapped = streams_error(
            py,
            "StreamsError",
            &format!("fatal user code error in the timestamp extractor: {}", e),
            &self.location(offset),
        );
        wrapped.set_cause(py, Some(e));
        wrapped
    }

    fn log_drop(&self, py: Python<'_>, d: Dropped) {
        if d.reason == DropReason::NegativeTimestamp {
            self.warn(
                py,
                &format!(
                    "Skipping record due to negative extracted timestamp. topic=[{}] \
                     partition=[{}] offset=[{}] extractedTimestamp=[{}] extractor=[{}]",
                    self.topic,
                    self.partition,
                    d.offset,
                    d.timestamp.unwrap_or(NOT_KNOWN),
                    self.extractor_name(py)
                ),
            );
        }
    }

    fn extractor_name(&self, py: Python<'_>) -> String {
        match &self.extractor {
            Extract::Native(e) => format!("{e:?}"),
            Extract::Python(o) => o
                .bind(py)
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default(),
        }
    }
}

/// `topic-partition`, as Kafka prints a TopicPartition, for any object with those attributes.
fn describe_partition(tp: &Bound<'_, PyAny>) -> String {
    let topic = tp.getattr("topic").and_then(|t| t.extract::<String>());
    let partition = tp.getattr("partition").and_then(|p| p.extract::<i64>());
    match (topic, partition) {
        (Ok(t), Ok(p)) => format!("{t}-{p}"),
        _ => tp
            .str()
            .map(|s| s.to_string())
            .unwrap_or_else(|_| "?".to_owned()),
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// Reads one raw record from a `ConsumerRecord`, a `confluent_kafka.Message`, or any object
/// with the same attributes.
fn read_raw<'py>(
    py: Python<'py>,
    item: &Bound<'py, PyAny>,
    message_cls: Option<&Bound<'py, PyType>>,
    message_methods: Option<&MessageMethods>,
) -> PyResult<Raw<'py>> {
    if let Ok(rec) = item.cast::<ConsumerRecord>() {
        let r = rec.get();
        return Ok(Raw {
            offset: r.offset,
            timestamp: r.timestamp,
            timestamp_type: r.timestamp_type_id,
            key: r.key.bind(py).clone(),
            value: r.value.bind(py).clone(),
            headers: (!r.headers.is_none(py)).then(|| r.headers.bind(py).clone()),
        });
    }
    if let Some(methods) = message_methods {
        if message_cls.is_some_and(|cls| item.is_exact_instance(cls)) {
            let error = methods.call(py, &methods.error, item)?;
            if !error.is_none() {
                return Err(PyValueError::new_err(format!(
                    "a consumer message carries an error, not a record: {}",
                    error.str()?
                )));
            }
            let ts = methods.call(py, &methods.timestamp, item)?;
            let (kind, timestamp): (i32, i64) = ts.extract()?;
            let headers = methods.call(py, &methods.headers, item)?;
            return Ok(Raw {
                offset: methods.call(py, &methods.offset, item)?.extract()?,
                // confluent-kafka numbers timestamp types 0/1/2; Kafka (and we) use -1/0/1.
                timestamp: if kind == 0 { NOT_KNOWN } else { timestamp },
                timestamp_type: kind - 1,
                key: methods.call(py, &methods.key, item)?,
                value: methods.call(py, &methods.value, item)?,
                headers: (!headers.is_none()).then_some(headers),
            });
        }
    }
    let headers = item
        .getattr(intern!(py, "headers"))
        .ok()
        .filter(|h| !h.is_none());
    Ok(Raw {
        offset: item.getattr(intern!(py, "offset"))?.extract()?,
        timestamp: item.getattr(intern!(py, "timestamp"))?.extract()?,
        timestamp_type: CREATE_TIME,
        key: item.getattr(intern!(py, "key"))?,
        value: item.getattr(intern!(py, "value"))?,
        headers,
    })
}

/// Decodes and stamps an Arrow batch with built-in components only, off the GIL. Returns the
/// admitted rows (row index, key, value) and the drops, and the error that stopped it, if any.
#[allow(clippy::type_complexity)]
fn admit_arrow_native(
    batch: &RecordBatch,
    key: &Deserializer,
    value: &Deserializer,
    extractor: &TimestampExtractor,
    continue_on_error: bool,
    partition_time: i64,
) -> (
    RecordQueue<(usize, Value, Value)>,
    Vec<Dropped>,
    Option<CoreError>,
) {
    let mut scratch = RecordQueue::new();
    scratch.set_partition_time(partition_time);
    let mut drops = Vec::new();
    let cols = match KafkaColumns::from_batch(batch) {
        Ok(c) => c,
        Err(e) => return (scratch, drops, Some(e)),
    };
    let (keys, values, timestamps) = match (
        BinaryColumn::new(cols.key),
        BinaryColumn::new(cols.value),
        timestamps_ms(cols.timestamp),
    ) {
        (Ok(k), Ok(v), Ok(t)) => (k, v, t),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return (scratch, drops, Some(e)),
    };
    let keep_value = matches!(extractor, TimestampExtractor::JsonField { .. });
    let result = scratch.add_with(
        0..batch.num_rows(),
        |row, pt| {
            let offset = cols.offset.value(row);
            let fail = |what: &str, e: &dyn std::fmt::Display, de: &Deserializer| {
                CoreError::new(
                    ErrorKind::Deserialization,
                    format!("could not deserialize the {what}: {}: {e}", de.name()),
                )
                .at_record(&cols.topic_at(row), cols.partition.value(row), offset)
            };
            let raw_value = values.get(row);
            let decoded_key = match key.deserialize(keys.get(row)) {
                Ok(k) => k,
                Err(e) if continue_on_error => {
                    let _ = e;
                    return Ok(Admission::Dropped {
                        offset,
                        reason: DropReason::DeserializationError,
                    });
                }
                Err(e) => return Err(fail("key", &e, key)),
            };
            let decoded_value = match value {
                // Kept raw: the GIL side copies the bytes once into a Python object.
                Deserializer::Bytes => Value::Null,
                _ => match value.deserialize(raw_value) {
                    Ok(v) => v,
                    Err(_) if continue_on_error => {
                        return Ok(Admission::Dropped {
                            offset,
                            reason: DropReason::DeserializationError,
                        })
                    }
                    Err(e) => return Err(fail("value", &e, value)),
                },
            };
            let placeholder = if raw_value.is_some() {
                Value::Bytes(Vec::new())
            } else {
                Value::Null
            };
            let input = ExtractInput {
                record_timestamp: timestamps.value(row),
                value: if keep_value && !matches!(value, Deserializer::Bytes) {
                    &decoded_value
                } else {
                    &placeholder
                },
                raw_value,
            };
            let timestamp = extractor.extract(&input, pt).map_err(|e| {
                CoreError::new(ErrorKind::InvalidTimestamp, e.reason).at_record(
                    &cols.topic_at(row),
                    cols.partition.value(row),
                    offset,
                )
            })?;
            Ok(Admission::Stamped {
                offset,
                timestamp,
                record: (row, decoded_key, decoded_value),
            })
        },
        |d| drops.push(d),
    );
    (scratch, drops, result.err())
}

impl PyRecordQueue {
    fn add_list<'py>(&mut self, py: Python<'py>, records: &Bound<'py, PyAny>) -> PyResult<usize> {
        let message = MessageMethods::get(py)?;
        let (message_cls, message_methods) = (message.map(|m| m.0), message.map(|m| m.1));
        // Records are read as they are admitted: no intermediate copy of a million-record batch.
        let read = |item: Bound<'py, PyAny>| read_raw(py, &item, message_cls, message_methods);
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
        raws: impl IntoIterator<Item = PyResult<Raw<'py>>>,
    ) -> PyResult<usize> {
        let ctx = &self.ctx;
        let mut drops = Vec::new();
        let mut keys = ctx
            .keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let result = self.queue.add_with(
            raws,
            |raw, pt| ctx.admit(py, raw?, pt, &mut keys),
            |d| drops.push(d),
        );
        drop(keys);
        for d in drops {
            ctx.log_drop(py, d);
        }
        result
    }

    fn add_arrow(&mut self, py: Python<'_>, batch: RecordBatch) -> PyResult<usize> {
        self.check_partition(&batch)?;
        let native = match (
            &self.ctx.key,
            &self.ctx.value,
            &self.ctx.extractor,
            &self.ctx.handler,
        ) {
            (Deser::Native(k), Deser::Native(v), Extract::Native(e), Handler::Fail) => {
                Some((k.clone(), v.clone(), e.clone(), false))
            }
            (Deser::Native(k), Deser::Native(v), Extract::Native(e), Handler::Continue) => {
                Some((k.clone(), v.clone(), e.clone(), true))
            }
            _ => None,
        };
        let Some((key, value, extractor, continue_on_error)) = native else {
            return self.add_arrow_slow(py, &batch);
        };
        let pt = self.queue.partition_time();
        let batch = Arc::new(batch);
        let shared = Arc::clone(&batch);
        let (mut scratch, drops, stop) = py.detach(move || {
            admit_arrow_native(&shared, &key, &value, &extractor, continue_on_error, pt)
        });
        // Everything admitted before a failure is kept, as with the other input forms.
        let values = BinaryColumn::new(
            batch
                .column_by_name("value")
                .expect("checked by admit_arrow_native")
                .as_ref(),
        )
        .map_err(|e| to_py(py, e))?;
        let mut keys = self
            .ctx
            .keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        while let Some(Stamped {
            offset,
            timestamp,
            record: (row, k, v),
        }) = scratch.poll()
        {
            let key_obj = value_to_py_cached(py, &k, &mut keys)?.unbind();
            let value_obj = match &self.ctx.value {
                Deser::Native(Deserializer::Bytes) => match values.get(row) {
                    Some(b) => PyBytes::new(py, b).into_any().unbind(),
                    None => py.None(),
                },
                _ => value_to_py_cached(py, &v, &mut keys)?.unbind(),
            };
            self.queue.push(
                offset,
                timestamp,
                Held {
                    key: key_obj,
                    value: value_obj,
                    headers: None,
                },
            );
        }
        drop(keys);
        self.queue.add_drops(scratch.dropped());
        for d in drops {
            if d.reason == DropReason::DeserializationError {
                self.ctx.warn(
                    py,
                    &format!(
                        "Skipping record due to deserialization error. topic=[{}] \
                         partition=[{}] offset=[{}]",
                        self.ctx.topic, self.ctx.partition, d.offset
                    ),
                );
            } else {
                self.ctx.log_drop(py, d);
            }
        }
        match stop {
            None => Ok(self.queue.len()),
            Some(e) => Err(to_py(py, e)),
        }
    }

    /// Arrow input with a Python component: rows become Python objects, then the list path.
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
            Ok(Raw {
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
                if let Some(other) = parts.iter().flatten().find(|p| *p != self.ctx.partition) {
                    return Err(PyValueError::new_err(format!(
                        "the batch holds records of partition {other}, but this queue is for \
                         topic '{}' partition {}",
                        self.ctx.topic, self.ctx.partition
                    )));
                }
            }
        }
        Ok(())
    }

    fn stamped(&self, py: Python<'_>, r: &Stamped<Held>) -> PyResult<Py<StampedRecord>> {
        Py::new(
            py,
            StampedRecord {
                topic: self.ctx.topic_py.clone_ref(py),
                partition: self.ctx.partition,
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
        let handler = match deserialization_exception_handler {
            Some(h) if !h.is_none() => handler_from(&h)?,
            _ => Handler::Fail,
        };
        let logger = py
            .import("logging")?
            .call_method1("getLogger", ("streamstate.record_queue",))?
            .unbind();
        Ok(PyRecordQueue {
            ctx: Ctx {
                topic: topic.to_str()?.to_owned(),
                topic_py: topic.unbind(),
                partition,
                key: deser_from(key_deserializer.as_ref())?,
                value: deser_from(value_deserializer.as_ref())?,
                extractor: extract_from(timestamp_extractor.as_ref())?,
                handler,
                logger,
                keys: Mutex::new(KeyCache::default()),
            },
            queue: RecordQueue::new(),
        })
    }

    /// The topic this queue buffers.
    #[getter]
    fn topic(&self, py: Python<'_>) -> Py<PyString> {
        self.ctx.topic_py.clone_ref(py)
    }

    /// The partition this queue buffers.
    #[getter]
    fn partition(&self) -> i32 {
        self.ctx.partition
    }

    /// Deserializes, stamps and queues a batch eagerly, in order; returns the queue's size.
    fn add_raw_records(&mut self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<usize> {
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
            self.ctx.topic,
            self.ctx.partition,
            self.queue.len(),
            self.queue.partition_time()
        )
    }
}

/// Kafka Streams' PartitionGroup over Python-held `RecordQueue`s (see `streamstate.PartitionGroup`).
#[pyclass(module = "streamstate._core", name = "PartitionGroup")]
pub struct PyPartitionGroup {
    partitions: Vec<Py<PyAny>>,
    queues: Vec<Py<PyRecordQueue>>,
    index: Py<PyDict>,
    stream_time: i64,
}

impl PyPartitionGroup {
    fn lookup(&self, py: Python<'_>, tp: &Bound<'_, PyAny>) -> PyResult<usize> {
        match self.index.bind(py).get_item(tp)? {
            Some(i) => i.extract(),
            None => Err(PyKeyError::new_err(format!(
                "partition {} not found in this PartitionGroup",
                describe_partition(tp)
            ))),
        }
    }
}

#[pymethods]
impl PyPartitionGroup {
    #[new]
    fn new(py: Python<'_>, queues: &Bound<'_, PyAny>) -> PyResult<Self> {
        let index = PyDict::new(py);
        let mut partitions = Vec::new();
        let mut qs = Vec::new();
        let items = queues.call_method0("items")?;
        for (i, item) in items.try_iter()?.enumerate() {
            let (tp, q): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            let q = q.cast::<PyRecordQueue>().map_err(|_| {
                PyTypeError::new_err(format!("the queue for {} is not a RecordQueue", tp))
            })?;
            index.set_item(&tp, i)?;
            partitions.push(tp.unbind());
            qs.push(q.clone().unbind());
        }
        Ok(PyPartitionGroup {
            partitions,
            queues: qs,
            index: index.unbind(),
            stream_time: NOT_KNOWN,
        })
    }

    /// Adds a batch to the queue of `tp`; returns that queue's size.
    fn add_raw_records(
        &self,
        py: Python<'_>,
        tp: &Bound<'_, PyAny>,
        records: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        let i = self.lookup(py, tp)?;
        self.queues[i]
            .bind(py)
            .borrow_mut()
            .add_raw_records(py, records)
    }

    /// The record with the lowest head timestamp across the queues, with its queue.
    fn next_record<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<Option<(Py<StampedRecord>, Py<PyRecordQueue>)>> {
        let heads = self.queues.iter().map(|q| {
            let q = q.bind(py).borrow();
            q.queue.head().map(|r| r.timestamp)
        });
        let Some(i) = CorePartitionGroup::<()>::next_index(heads) else {
            return Ok(None);
        };
        let queue = self.queues[i].clone_ref(py);
        let record = queue.bind(py).borrow_mut().poll_one(py)?;
        Ok(match record {
            Some(r) => {
                let ts = r.get().timestamp;
                if ts > self.stream_time {
                    self.stream_time = ts;
                }
                Some((r, queue))
            }
            None => None,
        })
    }

    /// Highest timestamp returned by `next_record`; `NOT_KNOWN` before any.
    #[getter]
    fn stream_time(&self) -> i64 {
        self.stream_time
    }

    fn num_buffered(&self, py: Python<'_>) -> usize {
        self.queues
            .iter()
            .map(|q| q.bind(py).borrow().queue.len())
            .sum()
    }

    fn all_partitions_buffered(&self, py: Python<'_>) -> bool {
        self.queues
            .iter()
            .all(|q| !q.bind(py).borrow().queue.is_empty())
    }

    fn partition_time(&self, py: Python<'_>, tp: &Bound<'_, PyAny>) -> PyResult<i64> {
        let i = self.lookup(py, tp)?;
        Ok(self.queues[i].bind(py).borrow().queue.partition_time())
    }

    /// Sets a partition's time; stream time becomes at least `t`.
    fn set_partition_time(
        &mut self,
        py: Python<'_>,
        tp: &Bound<'_, PyAny>,
        t: i64,
    ) -> PyResult<()> {
        let i = self.lookup(py, tp)?;
        self.queues[i]
            .bind(py)
            .borrow_mut()
            .queue
            .set_partition_time(t);
        if t > self.stream_time {
            self.stream_time = t;
        }
        Ok(())
    }

    /// The queue of `tp`.
    fn queue(&self, py: Python<'_>, tp: &Bound<'_, PyAny>) -> PyResult<Py<PyRecordQueue>> {
        let i = self.lookup(py, tp)?;
        Ok(self.queues[i].clone_ref(py))
    }

    /// The partitions, in the order given.
    fn partitions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.partitions.iter().map(|p| p.clone_ref(py)))
    }

    /// Empties every queue and resets stream time.
    fn clear(&mut self, py: Python<'_>) {
        for q in &self.queues {
            q.bind(py).borrow_mut().clear();
        }
        self.stream_time = NOT_KNOWN;
    }

    fn __len__(&self) -> usize {
        self.queues.len()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRecordQueue>()?;
    m.add_class::<PyPartitionGroup>()?;
    Ok(())
}
