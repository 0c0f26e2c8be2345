//! Native serdes and extractors as Python objects, built from a plain "spec" tuple.
//!
//! The Python classes in `streamstate.serde` / `streamstate.timestamps` hold one of these; a
//! `RecordQueue` finds it and runs the core's implementation without calling into Python.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use streamstate_core::error::{CoreError, ErrorKind, Location};
use streamstate_core::serde::{AvroDeserializer, AvroSerializer, Deserializer, Serializer};
use streamstate_core::timestamp::{ExtractInput, OnInvalid, TimeUnit, TimestampExtractor};

use crate::convert::{py_to_value, value_to_py};
use crate::errors::{guard, streams_error, to_py};

fn spec_name(spec: &Bound<'_, PyTuple>) -> PyResult<String> {
    spec.get_item(0)?.extract()
}

fn bad_spec(spec: &Bound<'_, PyTuple>) -> PyErr {
    PyValueError::new_err(format!("unknown serde/extractor spec {spec}"))
}

/// Builds a core deserializer from `("long",)`, `("avro", schema_json, schema_id)`, ...
pub fn deserializer_from_spec(spec: &Bound<'_, PyTuple>) -> PyResult<Deserializer> {
    Ok(match spec_name(spec)?.as_str() {
        "bytes" => Deserializer::Bytes,
        "string" => Deserializer::String,
        "short" => Deserializer::Short,
        "integer" => Deserializer::Integer,
        "long" => Deserializer::Long,
        "float" => Deserializer::Float,
        "double" => Deserializer::Double,
        "uuid" => Deserializer::Uuid,
        "json" => Deserializer::Json,
        "avro" => {
            let schema: String = spec.get_item(1)?.extract()?;
            let id: Option<i32> = spec.get_item(2)?.extract()?;
            Deserializer::Avro(
                AvroDeserializer::new(&schema, id)
                    .map_err(|e| PyValueError::new_err(format!("invalid Avro schema: {e}")))?,
            )
        }
        _ => return Err(bad_spec(spec)),
    })
}

fn serializer_from_spec(spec: &Bound<'_, PyTuple>) -> PyResult<Serializer> {
    Ok(match spec_name(spec)?.as_str() {
        "bytes" => Serializer::Bytes,
        "string" => Serializer::String,
        "short" => Serializer::Short,
        "integer" => Serializer::Integer,
        "long" => Serializer::Long,
        "float" => Serializer::Float,
        "double" => Serializer::Double,
        "uuid" => Serializer::Uuid,
        "json" => Serializer::Json,
        "avro" => {
            let schema: String = spec.get_item(1)?.extract()?;
            let id: Option<i32> = spec.get_item(2)?.extract()?;
            Serializer::Avro(
                AvroSerializer::new(&schema, id)
                    .map_err(|e| PyValueError::new_err(format!("invalid Avro schema: {e}")))?,
            )
        }
        _ => return Err(bad_spec(spec)),
    })
}

fn on_invalid(name: &str) -> PyResult<OnInvalid> {
    Ok(match name {
        "fail" => OnInvalid::Fail,
        "skip" => OnInvalid::Skip,
        "partition_time" => OnInvalid::PartitionTime,
        other => {
            return Err(PyValueError::new_err(format!(
                "on_invalid must be 'fail', 'skip' or 'partition_time', got {other:?}"
            )))
        }
    })
}

/// Builds a core extractor from `("record", "fail")`, `("json_field", "a.b", "ms", "skip")`, ...
pub fn extractor_from_spec(spec: &Bound<'_, PyTuple>) -> PyResult<TimestampExtractor> {
    Ok(match spec_name(spec)?.as_str() {
        "record" => TimestampExtractor::RecordTimestamp(on_invalid(
            &spec.get_item(1)?.extract::<String>()?,
        )?),
        "wallclock" => TimestampExtractor::WallClock,
        "json_field" => {
            let path: String = spec.get_item(1)?.extract()?;
            let unit = match spec.get_item(2)?.extract::<String>()?.as_str() {
                "ms" => TimeUnit::Millis,
                "s" => TimeUnit::Seconds,
                "iso8601" => TimeUnit::Iso8601,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "unit must be 'ms', 's' or 'iso8601', got {other:?}"
                    )))
                }
            };
            let policy = on_invalid(&spec.get_item(3)?.extract::<String>()?)?;
            TimestampExtractor::json_field(&path, unit, policy)
                .map_err(|e| PyValueError::new_err(e.to_string()))?
        }
        _ => return Err(bad_spec(spec)),
    })
}

