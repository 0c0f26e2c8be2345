//! `Value` <-> Python objects: the one place where decoded data changes sides.

use std::collections::HashMap;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use streamstate_core::value::Value;

static UUID_CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn uuid_class(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    UUID_CLASS.import(py, "uuid", "UUID")
}

/// Python strings for the field names of decoded objects, reused across records: a stream of
/// JSON or Avro values repeats the same few keys, and building each key afresh would cost
/// more than parsing it (CPython's `json` memoizes keys for the same reason).
#[derive(Default)]
pub struct KeyCache {
    keys: HashMap<String, Py<PyString>>,
}

impl KeyCache {
    /// Caches keys up to this many; a stream with unbounded distinct keys stops caching.
    const CAPACITY: usize = 4096;

    fn key<'py>(&mut self, py: Python<'py>, k: &str) -> Bound<'py, PyString> {
        if let Some(s) = self.keys.get(k) {
            return s.bind(py).clone();
        }
        let s = PyString::new(py, k);
        if self.keys.len() < Self::CAPACITY {
            self.keys.insert(k.to_owned(), s.clone().unbind());
        }
        s
    }
}

/// Builds the Python object for a decoded value (JSON objects and Avro records become dicts,
/// UUIDs `uuid.UUID`).
pub fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    value_to_py_cached(py, value, &mut KeyCache::default())
}

/// `value_to_py` with field names taken from (and added to) `cache`.
pub fn value_to_py_cached<'py>(
    py: Python<'py>,
    value: &Value,
    cache: &mut KeyCache,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Short(v) => v.into_pyobject(py)?.into_any(),
        Value::Int(v) => v.into_pyobject(py)?.into_any(),
        Value::Long(v) => v.into_pyobject(py)?.into_any(),
        Value::UnsignedLong(v) => v.into_pyobject(py)?.into_any(),
        Value::Float(v) => PyFloat::new(py, f64::from(*v)).into_any(),
        Value::Double(v) => PyFloat::new(py, *v).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Uuid(u) => {
            let kwargs = PyDict::new(py);
            kwargs.set_item("bytes", PyBytes::new(py, u))?;
            uuid_class(py)?.call((), Some(&kwargs))?
        }
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py_cached(py, item, cache)?)?;
            }
            list.into_any()
        }
        Value::Map(entries) => {
            let dict = PyDict::new(py);
            for (k, v) in entries {
                dict.set_item(cache.key(py, k), value_to_py_cached(py, v, cache)?)?;
            }
            dict.into_any()
        }
    })
}

/// Reads a Python object as a `Value`, for the serializers.
pub fn py_to_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        if let Ok(v) = i.extract::<i64>() {
            return Ok(Value::Long(v));
        }
        if let Ok(v) = i.extract::<u64>() {
            return Ok(Value::UnsignedLong(v));
        }
        return Err(PyValueError::new_err("integer out of the 64-bit range"));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Double(f.value()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    let py = obj.py();
    if obj.is_instance(uuid_class(py)?)? {
        let raw: Vec<u8> = obj.getattr("bytes")?.extract()?;
        let mut u = [0u8; 16];
        u.copy_from_slice(&raw);
        return Ok(Value::Uuid(u));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut entries = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = k
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err("mapping keys must be str"))?
                .to_str()?
                .to_owned();
            entries.push((key, py_to_value(&v)?));
        }
        return Ok(Value::Map(entries));
    }
    if obj.cast::<PyList>().is_ok() || obj.cast::<PyTuple>().is_ok() {
        let mut items = Vec::new();
        for item in obj.try_iter()? {
            items.push(py_to_value(&item?)?);
        }
        return Ok(Value::Array(items));
    }
    if let Ok(ba) = obj.extract::<Vec<u8>>() {
        return Ok(Value::Bytes(ba));
    }
    Err(PyTypeError::new_err(format!(
        "cannot serialize an object of type {}",
        obj.get_type().name()?
    )))
}
