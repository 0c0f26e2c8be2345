//! A queue's serdes, extractor and handler, and the adapter through which the core's
//! admission step ([`Admitter`]) calls them.
//!
//! Built-in components (the classes of `streamstate.serde` / `streamstate.timestamps`, which
//! carry a Rust `_native` object, and the handler names "fail" / "continue") run the core's
//! code without calling into Python. Any other object is called through its Python method: a
//! deserializer's `deserialize(topic, data)`, an extractor's `extract(record, partition_time)`,
//! a callable handler `(record, error) -> "continue" | "fail"`. So is a subclass of a built-in
//! class that overrides that method: the `_native` object it inherits stands only for the
//! methods the library marks (`streamstate._native.NATIVE_MARK`), so the override, unmarked,
//! is what runs. The adapter only converts: every rule and error text is the core's.
//!
//! [`Admitter`]: streamstate_core::admission::Admitter

use std::borrow::Cow;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyString, PyType};
use streamstate_core::admission::{
    extract_input, BuiltIn, Components, DeserializeFailure, ExtractFailure, Handler,
    HandlerFailure, HandlerResponse, KeyValueDeserializer,
};
use streamstate_core::error::CoreError;
use streamstate_core::serde::Deserializer;
use streamstate_core::timestamp::{OnInvalid, TimestampExtractor};
use streamstate_core::value::Value;

use crate::convert::{value_to_py_cached, KeyCache};
use crate::errors::to_py;
use crate::message::RawRecord;
use crate::records::ConsumerRecord;
use crate::serde::{NativeDeserializer, NativeExtractor};

static STREAMS_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// A serde, extractor or handler: the core's own, or a Python object that is called.
pub enum Component<T> {
    Native(T),
    Python(Py<PyAny>),
}

/// The serdes, extractor and handler of one queue.
pub struct QueueComponents {
    pub key: Component<Deserializer>,
    pub value: Component<Deserializer>,
    pub extractor: Component<TimestampExtractor>,
    pub handler: Component<Handler>,
    /// Whether the built-in extractor reads the decoded value (JSON field): then the value's
    /// `Value` is kept until the timestamp is extracted.
    keep_value: bool,
}

/// The mark (`streamstate._native.NATIVE_MARK`) of a method whose work `_native` does.
const NATIVE_MARK: &str = "_streamstate_native";

/// The core object inside a built-in component (its `_native` attribute is an `N`, and its
/// `method` is the marked one the library wrote, not a subclass's override), or else the
/// Python object itself, which must have the method that will be called.
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
            // A bound method reads its function's attributes.
            let marked = obj
                .getattr(method)
                .and_then(|m| m.hasattr(NATIVE_MARK))
                .unwrap_or(false);
            if marked {
                return Ok(Component::Native(core(n.get())));
            }
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

/// `None` (not given) and Python's `None` alike.
fn given<'a, 'py>(obj: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    obj.filter(|o| !o.is_none())
}