/// A built-in deserializer running in Rust.
#[pyclass(frozen, module = "streamstate._core")]
pub struct NativeDeserializer {
    pub inner: Deserializer,
}

#[pymethods]
impl NativeDeserializer {
    #[new]
    fn new(spec: &Bound<'_, PyTuple>) -> PyResult<Self> {
        Ok(NativeDeserializer {
            inner: deserializer_from_spec(spec)?,
        })
    }

    /// Deserializes one value; `None` gives `None`.
    #[pyo3(signature = (topic, data))]
    fn deserialize<'py>(
        &self,
        py: Python<'py>,
        topic: Option<&str>,
        data: Option<&[u8]>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(py, || match self.inner.deserialize(data) {
            Ok(v) => value_to_py(py, &v),
            Err(e) => Err(streams_error(
                py,
                "DeserializationError",
                &format!("{}: {}", self.inner.name(), e),
                &Location {
                    topic: topic.map(str::to_owned),
                    ..Location::default()
                },
            )),
        })
    }
}

/// A built-in serializer running in Rust.
#[pyclass(frozen, module = "streamstate._core")]
pub struct NativeSerializer {
    inner: Serializer,
}

#[pymethods]
impl NativeSerializer {
    #[new]
    fn new(spec: &Bound<'_, PyTuple>) -> PyResult<Self> {
        Ok(NativeSerializer {
            inner: serializer_from_spec(spec)?,
        })
    }

    /// Kafka's name of the serializer (`"LongSerializer"`, ...): lets a batch path check
    /// which built-in it is.
    #[getter]
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// Serializes one object; `None` gives `None`.
    #[pyo3(signature = (topic, obj))]
    fn serialize<'py>(
        &self,
        py: Python<'py>,
        topic: Option<&str>,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let _ = topic;
        guard(py, || {
            let value = py_to_value(obj)?;
            match self.inner.serialize(&value) {
                Ok(Some(bytes)) => Ok(Some(PyBytes::new(py, &bytes))),
                Ok(None) => Ok(None),
                Err(e) => Err(PyValueError::new_err(format!(
                    "{}: {}",
                    self.inner.name(),
                    e
                ))),
            }
        })
    }
}

/// A built-in timestamp extractor running in Rust.
#[pyclass(frozen, module = "streamstate._core")]
pub struct NativeExtractor {
    pub inner: TimestampExtractor,
}

#[pymethods]
impl NativeExtractor {
    #[new]
    fn new(spec: &Bound<'_, PyTuple>) -> PyResult<Self> {
        Ok(NativeExtractor {
            inner: extractor_from_spec(spec)?,
        })
    }

    /// Extracts the timestamp of `record` (anything with `timestamp` and `value`).
    fn extract(
        &self,
        py: Python<'_>,
        record: &Bound<'_, PyAny>,
        partition_time: i64,
    ) -> PyResult<i64> {
        guard(py, || {
            let record_timestamp: i64 = record.getattr("timestamp")?.extract()?;
            let value_obj = record.getattr("value")?;
            let value = py_to_value(&value_obj).unwrap_or(streamstate_core::value::Value::Null);
            let input = ExtractInput {
                record_timestamp,
                value: &value,
                raw_value: None,
            };
            self.inner.extract(&input, partition_time).map_err(|e| {
                let mut err = CoreError::new(ErrorKind::InvalidTimestamp, e.reason);
                if let (Ok(t), Ok(p), Ok(o)) = (
                    record.getattr("topic").and_then(|v| v.extract::<String>()),
                    record.getattr("partition").and_then(|v| v.extract::<i32>()),
                    record.getattr("offset").and_then(|v| v.extract::<i64>()),
                ) {
                    err = err.at_record(&t, p, o);
                }
                to_py(py, err)
            })
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeDeserializer>()?;
    m.add_class::<NativeSerializer>()?;
    m.add_class::<NativeExtractor>()?;
    Ok(())
}