fn deserializer_from(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Component<Deserializer>> {
    match given(obj) {
        None => Ok(Component::Native(Deserializer::Bytes)),
        Some(obj) => component_from(
            obj,
            |n: &NativeDeserializer| n.inner.clone(),
            "deserializer",
            "deserialize",
            "topic, data",
        ),
    }
}

fn extractor_from(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Component<TimestampExtractor>> {
    match given(obj) {
        None => Ok(Component::Native(TimestampExtractor::RecordTimestamp(
            OnInvalid::Fail,
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

fn handler_from(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Component<Handler>> {
    let Some(obj) = given(obj) else {
        return Ok(Component::Native(Handler::Fail));
    };
    if let Ok(s) = obj.cast::<PyString>() {
        return match s.to_str()? {
            "fail" => Ok(Component::Native(Handler::Fail)),
            "continue" => Ok(Component::Native(Handler::Continue)),
            other => Err(PyValueError::new_err(format!(
                "deserialization_exception_handler must be 'fail', 'continue' or a callable, \
                 got {other:?}"
            ))),
        };
    }
    if obj.is_callable() {
        return Ok(Component::Python(obj.clone().unbind()));
    }
    Err(PyTypeError::new_err(
        "deserialization_exception_handler must be 'fail', 'continue' or a callable",
    ))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

impl QueueComponents {
    /// The components `RecordQueue(...)` was given (`None`: the default).
    pub fn new(
        key: Option<&Bound<'_, PyAny>>,
        value: Option<&Bound<'_, PyAny>>,
        extractor: Option<&Bound<'_, PyAny>>,
        handler: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let extractor = extractor_from(extractor)?;
        let keep_value = matches!(
            extractor,
            Component::Native(TimestampExtractor::JsonField { .. })
        );
        Ok(QueueComponents {
            key: deserializer_from(key)?,
            value: deserializer_from(value)?,
            extractor,
            handler: handler_from(handler)?,
            keep_value,
        })
    }

    /// The components when every one is built in: a batch can then be admitted without the GIL.
    pub fn built_in(&self) -> Option<BuiltIn> {
        match (&self.key, &self.value, &self.extractor, &self.handler) {
            (
                Component::Native(key),
                Component::Native(value),
                Component::Native(extractor),
                Component::Native(handler),
            ) => Some(BuiltIn {
                key: key.clone(),
                value: value.clone(),
                extractor: extractor.clone(),
                handler: *handler,
            }),
            _ => None,
        }
    }

    /// The extractor's name, for the negative-timestamp warning.
    pub fn extractor_name(&self, py: Python<'_>) -> String {
        match &self.extractor {
            Component::Native(e) => format!("{e:?}"),
            Component::Python(o) => type_name(o.bind(py)),
        }
    }
}

/// The adapter the core's admission step calls for one batch of a queue.
pub struct PyComponents<'a, 'py> {
    pub py: Python<'py>,
    pub parts: &'a QueueComponents,
    pub topic: &'a Py<PyString>,
    pub partition: i32,
    /// Field names of decoded objects, reused across records.
    pub keys: &'a mut KeyCache,
}

impl<'py> PyComponents<'_, 'py> {
    /// Deserializes one key or value. Returns the Python object and, when `keep` is set, the
    /// decoded `Value` (for the built-in extractor).
    fn decode(
        &mut self,
        de: &Component<Deserializer>,
        raw: &Bound<'py, PyAny>,
        keep: bool,
    ) -> Result<(Py<PyAny>, Option<Value>), DeserializeFailure> {
        let py = self.py;
        let failure = |de: &'static str, reason: String| DeserializeFailure {
            deserializer: Cow::Borrowed(de),
            reason,
        };
        match de {
            Component::Native(Deserializer::Bytes) => {
                // Bytes stay the very object the client handed over: no copy.
                if raw.is_none() || raw.cast::<PyBytes>().is_ok() {
                    return Ok((raw.clone().unbind(), None));
                }
                let copied: Vec<u8> = raw.extract().map_err(|_| {
                    failure(
                        Deserializer::Bytes.name(),
                        format!("expected bytes, got {}", type_name(raw)),
                    )
                })?;
                Ok((PyBytes::new(py, &copied).into_any().unbind(), None))
            }
            Component::Native(de) => {
                let decoded = if raw.is_none() {
                    de.deserialize(None)
                } else if let Ok(b) = raw.cast::<PyBytes>() {
                    de.deserialize(Some(b.as_bytes()))
                } else {
                    let copied: Vec<u8> = raw.extract().map_err(|_| {
                        failure(de.name(), format!("expected bytes, got {}", type_name(raw)))
                    })?;
                    de.deserialize(Some(&copied))
                }
                .map_err(|e| DeserializeFailure::of(de, e))?;
                let obj = value_to_py_cached(py, &decoded, self.keys)
                    .map_err(|e| failure(de.name(), e.to_string()))?;
                Ok((obj.unbind(), keep.then_some(decoded)))
            }
            Component::Python(obj) => {
                let obj = obj.bind(py);
                let out = obj
                    .call_method1(intern!(py, "deserialize"), (self.topic.bind(py), raw))
                    .map_err(|e| DeserializeFailure {
                        deserializer: Cow::Owned(type_name(obj)),
                        reason: e.value(py).str().map(|s| s.to_string()).unwrap_or_default(),
                    })?;
                Ok((out.unbind(), None))
            }
        }
    }

    /// A `ConsumerRecord` of this queue with the given key and value.
    fn consumer_record(
        &self,
        raw: &RawRecord<'py>,
        key: Py<PyAny>,
        value: Py<PyAny>,
    ) -> PyResult<Py<ConsumerRecord>> {
        let py = self.py;
        Py::new(
            py,
            ConsumerRecord {
                topic: self.topic.clone_ref(py),
                partition: self.partition,
                offset: raw.offset,
                timestamp: raw.timestamp,
                key,
                value,
                headers: raw
                    .headers
                    .as_ref()
                    .map_or_else(|| py.None(), |h| h.clone().unbind()),
                timestamp_type_id: raw.timestamp_type,
            },
        )
    }
}

impl<'py> KeyValueDeserializer<RawRecord<'py>> for PyComponents<'_, 'py> {
    type Key = Py<PyAny>;
    /// The value object, and its decoded `Value` when the extractor reads it.
    type Value = (Py<PyAny>, Option<Value>);

    fn deserialize_key(&mut self, raw: &RawRecord<'py>) -> Result<Py<PyAny>, DeserializeFailure> {
        let parts = self.parts;
        Ok(self.decode(&parts.key, &raw.key, false)?.0)
    }

    fn deserialize_value(
        &mut self,
        raw: &RawRecord<'py>,
    ) -> Result<(Py<PyAny>, Option<Value>), DeserializeFailure> {
        let parts = self.parts;
        self.decode(&parts.value, &raw.value, parts.keep_value)
    }
}

impl<'py> Components<RawRecord<'py>> for PyComponents<'_, 'py> {
    type Error = PyErr;

    fn extract(
        &mut self,
        raw: &RawRecord<'py>,
        key: &Py<PyAny>,
        value: &(Py<PyAny>, Option<Value>),
        partition_time: i64,
    ) -> Result<i64, ExtractFailure<PyErr>> {
        let py = self.py;
        match &self.parts.extractor {
            Component::Native(extractor) => {
                let raw_bytes = raw.value.cast::<PyBytes>().ok();
                let input = extract_input(
                    raw.timestamp,
                    value.1.as_ref(),
                    raw_bytes.as_ref().map(|b| b.as_bytes()),
                );
                extractor
                    .extract(&input, partition_time)
                    .map_err(ExtractFailure::Invalid)
            }
            Component::Python(extractor) => {
                let record = self
                    .consumer_record(raw, key.clone_ref(py), value.0.clone_ref(py))
                    .map_err(ExtractFailure::Raised)?;
                let out = extractor
                    .bind(py)
                    .call_method1(intern!(py, "extract"), (record, partition_time))
                    .map_err(ExtractFailure::Raised)?;
                out.extract::<i64>().map_err(|_| {
                    ExtractFailure::Unusable(PyTypeError::new_err(format!(
                        "the timestamp extractor returned {}, not an int (topic '{}', \
                         partition {}, offset {})",
                        out.repr().map(|r| r.to_string()).unwrap_or_default(),
                        self.topic.bind(py),
                        self.partition,
                        raw.offset
                    )))
                })
            }
        }
    }

    fn handle(
        &mut self,
        raw: &RawRecord<'py>,
        error: &CoreError,
    ) -> Result<HandlerResponse, HandlerFailure<PyErr>> {
        let py = self.py;
        let handler = match &self.parts.handler {
            Component::Native(handler) => return Ok(handler.response()),
            Component::Python(handler) => handler.bind(py),
        };
        let record = self
            .consumer_record(raw, raw.key.clone().unbind(), raw.value.clone().unbind())
            .map_err(HandlerFailure::Raised)?;
        let error = to_py(py, error.clone());
        let answer = handler
            .call1((record, error.value(py)))
            .map_err(HandlerFailure::Raised)?;
        // A string, or an enum member whose value is one ("continue" / "fail").
        let answer = answer
            .extract::<String>()
            .or_else(|_| answer.getattr("value").and_then(|v| v.extract::<String>()))
            .unwrap_or_default()
            .to_lowercase();
        match answer.as_str() {
            "continue" => Ok(HandlerResponse::Continue),
            "fail" => Ok(HandlerResponse::Fail),
            _ => Err(HandlerFailure::Unknown(answer)),
        }
    }

    fn error(&mut self, error: CoreError) -> PyErr {
        to_py(self.py, error)
    }

    fn is_streams_error(&mut self, error: &PyErr) -> bool {
        STREAMS_ERROR
            .import(self.py, "streamstate.errors", "StreamsError")
            .is_ok_and(|cls| error.is_instance(self.py, cls))
    }

    fn caused_by(&mut self, error: CoreError, cause: PyErr) -> PyErr {
        let error = to_py(self.py, error);
        error.set_cause(self.py, Some(cause));
        error
    }
}
